"""Benchmark: the explainer's training code against ours, whole processes side by side.

    python bench/bench_reversal.py --out /tmp/bench [--steps 3000 --reps 3]
    snakemake --cores 2 bench         # results/<run>/bench/bench.{csv,md}; not part of `all`

Each variant trains the paper recipe (config/config.yaml) for `--steps` steps in a fresh
process, timed from the process's start to the end of its training (Python, imports, the
workers' start, the training: what a user pays). Repetitions alternate the variants, so a
machine that gets busier slows all alike; the summary takes each variant's median. Variants:

    explainer           the study notes' code (models/transformer.py) with autograd and
                        torch's Adam, under torch's defaults: native code paths, a thread a core
    explainer_1thread   the same on one thread
    ours                the default run's training: portable numerics, the hand-written step
                        (training.step) on numerics.threads = 2 workers
    ours_1worker        the same on one worker of one thread

The same run measures the machine: the portable OpenBLAS kernels' rate on one core for a
large square product and for the step's own product shapes, and the FLOPs of one training
step (the products of the step, counted by torch.utils.flop_counter on the autograd step
that skips the padding as ours does). Achieved GFLOP/s over the kernels' rate times the
cores a variant uses is its fraction of the AVX2 matrix-product peak. Times are for reading,
never for tests; the ratios are what to compare.
"""

from __future__ import annotations

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
SCRIPT = ROOT / "bench" / "bench_reversal.py"
# key: (label, numerics mode, torch threads (None: torch's default), workers, impl)
VARIANTS = {
    "explainer": ("the explainer's code, torch defaults", "native", None, 1, "reference"),
    "explainer_1thread": ("the explainer's code, 1 thread", "native", 1, 1, "reference"),
    "ours": ("ours, the default (portable, 2 workers)", "portable", 1, 2, "fast"),
    "ours_1worker": ("ours, 1 worker of 1 thread", "portable", 1, 1, "fast"),
}


def worker(config_path: Path, key: str, steps: int) -> dict:
    """One repetition of `key`, in this fresh process: pin, import torch, train."""
    import yaml

    from tcrformer.core import numerics
    from tcrformer.core.config import apply_receptor

    _, mode, threads, workers, impl = VARIANTS[key]
    pinned = numerics.pin(numerics.Numerics(mode, threads or 1))
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    from tcrformer.training.loop import train
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    config = apply_receptor(yaml.safe_load(config_path.read_text()))
    recipe = with_overrides(recipe_from_config(config["reversal"]), steps=steps, device="cpu",
                            log_every=10**6, impl=impl)  # fmt: skip
    trained = train(recipe, workers=workers)
    return {
        "trained_at": time.time(),
        "train_seconds": trained.timing["train_seconds"],
        "step": trained.step,
        "threads": torch.get_num_threads(),
        "workers": workers,
        "mode": pinned.mode,
        "products": numerics.describe_products(pinned),
        "last_loss": float(trained.losses[-1]),
    }


def run_rep(args, key: str) -> dict:
    command = [sys.executable, str(SCRIPT), "--worker", key, "--config", str(args.config),
               "--steps", str(args.steps)]  # fmt: skip
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench worker {key} exited {done.returncode}:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = result.pop("trained_at") - started
    result["steps_per_s"] = args.steps / result["process_s"]
    result["training_steps_per_s"] = args.steps / result["train_seconds"]
    return result


def machine(args) -> dict:
    """The portable kernels' one-core rate (GFLOP/s), the step's FLOPs, the CPU."""
    import yaml

    from tcrformer.core import numerics
    from tcrformer.core.config import apply_receptor

    pinned = numerics.pin(numerics.Numerics("portable", 1))
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tcrformer.core import blas
    from tcrformer.models.products import gemm
    from tcrformer.training.loop import make_step, new_run
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    def rate(m: int, k: int, n: int, repeats: int) -> float:
        a, b, c = torch.randn(m, k), torch.randn(k, n), torch.empty(m, n)
        gemm(a, b, c)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                gemm(a, b, c)
            best = min(best, (time.perf_counter() - start) / repeats)
        return 2 * m * k * n / best / 1e9

    config = apply_receptor(yaml.safe_load(args.config.read_text()))
    recipe = with_overrides(recipe_from_config(config["reversal"]), steps=1, device="cpu")
    run = new_run(recipe, torch.device("cpu"), hand_written=False)
    step = make_step(recipe, run.model, run.optimizer, run.scheduler, run.device)
    kernels = blas.active()  # the counter sees torch's ops only: count on them, same math
    blas.deactivate()
    with FlopCounterMode(display=False) as counter:
        step(*run.strings.next_batch(), 1)
    if kernels is not None:
        blas.activate()
    return {
        "cpu": numerics.cpu_info()["model"],
        "cores": os.cpu_count(),
        "kernels": numerics.describe_products(pinned),
        "gemm_square_gflops": rate(2048, 2048, 2048, 2),
        "gemm_step_shape_gflops": rate(800, 64, 256, 200),  # a chunk's FFN product
        "step_gflop": counter.get_total_flops() / 1e9,
    }


