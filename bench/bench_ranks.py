"""Benchmark: one training run on every core. Data-parallel ranks against one rank, native
numerics and the study notes' own training, side by side in one run.

    python bench/bench_ranks.py --out /tmp/bench [--steps 100 --warmup 20 --blocks 3]
                                [--variants 1rank,half,2ranks,notes]
    snakemake --cores 2 bench_ranks       # results/<run>/bench/ranks.{csv,md}

Every block is a fresh process (torch reads its numerics when it is imported), and the
variants alternate block by block, so a machine that gets busier slows all alike; the
summary takes each variant's median block. Two rates per block: steps/s after the warm-up
steps (the training alone), and the whole process's, its warm-up + steps over the seconds
from its start to the end of its training (Python's start, the imports, the ranks' start,
as a user pays them; as the rule script does, ranks 1..R-1 start before torch is imported).
Variants (`--variants`: their keys, comma-separated; all by default):

    1rank, 2ranks       this repository's training, numerics.mode portable, 1 thread a rank,
                        its matrix products on OpenBLAS's Haswell kernels (core.blas);
                        2 ranks is the default run's training
    half                one portable rank on half the batch: what each of 2 ranks computes
    pair                two such processes at once, independent: 2 ranks with nothing shared,
                        on a machine whose two cores both work (its rate: their mean)
    mkl                 portable, with the kernels unavailable: MKL COMPATIBLE products, the
                        fallback, and what portable mode ran before the kernels
    native1, native2    the fast path's code paths for this CPU, 1 or 2 intra-op threads
    notes               the reference model (models/transformer.py, the study notes' code)
                        under torch's defaults: native code paths, every core's threads

Each block also reports the FLOPs of one training step (torch.utils.flop_counter, counted
once per variant, after the timing) over its time: the achieved rate, and its fraction of
the AVX2 peak of the cores the variant uses (2 FMA units x 8 floats x 2 FLOPs a cycle, at
the CPU's clock). Times are for reading, never for tests; the ratios are what to compare.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if "snakemake" in globals():  # the rule's script: directive runs a copy under .snakemake/
    ROOT = Path(globals()["snakemake"].scriptdir).resolve().parent
else:
    ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "bench_ranks.py"
# fmt: off
VARIANTS = {  # key: (label, numerics mode, ranks, threads a rank or None for torch's
    #                  default, impl, the batch's share a process trains on, the portable
    #                  kernels?, processes side by side)
    "1rank": ("portable, 1 rank", "portable", 1, 1, "fast", 1, True, 1),
    "mkl": ("portable, 1 rank, MKL COMPATIBLE products", "portable", 1, 1, "fast", 1, False, 1),
    "half": ("portable, 1 rank, half the batch", "portable", 1, 1, "fast", 2, True, 1),
    "pair": ("portable, 2 independent processes, half the batch each",
             "portable", 1, 1, "fast", 2, True, 2),
    "2ranks": ("portable, 2 ranks (the default)", "portable", 2, 1, "fast", 1, True, 1),
    "native1": ("native, 1 thread", "native", 1, 1, "fast", 1, False, 1),
    "native2": ("native, 2 threads", "native", 1, 2, "fast", 1, False, 1),
    "notes": ("notes' training (reference, torch defaults)", "native", 1, None, "reference",
              1, False, 1),
}
# fmt: on
BASE, HALF, PAIR, DEFAULT, NOTES = "1rank", "half", "pair", "2ranks", "notes"
AVX2_FLOPS_PER_CYCLE = 32  # 2 FMA units x 8 float32 lanes x (multiply + add)


def cores_used(ranks: int, threads: int | None) -> int:
    return min(os.cpu_count() or 1, ranks * (threads or os.cpu_count() or 1))


def clock_hz() -> float:
    """The CPU's clock as /proc/cpuinfo gives it (the first core's), in Hz."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) * 1e6
    except OSError:
        pass
    return float("nan")


