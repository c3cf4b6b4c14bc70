"""Benchmark: training steps of the reference and the fast reversal model, in one run.

    python bench/bench_reversal.py --out results/bench [--steps 50 --blocks 5 --threads 2]

Both implementations train the same recipe (the paper's, from config/config.yaml) on the
same batches. After a warm-up, blocks of `--steps` steps alternate between them, so a busy
machine slows both alike; the summary uses the median block. The same run measures what the
machine can do: the fp32 (and bf16) matmul peak at the same thread count, and the FLOPs of
one training step (torch.utils.flop_counter), hence achieved GFLOP/s and fraction of peak.
Writes bench.csv (one row per block) and bench.md (the summary, and a profile of the fast
step with --profile). Times are for reading, never for tests.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from tcrformer.core.config import apply_receptor
from tcrformer.core.io import write_csv, write_text
from tcrformer.training.data import random_batch
from tcrformer.training.loop import make_step, new_run
from tcrformer.training.recipe import recipe_from_config, with_overrides

ROOT = Path(__file__).resolve().parents[1]


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 5) -> float:
    """Best GFLOP/s of a square matmul: what this machine's BLAS reaches at this thread count."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    a @ b
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Trainer:
    """One implementation's model, optimizer and step function, fed from a shared batch list."""

    def __init__(self, label: str, recipe):
        self.label, self.recipe = label, recipe
        run = new_run(recipe, torch.device("cpu"))
        self.step = make_step(recipe, run.model, run.optimizer, run.scheduler, run.device)
        self.done = 0

    def run(self, batches) -> float:
        start = time.perf_counter()
        for src, tgt in batches:
            self.step(src, tgt)
        self.done += len(batches)
        return time.perf_counter() - start

    def flops(self, batch) -> int:
        with FlopCounterMode(display=False) as counter:
            self.step(*batch)
        return counter.get_total_flops()


MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def profile_table(trainer: Trainer, batches, rows: int = 15) -> tuple[str, float]:
    """torch.profiler's table of the step, and the share of its operator time in matmuls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.run(batches)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    products = sum(e.self_cpu_time_total for e in events if e.key in MATRIX_PRODUCTS)
    table = events.table(sort_by="self_cpu_time_total", row_limit=rows)
    return table, products / total


def main(argv=None, section: dict | None = None) -> None:
    """Run the benchmark; `section` is the config's `reversal:` block (default: --config)."""
    parser = argparse.ArgumentParser(description="Reference vs fast reversal training steps.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    parser.add_argument("--steps", type=int, default=50, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=5, help="timed blocks per implementation")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="also time fast + torch.compile")
    parser.add_argument("--profile", action="store_true", help="profile the fast step")
    parser.add_argument("--peak-size", type=int, default=2048,
                        help="side of the square matmuls that measure the peak")  # fmt: skip
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    if section is None:
        section = apply_receptor(yaml.safe_load(args.config.read_text()))["reversal"]
    paper = recipe_from_config(section)
    variants = {
        "reference": {"impl": "reference", "compile": False},
        "fast": {"impl": "fast", "compile": False},
    }
    if args.compile:
        variants["fast+compile"] = {"impl": "fast", "compile": True}
    trainers = {}
    for label, change in variants.items():
        trainers[label] = Trainer(label, with_overrides(paper, device="cpu", **change))

    generator = torch.Generator().manual_seed(0)
    batches = [
        random_batch(paper.batch_size, paper.min_len, paper.max_len, generator)
        for _ in range(args.steps)
    ]
    first_step = {label: t.run(batches[:1]) for label, t in trainers.items()}  # incl. compile
    for trainer in trainers.values():
        trainer.run(batches[: args.warmup])
    flops = {label: t.flops(batches[0]) for label, t in trainers.items()}

    rows = []
    peak32 = [matmul_peak(torch.float32, args.peak_size)]
    for block in range(args.blocks):
        for label, trainer in trainers.items():
            seconds = trainer.run(batches)
            rows.append(
                {
                    "block": block,
                    "impl": label,
                    "steps": len(batches),
                    "seconds": round(seconds, 4),
                    "steps_per_s": round(len(batches) / seconds, 3),
                }
            )
            print(f"block {block} {label:>13}: {len(batches) / seconds:6.2f} steps/s", flush=True)
        peak32.append(matmul_peak(torch.float32, args.peak_size))
    peak16 = matmul_peak(torch.bfloat16, args.peak_size)

    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "bench.csv", frame)
    summary = summarise(frame, flops, max(peak32), peak16, first_step, paper, args)
    if args.profile:
        table, share = profile_table(trainers["fast"], batches[:10])
        rate = frame[frame.impl == "fast"].steps_per_s.median()
        ceiling = rate / share / frame[frame.impl == "reference"].steps_per_s.median()
        summary += "\n## Where the fast step spends its time (torch.profiler, 10 steps)\n\n"
        summary += (
            f"Matrix products ({', '.join(MATRIX_PRODUCTS)}) take {share:.0%} of the operator "
            f"time. If everything else cost nothing, fast would run at about {ceiling:.1f}x "
            "the reference; more than that needs faster matrix products at these shapes.\n\n"
        )
        summary += "```\n" + table + "\n```\n"
    write_text(args.out / "bench.md", summary)
    print(summary)


def summarise(frame, flops, peak32, peak16, first_step, recipe, args) -> str:
    rate = {label: statistics.median(g["steps_per_s"]) for label, g in frame.groupby("impl")}
    lines = [
        "# Reversal training benchmark",
        "",
        f"Paper recipe (batch {recipe.batch_size}, d_model {recipe.d_model}, "
        f"{recipe.num_layers}+{recipe.num_layers} layers), fp32, CPU, {args.threads} threads, "
        f"torch {torch.__version__}. {args.blocks} alternating blocks of {args.steps} steps "
        f"after {args.warmup} warm-up steps; median block.",
        "",
        f"Matmul peak measured in this run: fp32 {peak32:.0f} GFLOP/s, "
        f"bf16 {peak16:.0f} GFLOP/s (2048x2048, best of 5).",
        "",
        "Executed GFLOP counts what the step runs (torch.utils.flop_counter); the fast step "
        "skips padding rows, so it executes fewer than the reference for the same batch. "
        "'Reference work' rates both by the reference's count: the same training, per second.",
        "",
        "| impl | steps/s | x reference | executed GFLOP/step | executed GFLOP/s "
        "| fraction of fp32 peak | reference work, fraction of peak "
        "| first step (s) | est. 3,000 steps (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    work = flops["reference"] / 1e9
    for label, steps_per_s in rate.items():
        gflop = flops[label] / 1e9
        lines.append(
            f"| {label} | {steps_per_s:.2f} | {steps_per_s / rate['reference']:.2f} | "
            f"{gflop:.2f} | {gflop * steps_per_s:.0f} | {gflop * steps_per_s / peak32:.0%} | "
            f"{work * steps_per_s / peak32:.0%} | "
            f"{first_step[label]:.2f} | {recipe.steps / steps_per_s:.0f} |"
        )
    return "\n".join(lines) + "\n"


def from_snakemake(smk) -> None:
    """Rule `bench`: the same run, its output folder and threads from the rule."""
    with open(smk.log[0], "w") as log:
        sys.stdout = sys.stderr = log
        main(
            ["--out", str(Path(smk.output.csv).parent), "--threads", str(smk.threads), "--profile"],
            section=smk.config["reversal"],
        )


if "snakemake" in globals():  # run by the rule's script: directive
    from_snakemake(globals()["snakemake"])
elif __name__ == "__main__":
    main()