def summary(args, rate: dict[str, dict], facts: dict) -> str:
    explainer, explainer_1 = rate.get("explainer"), rate.get("explainer_1thread")
    peak = facts["gemm_square_gflops"]
    lines = [
        "# The explainer's training code against ours",
        "",
        f"CPU: {facts['cpu']}, {facts['cores']} cores. The paper recipe, {args.steps} steps a "
        f"process, {args.reps} alternating repetitions, median. Whole process: the seconds "
        "from the process's start to the end of its training.",
        "",
        f"The portable kernels ({facts['kernels']}) on one core: {peak:.1f} GFLOP/s for a "
        f"2048-square product, {facts['gemm_step_shape_gflops']:.1f} for a chunk's 800 x 64 "
        f"x 256 product. One step's products: {facts['step_gflop']:.2f} GFLOP.",
        "",
        "| variant | steps/s, whole process | training alone | x explainer's code "
        "| x explainer's code, 1 thread | GFLOP/s | of the kernels' peak on its cores |",
        "|---|---|---|---|---|---|---|",
    ]

    def ratio(r: dict, other: dict | None) -> str:
        return f"{r['steps_per_s'] / other['steps_per_s']:.2f}" if other else "-"

    for key, r in rate.items():
        cores = min(facts["cores"], r["workers"] * r["threads"])
        gflops = r["steps_per_s"] * facts["step_gflop"]
        lines.append(
            f"| {VARIANTS[key][0]} | {r['steps_per_s']:.2f} | {r['training_steps_per_s']:.2f} "
            f"| {ratio(r, explainer)} | {ratio(r, explainer_1)} | {gflops:.1f} "
            f"| {gflops / (peak * cores):.1%} of {cores:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--worker", metavar="VARIANT")
    parser.add_argument("--machine", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.config, args.worker, args.steps)))
        return
    if args.machine:
        print(json.dumps(machine(args)))
        return
    keys = args.variants.split(",")
    unknown = [key for key in keys if key not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    import pandas as pd

    from tcrformer.core.io import write_csv, write_text

    args.out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(SCRIPT), "--machine", "--config", str(args.config)]
    facts = json.loads(subprocess.run(command, capture_output=True, text=True, check=True)
                       .stdout.strip().splitlines()[-1])  # fmt: skip
    (args.out / "machine.json").write_text(json.dumps(facts, indent=2) + "\n")
    rows = []
    for rep in range(args.reps):
        for key in keys if rep % 2 == 0 else reversed(keys):
            result = run_rep(args, key)
            rows.append({"rep": rep, "variant": key, **result})
            write_csv(args.out / "bench.csv", pd.DataFrame(rows))  # so far: a long run's rows
            print(f"rep {rep} {key:>18}: {result['steps_per_s']:6.2f} steps/s whole process, "
                  f"{result['process_s']:7.1f} s", flush=True)  # fmt: skip
    measures = ("steps_per_s", "training_steps_per_s", "process_s", "workers", "threads")
    rate = {key: {m: statistics.median(r[m] for r in rows if r["variant"] == key)
                  for m in measures} for key in keys}  # fmt: skip
    text = summary(args, rate, facts)
    write_text(args.out / "bench.md", text)
    print(text)


def from_snakemake(smk) -> None:
    """Rule `bench`: the same run, into the rule's folder and log."""
    with open(smk.log[0], "w") as log:
        sys.stdout = sys.stderr = log
        main(["--out", str(Path(smk.output.csv).parent)])


if "snakemake" in globals():
    from_snakemake(globals()["snakemake"])
elif __name__ == "__main__":
    main()
