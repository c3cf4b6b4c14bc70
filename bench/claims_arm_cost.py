"""What each claims arm cost: wall and CPU seconds per (arm, seed) job, by arm and machine.

    python bench/claims_arm_cost.py --run results/paper [--out cost_by_arm.md]

Reads the run's Snakemake benchmark files (`benchmarks/train_claim_arm_<arm>_seed<n>.tsv`:
wall `s` and `cpu_time` of the job, its training and evaluation together) and each job's
`claims/arms/<arm>/seed<n>/numerics.json` (the CPU it ran on) and `training_time.json` (the
steps). Jobs that ran on different machines are told apart by CPU model, since one run may
span sessions on different machines. Times are for reading, never for tests.
"""

import argparse
import csv
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

JOB = re.compile(r"train_claim_arm_(?P<arm>.+)_seed(?P<seed>\d+)\.tsv")


def jobs(run: Path) -> list[dict]:
    """One row per finished (arm, seed) job: arm, seed, CPU model, the recipe's steps, whether
    the job resumed from a checkpoint (its times then cover only the rest), wall and CPU s."""
    rows = []
    for bench in sorted((run / "benchmarks").glob("train_claim_arm_*.tsv")):
        name = JOB.fullmatch(bench.name)
        arm_dir = run / "claims" / "arms" / name["arm"] / f"seed{name['seed']}"
        if not (arm_dir / "metrics.json").exists():
            continue  # not finished
        with bench.open() as handle:
            timing = next(csv.DictReader(handle, delimiter="\t"))
        numerics = json.loads((arm_dir / "numerics.json").read_text())
        trained = json.loads((arm_dir / "training_time.json").read_text())
        rows.append({
            "arm": name["arm"], "seed": int(name["seed"]), "cpu": numerics["cpu"]["model"],
            "steps": trained["trained"]["steps"],
            "resumed": trained["resumed_from_step"] > 0, "wall_s": float(timing["s"]),
            "cpu_s": float(timing["cpu_time"]),
        })  # fmt: skip
    return rows


def median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def by_arm(rows: list[dict]) -> list[dict]:
    """Per arm and CPU model: jobs, steps, median wall and CPU seconds of the jobs that ran
    from step 0, total CPU hours of all."""
    groups = defaultdict(list)
    for row in rows:
        groups[(row["arm"], row["cpu"])].append(row)
    return [
        {
            "arm": arm,
            "cpu": cpu,
            "jobs": len(group),
            "steps": "/".join(sorted({str(r["steps"]) for r in group})),
            "resumed": sum(r["resumed"] for r in group),
            "median_wall_s": median(r["wall_s"] for r in group if not r["resumed"]),
            "median_cpu_s": median(r["cpu_s"] for r in group if not r["resumed"]),
            "cpu_h": sum(r["cpu_s"] for r in group) / 3600,
        }  # fmt: skip
        for (arm, cpu), group in sorted(groups.items())
    ]


def markdown(table: list[dict], rows: list[dict]) -> str:
    lines = [
        "| arm | CPU | jobs (resumed) | steps | median wall s | median CPU s | CPU h |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in table:
        lines.append(
            f"| {t['arm']} | {t['cpu']} | {t['jobs']} ({t['resumed']}) | {t['steps']} | "
            f"{t['median_wall_s']:.0f} | {t['median_cpu_s']:.0f} | {t['cpu_h']:.2f} |"
        )
    total = sum(r["cpu_s"] for r in rows) / 3600
    lines.append(f"\n{len(rows)} jobs, {total:.1f} CPU hours in all.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=Path("results/paper"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = jobs(args.run)
    text = markdown(by_arm(rows), rows)
    if args.out:
        args.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
