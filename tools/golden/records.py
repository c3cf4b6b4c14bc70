"""What the golden tools read and write: the recipe's inputs, an ensemble's statistics, the
bands file, how a run is judged against it, and the provenance of every record."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from tcrformer.core import golden_file
from tcrformer.training import judged

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_FILE = ROOT / "config/golden/explainer_values.yaml"
FOLDER = ROOT / "config/golden/v4"  # the bands, their fitting data and their records
SIMULATION = FOLDER / "simulation"  # the method's simulations
PREFIX = "reversal"  # the recipe whose runs are judged
PRINTED_STEPS = (500, 1000, 1500, 2000, 2500, 3000)  # the explainer's printed losses


def recipe_inputs() -> tuple[float, float, int]:
    """(budget, label-smoothing floor, eval_n) of the golden file's reversal recipe."""
    from tcrformer.training.schedule import label_smoothing_floor

    data = yaml.safe_load(GOLDEN_FILE.read_text())
    inputs = data["inputs"]["reversal"]
    floor = round(label_smoothing_floor(inputs["reversal.label_smoothing"]), 6)
    return float(data["error_budget"]), floor, int(inputs["reversal.eval_n"])


def bands_in_use() -> Path:
    """The bands file the pipeline judges by: the golden file's `bands:`."""
    return GOLDEN_FILE.parent / yaml.safe_load(GOLDEN_FILE.read_text())["bands"]


def provenance(command: str) -> dict[str, Any]:
    """The command, the commit it ran at, whether tools/ or the library differed from it, and
    the date."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    return {
        "command": command,
        "commit": git("rev-parse", "HEAD").strip(),
        "dirty": bool(git("status", "--porcelain", "tools", "workflow/lib").strip()),
        "date": datetime.date.today().isoformat(),
    }


def rounded(obj):
    """Plain YAML types, floats to 6 significant places past the point (tiny ones as %.6g)."""
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        obj = float(obj)
        if not math.isfinite(obj):
            return obj
        return round(obj, 6) if abs(obj) >= 1e-4 else float(f"{obj:.6g}")
    return obj


def write_yaml(path: Path, record: Mapping, header: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(rounded(dict(record)), sort_keys=False, width=100))
    return path


# Ensembles ------------------------------------------------------------------------------------


def folder_statistics(folder: Path) -> pd.DataFrame:
    """One row per seed of an ensemble folder (curves.csv, seed<s>/values.json): judged.KEYS,
    cdr3_correct and the explainer's printed losses (loss_step<s>)."""
    curves = pd.read_csv(folder / "curves.csv")
    per_seed = {
        int(p.parent.name[4:]): json.loads(p.read_text())
        for p in sorted(Path(folder).glob("seed*/values.json"))
    }
    if not per_seed:
        raise FileNotFoundError(f"{folder}: no seed*/values.json (an ensemble folder?)")
    eval_n = recipe_inputs()[2]
    for values in per_seed.values():  # runs of code older than cdr3_correct
        values.setdefault(f"{PREFIX}.cdr3_correct", int("antidiagonal" in values))
    table = judged.statistics_table(curves, per_seed, PREFIX, eval_n)
    table["cdr3_correct"] = [int(per_seed[s][f"{PREFIX}.cdr3_correct"]) for s in table["seed"]]
    steps = curves.set_index("step")
    for step in PRINTED_STEPS:
        if step in steps.index:
            table[f"loss_step{step}"] = [float(steps.loc[step, f"seed{s}"]) for s in table["seed"]]
    return table


def read_statistics(source: Path) -> pd.DataFrame:
    """An ensemble's statistics: from its folder, or from a table with a row per seed
    (seed and judged.KEYS columns, as fitting.csv)."""
    source = Path(source)
    table = folder_statistics(source) if source.is_dir() else pd.read_csv(source)
    missing = [key for key in ("seed", *judged.KEYS) if key not in table]
    if missing:
        raise ValueError(f"{source}: no column {', '.join(missing)}")
    return table


def reference(fitting: pd.DataFrame) -> dict[str, dict]:
    """The fitting seeds' values of the explainer's printed training values (what a
    `tolerance: percentile` entry places the explainer's value among)."""
    columns = {f"{PREFIX}.loss_step{s}": f"loss_step{s}" for s in PRINTED_STEPS}
    found = {key: fitting[c].dropna() for key, c in columns.items() if c in fitting}
    found[f"{PREFIX}.heldout_exact"] = 1000 - fitting["misses"]
    found[f"{PREFIX}.cross_attention_antidiagonal_mean"] = fitting["antidiagonal"].dropna()
    out = {
        key: {"n": int(len(v)), "values": sorted(round(float(x), 6) for x in v)}
        for key, v in found.items()
    }
    if "cdr3_correct" in fitting:
        right = int(fitting["cdr3_correct"].sum())
        out[f"{PREFIX}.cdr3_output"] = {"n": len(fitting), "right": right}
    return out


# The bands file and the judge -----------------------------------------------------------------


def band_key(key: str) -> str:
    """A judged key's name in the golden file and the bands file: reversal.curve.<key>."""
    return f"{PREFIX}.{judged.PREFIX}.{key}"


def read_bands(path: Path) -> dict[str, golden_file.Band]:
    """The committed bands of judged.KEYS, by key (loss_start, ...)."""
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no bands yet (python -m tools.golden fit)")
    data = yaml.safe_load(Path(path).read_text())
    return {key: golden_file.parse_band(path, key, data["bands"][band_key(key)])
            for key in judged.KEYS}  # fmt: skip


def judge(bands: Mapping[str, golden_file.Band], statistics: Mapping[str, float]) -> list[str]:
    """The keys of judged.KEYS a run's statistics FAIL: outside the band, missing or not
    finite; the anti-diagonal of a run whose CDR3 came back wrong (NaN) is not judged."""
    failed = []
    for key in judged.KEYS:
        value = statistics.get(key, math.nan)
        if key == "antidiagonal" and math.isnan(value):
            continue
        if not (math.isfinite(value) and bands[key].holds(value)):
            failed.append(key)
    return failed


def command_parser(verb: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of `python -m tools.golden VERB`, its help the module's docstring."""
    return argparse.ArgumentParser(
        prog=f"python -m tools.golden {verb}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
