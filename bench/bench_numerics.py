"""Benchmark: what portable numerics cost, in one run.

    python bench/bench_numerics.py --out /tmp/bench [--steps 60 --blocks 3]

Portable vs native. torch reads its numerics settings once, when it is imported, so
each timed block is a fresh process (`--worker`) that pins the mode, trains the paper recipe
for `--steps` steps after a warm-up and reports steps/s; blocks of the variants alternate,
so a machine that gets busier slows all alike, and the summary takes the median block.
Variants: portable on one worker, native on one worker, native on two workers (the
hand-written step's processes, one torch thread each).
Times are for reading, never for tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

if "snakemake" in globals():  # the rule's script: directive runs a copy under .snakemake/
    ROOT = Path(globals()["snakemake"].scriptdir).resolve().parent
else:
    ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "bench_numerics.py"  # each block's fresh process runs this file
VARIANTS = {  # label: (numerics.mode, the training's workers)
    "portable": ("portable", 1),
    "native, 1 worker": ("native", 1),
    "native, 2 workers": ("native", 2),
}


def worker(config_path: Path, mode: str, workers: int, steps: int, warmup: int) -> dict:
    """One block in this (fresh) process: pin, import torch, time `steps` training steps."""
    import yaml

    from tcrformer.core import numerics
    from tcrformer.core.config import apply_receptor

    config = apply_receptor(yaml.safe_load(config_path.read_text()))
    pinned = numerics.pin(numerics.Numerics(mode, workers))
    numerics.configure_torch(pinned, workers)
    import torch

    from tcrformer.training.loop import train
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    recipe = recipe_from_config(config["reversal"])
    short = with_overrides(recipe, steps=warmup + steps, device="cpu", log_every=10**6)
    marks: list[float] = []
    trained = train(short, workers=workers, on_step=lambda step: marks.append(time.perf_counter()))
    seconds = marks[-1] - marks[warmup - 1]
    return {
        "steps_per_s": steps / seconds,
        "capability": torch.backends.cpu.get_cpu_capability(),
        "workers": trained.timing["workers"],
    }


def run_block(args, mode: str, workers: int) -> dict:
    command = [sys.executable, str(SCRIPT), "--worker", mode, str(workers)]
    command += ["--config", str(args.config), "--steps", str(args.steps)]
    command += ["--warmup", str(args.warmup)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def numerics_part(args) -> tuple[list[dict], dict[str, float]]:
    rows = []
    for block in range(args.blocks):
        for label, (mode, workers) in VARIANTS.items():
            result = run_block(args, mode, workers)
            rows.append({"part": "numerics", "block": block, "variant": label, **result})
            print(f"block {block} {label:>22}: {result['steps_per_s']:6.2f} steps/s", flush=True)
    rate = {
        label: statistics.median(r["steps_per_s"] for r in rows if r["variant"] == label)
        for label in VARIANTS
    }
    return rows, rate


def summary(args, numerics_rate, cpu) -> str:
    lines = [
        "# Numerics benchmark",
        "",
        f"CPU: {cpu}. Paper recipe, {args.steps} timed steps after {args.warmup} warm-up "
        f"steps per block, {args.blocks} alternating blocks, median block.",
        "",
        "## Portable vs native numerics (each block a fresh process)",
        "",
        "| variant | steps/s | x portable |",
        "|---|---|---|",
    ]
    base = numerics_rate["portable"]
    for label, rate in numerics_rate.items():
        lines.append(f"| {label} | {rate:.2f} | {rate / base:.2f} |")
    lines += [
        "",
        "Each worker is a process of one torch thread. Native on one worker isolates what "
        "pinning the instruction set and the products costs; native on 2 workers is "
        "`numerics.mode: native` with the default `numerics.threads`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "WORKERS"))
    args = parser.parse_args(argv)
    if args.worker:
        mode, workers = args.worker[0], int(args.worker[1])
        print(json.dumps(worker(args.config, mode, workers, args.steps, args.warmup)))
        return
    import pandas as pd

    from tcrformer.core.io import write_csv, write_text
    from tcrformer.core.numerics import cpu_info

    numerics_rows, numerics_rate = numerics_part(args)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "numerics.csv", pd.DataFrame(numerics_rows))
    text = summary(args, numerics_rate, cpu_info()["model"])
    write_text(args.out / "numerics.md", text)
    print(text)


def from_snakemake(smk) -> None:
    """Rule `bench_numerics`: the same run, into the rule's folder and log, with the
    interpreter Snakemake chose for the rule (the conda environment's under --sdm conda)."""
    with open(smk.log[0], "w") as log:
        sys.stdout = sys.stderr = log
        main(["--out", str(Path(smk.output.csv).parent)])


if "snakemake" in globals():
    from_snakemake(globals()["snakemake"])
elif __name__ == "__main__":
    main()