def step_flops(recipe) -> float:
    """FLOPs of one training step of `recipe` (forward and backward), counted by torch."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tcrformer.core import blas
    from tcrformer.training.loop import make_step, new_run

    run = new_run(recipe, torch.device("cpu"))
    step = make_step(recipe, run.model, run.optimizer, run.scheduler, run.device)
    src, tgt = run.strings.next_batch()
    kernels = blas.active()  # the counter sees torch's ops only: count on them, same math
    blas.deactivate()
    try:
        with FlopCounterMode(display=False) as counter:
            step(src, tgt)
    finally:
        if kernels is not None:
            blas.activate()
    return float(counter.get_total_flops())


def worker(config_path: Path, key: str, steps: int, warmup: int) -> dict:
    """One block in this (fresh) process: pin, import torch, time `steps` training steps."""
    import yaml

    from tcrformer.core import blas, numerics
    from tcrformer.core.config import apply_receptor
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    _, mode, ranks, threads, impl, divisor, kernels, _ = VARIANTS[key]
    config = apply_receptor(yaml.safe_load(config_path.read_text()))
    recipe = recipe_from_config(config["reversal"])
    recipe = with_overrides(recipe, steps=warmup + steps, device="cpu", log_every=10**6,
                            impl=impl, batch_size=recipe.batch_size // divisor)  # fmt: skip
    workers = None
    if threads is None:  # torch's defaults: leave the process alone
        pinned = numerics.pin(numerics.Numerics("native", 1))
        import torch
    else:
        load = blas.activate if kernels else _without_kernels
        pinned = numerics.pin(numerics.Numerics(mode, threads), load=load)
        if ranks > 1:  # as the rule script does: before this process imports torch
            from tcrformer.training.ranks import Workers

            workers = Workers.start(recipe, ranks, threads)
        numerics.configure_torch(pinned, threads)
        import torch
    from tcrformer.training.loop import train

    marks: list[float] = []
    train(recipe, ranks=ranks, workers=workers,
          on_step=lambda step: marks.append(time.perf_counter()))  # fmt: skip
    trained_at = time.time()  # the whole process's end: after the ranks have exited
    seconds = marks[-1] - marks[warmup - 1]
    rate = steps / seconds
    flops = step_flops(with_overrides(recipe, steps=1))
    used = cores_used(ranks, threads if threads is not None else torch.get_num_threads())
    return {
        "steps_per_s": rate,
        "trained_at": trained_at,
        "gflop_per_s": rate * flops / 1e9,
        "peak_fraction": rate * flops / (used * clock_hz() * AVX2_FLOPS_PER_CYCLE),
        "cores": used,
        "threads": torch.get_num_threads(),
        "ranks": ranks,
        "mode": pinned.mode,
        "products": numerics.describe_products(pinned),
    }


def _without_kernels() -> None:
    from tcrformer.core import blas

    raise blas.Unavailable("the benchmark's MKL COMPATIBLE variant")


def run_block(args, key: str) -> dict:
    """One block of `key`: its fresh process(es), timed from their start; with processes side
    by side (pair), their mean rate and the slower one's whole-process time."""
    command = [sys.executable, str(SCRIPT), "--worker", key, "--config", str(args.config),
               "--steps", str(args.steps), "--warmup", str(args.warmup)]  # fmt: skip
    started = time.time()
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                 for _ in range(VARIANTS[key][-1])]  # fmt: skip
    results = []
    for process in processes:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"bench worker {key} exited with {process.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    result = {**results[0], "processes": len(results)}
    for name in ("steps_per_s", "gflop_per_s", "peak_fraction"):
        result[name] = statistics.mean(r[name] for r in results)
    result["process_s"] = max(r.pop("trained_at") for r in results) - started
    result["whole_steps_per_s"] = (args.warmup + args.steps) / result["process_s"]
    del result["trained_at"]
    return result


