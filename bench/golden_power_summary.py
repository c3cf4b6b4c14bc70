"""The power of the golden check, per injected fault (golden_power.py says which faults).

Every faulty run's values are judged by the golden check with the committed golden file and
bands, exactly as a user's run is; a run is caught when any trained key FAILs. Writes:

    power.csv   one row per (fault, seed): caught, the keys that failed, every value
    power.md    per fault: runs, runs caught, the fraction, the keys that caught it
    power.yaml  the same fractions with their provenance (copied to config/golden/)
"""

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import yaml


def judge_runs(runs: Sequence[Mapping[str, Any]], entries) -> pd.DataFrame:
    """One row per run: fault, seed, caught (0/1), failed_keys, then the run's values."""
    from tcrformer.chapters.ensemble.validate import failed_keys

    rows = []
    for values in runs:
        failed = failed_keys(values, entries)
        rows.append(
            {
                "fault": values["fault"],
                "seed": values["seed"],
                "caught": int(bool(failed)),
                "failed_keys": " ".join(failed),
                **{k: v for k, v in values.items() if k not in ("fault", "seed", "breaks")},
            }
        )
    return pd.DataFrame(rows).sort_values(["fault", "seed"]).reset_index(drop=True)


def power_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per fault: runs, caught, the fraction caught, and the keys that caught it."""
    rows = []
    for fault, group in runs.groupby("fault", sort=True):
        keys = sorted({k for text in group["failed_keys"].fillna("") for k in text.split()})
        rows.append(
            {
                "fault": fault,
                "runs": len(group),
                "caught": int(group["caught"].sum()),
                "power": float(group["caught"].mean()),
                "keys": " ".join(keys),
            }
        )
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, faults: Mapping[str, str]) -> str:
    lines = [
        "| fault | what it breaks | runs | FAIL | power | keys that failed |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        keys = ", ".join(f"`{k}`" for k in row.keys.split()) or "—"
        lines.append(
            f"| `{row.fault}` | {faults.get(row.fault, '')} | {row.runs} | {row.caught} "
            f"| {row.power:.2f} | {keys} |"
        )
    return "\n".join(lines) + "\n"


def main(smk) -> None:
    from tcrformer.core import golden
    from tcrformer.core.io import read_json, write_csv, write_text
    from tcrformer.core.manifest import config_digest, git_state
    from tcrformer.core.numerics import one_line

    entries, _ = golden.load_golden(smk.input.golden)
    runs = [read_json(path) for path in smk.input.values]
    faults = {run["fault"]: run["breaks"] for run in runs}  # what each fault breaks
    judged = judge_runs(runs, entries)
    table = power_table(judged)
    numerics = one_line(read_json(smk.input.numerics[0]))
    record = {
        "provenance": {
            "command": smk.params.command,
            "commit": git_state()["commit"],
            "config_sha256": config_digest(smk.config),
            "golden_file": smk.input.golden,
            "numerics": numerics,
            "date": datetime.date.today().isoformat(),
            "seeds": sorted({int(s) for s in judged["seed"]}),
        },
        "faults": {
            row.fault: {
                "breaks": faults[row.fault],
                "runs": row.runs,
                "caught": row.caught,
                "power": row.power,
                "keys": row.keys.split(),
            }
            for row in table.itertuples(index=False)
        },
    }
    write_csv(smk.output.csv, judged)
    write_text(smk.output.md, markdown(table, faults))
    write_text(smk.output.yaml, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))


if "snakemake" in globals():
    from tcrformer.core.runner import run

    run(main, globals()["snakemake"])
