"""Power: the registered faults' runs judged by the committed bands, beside the catch
probability the fitted model predicts (config/golden/v4/design.md, second review, answer 8).

    python -m tools.golden power RUNS [--out FOLDER]

RUNS: the power runs' folder (results/<run>/power of `snakemake power`: <fault>/seed<s>/ with
values.json, losses.csv, numerics.json), judged once, when every run of the plan
(tcrformer.core.power.FAULTS_FILE) is done. The bands and their fitting data are FOLDER's
(config/golden/v4/: bands.yaml, fitting.csv). Per fault:

    caught      runs that FAIL some committed band, of the plan's seeds, with the exact
                (Clopper-Pearson) 95 % interval, and the keys that caught them
    shift       each key's seed-paired shift against the control (the plan's `none`, the
                correct code on the same seeds): the mean of fault - control on the key's
                scale (a window's Box-Cox scale at lam-hat, logit(a), the count), in the
                fitting model's SDs, with the SD of the paired differences
    predicted   the catch probability of one run: the fitted model (validate.fit_generating:
                every key's law and their copula) moved by the measured shifts, judged by the
                committed bands (Monte-Carlo, PREDICTION_DRAWS runs), with a seed bootstrap's
                95 % interval (the pairs resampled); per key its exact exceedance

    in use      the same, judged by the bands the pipeline judges by (the golden file's
                `bands:`), where those are not FOLDER's

Writes FOLDER/power_runs.csv (one row per run), power.csv (one row per fault), power.yaml
(provenance, the machines and numerics the runs trained on).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from tcrformer.core.power import FAULTS_FILE, read_power_plan
from tcrformer.stats.binary import exact_binomial_interval
from tcrformer.training import judged

from tools.golden import records, validate

CONTROL = "none"  # the plan's control: the correct code on the same seeds
PREDICTION_DRAWS = 20_000  # model runs per predicted catch probability
BOOTSTRAP = 200  # seed-bootstrap resamples of each fault's pairs
SEED = 0


def registered_faults() -> tuple[list[str], tuple[int, ...]]:
    """The power faults (the control among them) and seeds of the plan."""
    plan = read_power_plan(records.ROOT / "config" / FAULTS_FILE)
    return list(plan.faults), plan.seeds


def missing_runs(runs: Path, faults: Sequence[str], seeds: Sequence[int]) -> list[str]:
    """The registered runs without a values.json: power is judged once, on all of them."""
    return [
        f"{fault}/seed{seed}"
        for fault in faults
        for seed in seeds
        if not (Path(runs) / fault / f"seed{seed}" / "values.json").exists()
    ]


def run_table(runs: Path, bands: Mapping, in_use: Mapping | None = None) -> pd.DataFrame:
    """One row per run: its fault, seed, statistics and the keys that FAIL it (`failed`), and
    those that FAIL the bands in use (`failed_in_use`) where they are given."""
    rows, eval_n = [], records.recipe_inputs()[2]
    golden = yaml.safe_load(records.GOLDEN_FILE.read_text())
    cdr3 = golden["inputs"]["reversal"]["reversal.cdr3"]
    prefix = records.PREFIX
    for values_path in sorted(Path(runs).glob("*/seed*/values.json")):
        values = json.loads(values_path.read_text())
        losses = pd.read_csv(values_path.parent / "losses.csv").sort_values("step")
        right = values[f"{prefix}.cdr3_output"] == cdr3[::-1]
        antidiagonal = values[f"{prefix}.cross_attention_antidiagonal_mean"] if right else None
        found = judged.run_statistics(
            losses["loss"].to_numpy(float), values[f"{prefix}.heldout_exact"], eval_n, antidiagonal
        )
        row = {
            "fault": values_path.parent.parent.name,
            "seed": int(values_path.parent.name[4:]),
            **{key: found.get(key, math.nan) for key in judged.KEYS},
            "failed": " ".join(records.judge(bands, found)),
        }
        if in_use is not None:
            row["failed_in_use"] = " ".join(records.judge(in_use, found))
        rows.append(row)
    return pd.DataFrame(rows)


def caught(group: pd.DataFrame, column: str, suffix: str = "") -> dict[str, Any]:
    """The runs of one fault that FAIL some band of `column`, of all, with the exact 95 %
    interval and the keys that caught them."""
    count = int((group[column] != "").sum())
    low, high = exact_binomial_interval(count, len(group))
    keys = " ".join(sorted({k for f in group[column] for k in f.split()}))
    return {f"caught{suffix}": count, f"low{suffix}": low, f"high{suffix}": high,
            f"keys{suffix}": keys}  # fmt: skip


def in_sds(model: validate.Generating, key: str, values, floor: float) -> np.ndarray:
    """A key's values on its law's scale, in the law's SDs (a window at or below the floor:
    -inf; not judged: NaN)."""
    return model.laws[key].in_sds(validate.to_scale(key, values, floor))


def paired_shifts(runs: pd.DataFrame, model, floor: float) -> dict[str, dict[str, np.ndarray]]:
    """Per fault and key, the seed-paired differences fault - control in the law's SDs
    (the seeds both have the key, finite or at the floor)."""
    control = runs[runs["fault"] == CONTROL].set_index("seed")
    found = {}
    for fault, group in runs.groupby("fault", sort=False):
        group = group.set_index("seed")
        seeds = [s for s in group.index if s in control.index]
        found[fault] = {}
        for key in judged.KEYS:
            a = in_sds(model, key, group.loc[seeds, key].to_numpy(float), floor)
            b = in_sds(model, key, control.loc[seeds, key].to_numpy(float), floor)
            with np.errstate(invalid="ignore"):
                d = a - b
            found[fault][key] = d[~np.isnan(d)]
    return found


def shift_of(differences: np.ndarray) -> float:
    """The mean paired difference; +-inf where some run left its scale (the floor), NaN where
    there is no pair."""
    if not len(differences):
        return math.nan
    if np.isinf(differences).any():
        return float(np.sign(differences[np.isinf(differences)]).mean() * math.inf)
    return float(differences.mean())


def catch_probability(model, bands, shifts: Mapping[str, float], z, floor: float) -> float:
    """The share of model runs (one per row of the normal deviates z, (N, keys): the copula's)
    that FAIL some band once each key's law is moved by its shift (NaN: left alone; +-inf: the
    key always FAILs)."""
    caught = np.zeros(len(z), bool)
    for i, (key, law) in enumerate(model.laws.items()):
        shift = shifts.get(key, math.nan)
        if math.isinf(shift):
            return 1.0
        moved = law if math.isnan(shift) else law.moved(shift)
        t = moved.quantile(z[:, i])
        band = bands[key]
        values = validate.from_scale(key, t, floor)
        low = -np.inf if band.low is None else band.low
        high = np.inf if band.high is None else band.high
        caught |= (values < low) | (values > high)
    return float(caught.mean())


def predictions(model, bands, differences: Mapping, floor: float, rng) -> dict[str, float]:
    """The predicted catch probability at the measured shifts, and its seed bootstrap's 95 %
    interval (each key's pairs resampled), on common model runs."""
    z = (
        rng.standard_normal((PREDICTION_DRAWS, len(model.laws)))
        @ np.linalg.cholesky(model.correlation).T
    )
    shifts = {key: shift_of(d) for key, d in differences.items()}
    point = catch_probability(model, bands, shifts, z, floor)
    resampled = []
    for _ in range(BOOTSTRAP):
        shifts = {}
        for key, d in differences.items():
            shifts[key] = shift_of(d[rng.integers(len(d), size=len(d))]) if len(d) else math.nan
        resampled.append(catch_probability(model, bands, shifts, z, floor))
    low, high = np.percentile(resampled, [2.5, 97.5])
    return {"predicted": point, "predicted_low": float(low), "predicted_high": float(high)}


def summary(runs: pd.DataFrame, fitting: pd.DataFrame, bands, floor: float) -> pd.DataFrame:
    """One row per fault: caught of runs with its exact interval, the keys that caught it,
    each key's paired shift (and the SD of its differences), the predicted probability."""
    model = validate.fit_generating(validate.columns_on_scale(fitting, floor), validate.Method())
    differences = paired_shifts(runs, model, floor)
    plan = read_power_plan(records.ROOT / "config" / FAULTS_FILE)
    rng = np.random.default_rng(SEED)
    rows = []
    for fault, group in runs.groupby("fault", sort=False):
        predicted = plan.faults[fault].predicted if fault in plan.faults else None
        row = {
            "fault": fault,
            "runs": len(group),
            **caught(group, "failed"),
            **(caught(group, "failed_in_use", "_in_use") if "failed_in_use" in group else {}),
            "registered_key": predicted.key if predicted else "",
            "registered_shift_sd": predicted.shift_sd if predicted else math.nan,
            **predictions(model, bands, differences[fault], floor, rng),
        }
        for key, d in differences[fault].items():
            row[f"shift_sd_{key}"] = shift_of(d)
            row[f"spread_sd_{key}"] = float(d.std(ddof=1)) if np.isfinite(d).sum() > 1 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def power_record(runs: Path, command: str) -> dict[str, Any]:
    """power.csv's provenance: the judging command and commit, and the machines and numerics
    the faulty runs trained on (from each run's numerics.json)."""
    found = [json.loads(p.read_text()) for p in sorted(Path(runs).glob("*/seed*/numerics.json"))]
    return {
        "provenance": records.provenance(command),
        "runs": len(found),
        "machines": dict(Counter(n["cpu"]["model"] for n in found)),
        "numerics": dict(Counter(n["mode"] for n in found)),
        "prediction": {"draws": PREDICTION_DRAWS, "bootstrap": BOOTSTRAP, "seed": SEED},
    }


def power_command(runs: Path, folder: Path = records.FOLDER) -> pd.DataFrame | None:
    """Judge every registered run once; None (and one line) if some run is not finished."""
    missing = missing_runs(runs, *registered_faults())
    if missing:
        print(f"{runs}: {len(missing)} registered power runs are not finished "
              f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}); "
              "nothing judged", file=sys.stderr)  # fmt: skip
        return None
    bands = records.read_bands(folder / "bands.yaml")
    in_use = records.bands_in_use()
    same = in_use.resolve() == (folder / "bands.yaml").resolve()
    floor = records.recipe_inputs()[1]
    table = run_table(runs, bands, None if same else records.read_bands(in_use))
    found = summary(table, pd.read_csv(folder / "fitting.csv"), bands, floor)
    table.to_csv(folder / "power_runs.csv", index=False)
    found.to_csv(folder / "power.csv", index=False)
    out = "" if folder == records.FOLDER else f" --out {folder}"
    record = power_record(runs, f"python -m tools.golden power {runs}{out}")
    records.write_yaml(folder / "power.yaml", record)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = records.command_parser("power", __doc__)
    parser.add_argument("runs", type=Path, help="the power runs' folder")
    parser.add_argument("--out", type=Path, default=records.FOLDER)
    args = parser.parse_args(argv)
    found = power_command(args.runs, args.out)
    if found is None:
        return 1
    print(found.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