def summary(args, rate: dict[str, dict], cpu: str) -> str:
    """The median blocks' table, with every ratio whose variants ran."""
    base, notes = rate.get(BASE), rate.get(NOTES)
    lines = [
        "# Ranks benchmark: one training run on every core",
        "",
        f"CPU: {cpu}, {os.cpu_count()} cores. Paper recipe, {args.steps} timed steps after "
        f"{args.warmup} warm-up steps per block, {args.blocks} alternating blocks, median block. "
        "Whole process: warm-up + steps over the seconds from the process's start to the end "
        "of its training.",
        "",
        "| variant | steps/s | x portable 1 rank | x notes' training | whole process (s) "
        "| whole: x portable 1 rank | whole: x notes' training | GFLOP/s | of AVX2 peak |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def ratio(r: dict, other: dict | None, name: str) -> str:
        return f"{r[name] / other[name]:.2f}" if other else "-"

    for key, r in rate.items():
        lines.append(
            f"| {VARIANTS[key][0]} | {r['steps_per_s']:.2f} | {ratio(r, base, 'steps_per_s')} "
            f"| {ratio(r, notes, 'steps_per_s')} | {r['process_s']:.1f} "
            f"| {ratio(r, base, 'whole_steps_per_s')} | {ratio(r, notes, 'whole_steps_per_s')} "
            f"| {r['gflop_per_s']:.1f} | {r['peak_fraction']:.1%} of {r['cores']:.0f} core(s) |"
        )
    lines.append("")
    if base and HALF in rate:
        bound = rate[HALF]["steps_per_s"] / base["steps_per_s"]
        lines.append(
            f"One rank on half the batch runs at {bound:.2f}x one rank on all of it: the most "
            "that 2 ranks could give with no communication, no wait for the slower half and "
            "a second core as fast as the first, since each still pays the whole of a step's "
            "per-operation cost."
        )
    if base and PAIR in rate:
        pair = rate[PAIR]["steps_per_s"]
        lines.append(
            f"Two such processes at once, sharing nothing, run at "
            f"{pair / rate[HALF]['steps_per_s']:.2f}x one alone, if it ran"
            if HALF in rate
            else "Two processes on half the batch at once, sharing nothing"
        )
        lines[-1] += f": the bound with both cores at work is {pair / base['steps_per_s']:.2f}x."
    if base and DEFAULT in rate:
        lines.append(
            f"Two ranks ({DEFAULT}) against one: "
            f"{rate[DEFAULT]['steps_per_s'] / base['steps_per_s']:.2f}x, whole processes "
            f"{rate[DEFAULT]['whole_steps_per_s'] / base['whole_steps_per_s']:.2f}x."
        )
    if notes and DEFAULT in rate:
        lines.append(
            "The default run's training against the notes' training: "
            f"{rate[DEFAULT]['steps_per_s'] / notes['steps_per_s']:.2f}x, whole processes "
            f"{rate[DEFAULT]['whole_steps_per_s'] / notes['whole_steps_per_s']:.2f}x."
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated keys of {', '.join(VARIANTS)}")  # fmt: skip
    parser.add_argument("--worker", metavar="VARIANT")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.config, args.worker, args.steps, args.warmup)))
        return
    keys = args.variants.split(",")
    unknown = [key for key in keys if key not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    import pandas as pd

    from tcrformer.core.io import write_csv, write_text
    from tcrformer.core.numerics import cpu_info

    rows = []
    for block in range(args.blocks):
        for key in keys:
            result = run_block(args, key)
            rows.append({"block": block, "variant": VARIANTS[key][0], **result})
            print(f"block {block} {VARIANTS[key][0]:>56}: {result['steps_per_s']:6.2f} steps/s, "
                  f"whole process {result['process_s']:7.1f} s", flush=True)  # fmt: skip
    measures = ("steps_per_s", "whole_steps_per_s", "process_s", "gflop_per_s",
                "peak_fraction", "cores")  # fmt: skip
    rate = {
        key: {k: statistics.median(r[k] for r in rows if r["variant"] == VARIANTS[key][0])
              for k in measures}
        for key in keys
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "ranks.csv", pd.DataFrame(rows))
    text = summary(args, rate, cpu_info()["model"])
    write_text(args.out / "ranks.md", text)
    print(text)


def from_snakemake(smk) -> None:
    """Rule `bench_ranks`: the same run, into the rule's folder and log."""
    with open(smk.log[0], "w") as log:
        sys.stdout = sys.stderr = log
        main(["--out", str(Path(smk.output.csv).parent)])


if "snakemake" in globals():
    from_snakemake(globals()["snakemake"])
elif __name__ == "__main__":
    main()
