"""Benchmark: one training run on every core. Data-parallel ranks against one rank, native
numerics and the study notes' own training, side by side in one run.

    python bench/bench_ranks.py --out /tmp/bench [--steps 100 --warmup 20 --blocks 3]
    snakemake --cores 2 bench_ranks       # results/<run>/bench/ranks.{csv,md}

Every block is a fresh process (torch reads its numerics when it is imported), and the
variants alternate block by block, so a machine that gets busier slows all alike; the
summary takes each variant's median block. Variants:

    portable, R ranks   this repository's training, numerics.mode portable, 1 thread a rank,
                        its matrix products on OpenBLAS's Haswell kernels (core.blas)
    portable, MKL COMPATIBLE products
                        the same with the kernels unavailable: the fallback, and what
                        portable mode ran before the kernels
    native, T threads   the fast path's code paths for this CPU, T intra-op threads
    notes' training     the reference model (models/transformer.py, the study notes' code)
                        under torch's defaults: native code paths, every core's threads

Each block also reports the FLOPs of one training step (torch.utils.flop_counter, counted
once per variant) over its time: the achieved rate, and its fraction of the AVX2 peak of the
cores the variant uses (2 FMA units x 8 floats x 2 FLOPs a cycle, at the CPU's clock). Times
are for reading, never for tests; the ratios are what to compare.
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
VARIANTS = {  # label: (numerics mode, ranks, threads a rank or None for torch's default, impl,
    #                   the batch's share a process trains on, the portable kernels?)
    "portable, 1 rank": ("portable", 1, 1, "fast", 1, True),
    "portable, 1 rank, MKL COMPATIBLE products": ("portable", 1, 1, "fast", 1, False),
    "portable, 1 rank, half the batch": ("portable", 1, 1, "fast", 2, True),
    "portable, 2 ranks (the default)": ("portable", 2, 1, "fast", 1, True),
    "native, 1 thread": ("native", 1, 1, "fast", 1, False),
    "native, 2 threads": ("native", 1, 2, "fast", 1, False),
    "notes' training (reference, torch defaults)": ("native", 1, None, "reference", 1, False),
}
HALF = "portable, 1 rank, half the batch"  # what one of 2 ranks computes, with nothing shared
NATIVE_1 = "native, 1 thread"
DEFAULT = "portable, 2 ranks (the default)"
NOTES = "notes' training (reference, torch defaults)"
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


def worker(config_path: Path, variant: str, steps: int, warmup: int) -> dict:
    """One block in this (fresh) process: pin, import torch, time `steps` training steps."""
    import yaml

    from tcrformer.core import blas, numerics
    from tcrformer.core.config import apply_receptor

    mode, ranks, threads, impl, divisor, kernels = VARIANTS[variant]
    config = apply_receptor(yaml.safe_load(config_path.read_text()))
    if threads is None:  # torch's defaults: leave the process alone
        pinned = numerics.pin(numerics.Numerics("native", 1))
        import torch
    else:
        load = blas.activate if kernels else _without_kernels
        pinned = numerics.pin(numerics.Numerics(mode, threads), load=load)
        numerics.configure_torch(pinned, threads)
        import torch
    from tcrformer.training.loop import train
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    recipe = recipe_from_config(config["reversal"])
    recipe = with_overrides(recipe, steps=warmup + steps, device="cpu", log_every=10**6,
                            impl=impl, batch_size=recipe.batch_size // divisor)  # fmt: skip
    marks: list[float] = []
    train(recipe, ranks=ranks, on_step=lambda step: marks.append(time.perf_counter()))
    seconds = marks[-1] - marks[warmup - 1]
    rate = steps / seconds
    flops = step_flops(with_overrides(recipe, steps=1))
    used = cores_used(ranks, threads if threads is not None else torch.get_num_threads())
    return {
        "steps_per_s": rate,
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


def run_block(args, variant: str) -> dict:
    command = [sys.executable, str(SCRIPT), "--worker", variant, "--config", str(args.config),
               "--steps", str(args.steps), "--warmup", str(args.warmup)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(args, rate: dict[str, dict], cpu: str) -> str:
    base = rate["portable, 1 rank"]["steps_per_s"]
    notes = rate[NOTES]["steps_per_s"]
    native = rate[NATIVE_1]["steps_per_s"]
    lines = [
        "# Ranks benchmark: one training run on every core",
        "",
        f"CPU: {cpu}, {os.cpu_count()} cores. Paper recipe, {args.steps} timed steps after "
        f"{args.warmup} warm-up steps per block, {args.blocks} alternating blocks, median block.",
        "",
        "| variant | steps/s | x portable 1 rank | x native 1 thread | x notes' training "
        "| GFLOP/s | of AVX2 peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in rate.items():
        lines.append(
            f"| {label} | {r['steps_per_s']:.2f} | {r['steps_per_s'] / base:.2f} "
            f"| {r['steps_per_s'] / native:.2f} "
            f"| {r['steps_per_s'] / notes:.2f} | {r['gflop_per_s']:.1f} "
            f"| {r['peak_fraction']:.1%} of {r['cores']} core(s) |"
        )
    bound = rate[HALF]["steps_per_s"] / base
    lines += [
        "",
        f"One rank on half the batch runs at {bound:.2f}x one rank on all of it: the most that "
        "2 ranks could give, with no communication and no wait for the slower half, since "
        "each of them still pays the whole of a step's per-operation cost.",
        "",
        f"Portable 1 rank against native 1 thread: {base / native:.2f}x; the default run's "
        f"training ({DEFAULT}) against the notes' training: "
        f"{rate[DEFAULT]['steps_per_s'] / notes:.2f}x.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--worker", metavar="VARIANT")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.config, args.worker, args.steps, args.warmup)))
        return
    import pandas as pd

    from tcrformer.core.io import write_csv, write_text
    from tcrformer.core.numerics import cpu_info

    rows = []
    for block in range(args.blocks):
        for label in VARIANTS:
            result = run_block(args, label)
            rows.append({"block": block, "variant": label, **result})
            print(f"block {block} {label:>44}: {result['steps_per_s']:6.2f} steps/s", flush=True)
    rate = {
        label: {k: statistics.median(r[k] for r in rows if r["variant"] == label)
                for k in ("steps_per_s", "gflop_per_s", "peak_fraction", "cores")}
        for label in VARIANTS
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
