"""Golden check v2, applied: its bands made from a fitting ensemble, then held out.

    python -m tcrformer.chapters.ensemble.golden_v2 fit --ensemble results/golden_fit/ensemble
    python -m tcrformer.chapters.ensemble.golden_v2 validate \\
        --ensemble portable=results/golden_portable/ensemble \\
        --ensemble ranks2=results/golden_ranks2/ensemble \\
        --ensemble native=results/golden_native/ensemble
    python -m tcrformer.chapters.ensemble.golden_v2 stratify --ensemble native=...  # if told
    python -m tcrformer.chapters.ensemble.golden_v2 power --runs results/paper/power

The method is curves.py, committed before any of these seeds ran; this module only runs it
and keeps the record. `fit` copies the fitting ensemble's curves and per-seed statistics
into config/golden/v2/ and writes bands.yaml (the bounds, the method's sha256, the
ensemble's provenance). `validate` copies each held-out ensemble's statistics beside them
and writes validation.yaml and validation.md: per ensemble, the seeds that FAIL with an
exact interval of the rate, the PIT calibration of every key, and whether its numerics pool
with the fitting ensemble's (curves.compare_ensembles) or the bands must be stratified.
`stratify` fits those ensembles' own bands (bands.yaml `strata`, matched by numerics).
`power` judges the runs of the power target (bench/golden_power.py: the paper recipe with a
fault in its code) by these bands and writes power.{csv,md,yaml}: how often each fault FAILs,
and power_curves.csv: every faulty run's loss curve, so the record can be recomputed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import math
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from tcrformer.chapters.ensemble import curves
from tcrformer.core import golden
from tcrformer.core.config import ConfigError
from tcrformer.core.io import ResultFileError, write_text

GOLDEN_FILE = Path("config/golden/seed_values.yaml")
# What `python -m` runs: there __name__ is __main__.
MODULE = "tcrformer.chapters.ensemble.golden_v2"
FOLDER = golden.bands_v2_file(GOLDEN_FILE).parent  # named by the golden file's bands_v2:
BANDS = golden.bands_v2_file(GOLDEN_FILE).name
OVERLAYS = GOLDEN_FILE.parent / "ensembles"  # each ensemble's config overlay (bench/golden_v2.sh)


ENSEMBLE_FILES = ("curves.csv", "statistics_v2.csv", "golden_bands.yaml")


def method_sha256() -> str:
    return hashlib.sha256(Path(curves.__file__).read_bytes()).hexdigest()


# Bands ------------------------------------------------------------------------------------------


def bands_record(
    statistics: pd.DataFrame,
    budget: float,
    floor: float,
    eval_n: int,
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """What bands.yaml holds: how the bands were made, from what, and each key's bound."""
    fitted = curves.fit(statistics, budget, floor, eval_n)
    return {
        "provenance": dict(provenance),
        "method": {
            "module": curves.__name__,
            "sha256": method_sha256(),
            "budget": budget,
            "alpha_per_key": budget / len(curves.KEYS),
            "confidence": curves.CONFIDENCE,
            "window": list(curves.WINDOW),
            "early": list(curves.EARLY),
            "floor": floor,
            "eval_n": eval_n,
            "n": int(len(statistics)),
            "seeds": [int(s) for s in statistics["seed"]],
        },
        "bands": {
            key: {
                "side": band.side,
                "bound": round(float(band.bound), 6),
                **({"floor": band.floor} if band.floor is not None else {}),
            }
            for key, band in fitted.items()
        },  # fmt: skip
    }


def monitor_record(wide: pd.DataFrame, budget: float, floor: float) -> dict[str, Any]:
    """The curve monitor's limits (chapters.ensemble.monitor), fitted on the same seeds' curves at
    the same family-wise budget as the bands."""
    from tcrformer.chapters.ensemble.monitor import Reference

    return Reference.fit(_curves(wide), budget, floor).record()


def _curves(wide: pd.DataFrame) -> np.ndarray:
    """A curves.csv table (step, seed<s>...) as (seeds, steps)."""
    return wide.sort_values("step").drop(columns="step").to_numpy(float).T


def monitor_flags(record: Mapping[str, Any], wide: pd.DataFrame) -> dict[int, int | None]:
    """{seed: the step the monitor would flag it at, or None} for every curve of `wide`."""
    from tcrformer.chapters.ensemble.monitor import Reference, first_flag

    reference = Reference.from_record(record)
    columns = [c for c in wide.columns if c != "step"]
    return {int(c.removeprefix("seed")): first_flag(reference, curve)
            for c, curve in zip(columns, _curves(wide), strict=True)}  # fmt: skip


def read_bands(
    record: Mapping[str, Any], stratum: str | None = None
) -> dict[str, curves.ToleranceBand]:
    """The ToleranceBands of a bands.yaml record (of one of its strata, if named); refused if
    the method's code has changed."""
    if record["method"]["sha256"] != method_sha256():
        raise ResultFileError(
            f"{FOLDER / BANDS}: made by another version of {curves.__name__} "
            "(method.sha256 differs); fit the bands again"
        )
    bands = record["strata"][stratum]["bands"] if stratum else record["bands"]
    return {
        key: curves.ToleranceBand(key, band["side"], band["bound"], band.get("floor"))
        for key, band in bands.items()
    }


# Strata -----------------------------------------------------------------------------------------
# Numerics whose held-out ensemble does not pool with the fitting one get bands of their own,
# fitted on that ensemble by the same method: a stratum, named by the ensemble and matched by
# the numerics fields (NUMERICS_FIELDS) in which its training differed from the fitting one's.

NUMERICS_FIELDS = ("mode", "ranks")


def ensemble_numerics(folder: Path) -> dict[str, Any]:
    """The NUMERICS_FIELDS its seeds trained under (seed<s>/numerics.json); all must agree."""
    from tcrformer.core.io import read_json

    found = {json.dumps({f: read_json(p)[f] for f in NUMERICS_FIELDS})
             for p in sorted(folder.glob("seed*/numerics.json"))}  # fmt: skip
    if len(found) != 1:
        raise ResultFileError(f"{folder}: {len(found)} numerics among its seeds, expected one")
    return json.loads(found.pop())


def stratum_of(record: Mapping[str, Any], numerics: Mapping[str, Any] | None) -> str | None:
    """The stratum a run's numerics fall in: the one whose every `match` field the run has,
    the most specific if several; None (the pooled bands) if none or no record."""
    if not numerics:
        return None
    matching = [(len(s["match"]), name) for name, s in record.get("strata", {}).items()
                if all(numerics.get(f) == v for f, v in s["match"].items())]  # fmt: skip
    return max(matching)[1] if matching else None


def stratum_leave_one_out(statistics: pd.DataFrame, budget: float, floor: float, eval_n: int):
    """Each seed judged by bands fitted on the others: (fails, draws, {seed: keys failed})."""
    failed = {}
    for i, row in statistics.reset_index(drop=True).iterrows():
        others = statistics.drop(index=statistics.index[i])
        bands = curves.fit(others, budget, floor, eval_n)
        keys = judge_seeds(bands, statistics.iloc[[i]])["failed_keys"].iloc[0]
        if keys:
            failed[int(row["seed"])] = keys
    return len(failed), len(statistics), failed


def run_statistics(
    losses: pd.DataFrame, values: Mapping[str, Any], prefix: str, cdr3: str, eval_n: int
) -> dict[str, float]:
    """The judged numbers of one run (a single run, a faulty run) from its loss curve
    (step, loss) and its values; the anti-diagonal only where the CDR3 came back reversed."""
    right = values[f"{prefix}.cdr3_output"] == cdr3[::-1]
    antidiagonal = values[f"{prefix}.cross_attention_antidiagonal_mean"] if right else math.nan
    curve = losses.sort_values("step")["loss"].to_numpy(float)
    return curves.seed_statistics(curve, values[f"{prefix}.heldout_exact"], eval_n, antidiagonal)


def judge_seeds(bands: Mapping[str, curves.ToleranceBand], statistics: pd.DataFrame):
    """One row per seed: the keys it FAILs (space-separated) and whether it FAILs at all.
    A seed whose CDR3 came back wrong has no anti-diagonal and is not judged on it."""
    rows = []
    for row in statistics.to_dict("records"):
        judged = {k: b for k, b in bands.items() if not (k == "antidiagonal" and _nan(row[k]))}
        failed = curves.judge(judged, row)
        rows.append({"seed": int(row["seed"]), "fails": int(bool(failed)),
                     "failed_keys": " ".join(failed)})  # fmt: skip
    return pd.DataFrame(rows)


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


# The golden check ---------------------------------------------------------------------------


CHAPTER = "reversal"  # the chapter whose training v2 judges, and its keys' prefix


def judged_by_v2(
    rows: list[golden.Row],
    record: Mapping[str, Any],
    losses: pd.DataFrame,
    values: Mapping[str, Any],
    config: Mapping[str, Any],
    inputs: Mapping[str, Mapping],
    numerics: Mapping[str, Any] | None = None,
) -> list[golden.Row]:
    """The golden check's rows with version 2 judging the chapter's training: one row per
    v2 key (`reversal.v2.<key>`), by the bands of the stratum the training's numerics fall in
    (stratum_of), and version 1's band rows of the chapter shown, not judged (REPORT), so the
    family-wise budget is spent once."""
    stratum = stratum_of(record, numerics)
    bands, eval_n = read_bands(record, stratum), record["method"]["eval_n"]
    differ = golden.inputs_differ(CHAPTER, inputs, config)
    found = run_statistics(losses, values, CHAPTER, config[CHAPTER]["cdr3"], eval_n)
    kept = []
    for row in rows:
        if (
            row.chapter == CHAPTER
            and row.tolerance.startswith(golden.ENSEMBLE)
            and (row.status in (golden.PASS, golden.FAIL))
        ):
            reason = f"judged by v2 ({CHAPTER}.v2.*); v1: {row.status}"
            row = dataclasses.replace(row, status=golden.REPORT, reason=reason)
        kept.append(row)
    for key, band in bands.items():
        value = found[key]
        status, reason = (golden.FAIL, "") if band.fails(value) else (golden.PASS, "")
        if _nan(value) and key == "antidiagonal":
            status, reason = golden.REPORT, "not judged: measured where the CDR3 comes back right"
        if differ:
            status, reason = golden.SKIPPED, differ
        shown = None if _nan(value) else round(float(value), 6)
        text = tolerance_text(band) + (f" (stratum {stratum})" if stratum else "")
        kept.append(golden.Row(f"{CHAPTER}.v2.{key}", CHAPTER, None, shown,
                               text, status, reason))  # fmt: skip
    return kept


def tolerance_text(band: curves.ToleranceBand) -> str:
    side = "<=" if band.side == "upper" else ">="
    floor = f", >= floor {band.floor:.6g}" if band.floor is not None else ""
    return f"v2 tolerance bound {side} {band.bound:.6g}{floor}"


def method_v2(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the golden report says about how the trained values were judged."""
    method = record["method"]
    (a, b), (c, d) = method["window"], method["early"]
    interval = (
        f"one-sided tolerance bounds (confidence {method['confidence']}) from {method['n']} "
        f"seeds on window means of the loss curve (steps {a}..{b} raw, {c}..{d} log "
        "excess), held-out misses as a beta-binomial count, the anti-diagonal on logit"
    )
    strata = record.get("strata", {})
    if strata:
        named = ", ".join(f"{name} ({', '.join(f'{f} {v}' for f, v in s['match'].items())}, "
                          f"{s['n']} seeds)" for name, s in strata.items())  # fmt: skip
        interval += f"; numerics that did not pool have bands of their own: {named}"
    return {"budget": method["budget"], "per_key": method["alpha_per_key"],
            "keys": len(record["bands"]), "version": 2, "interval": interval}  # fmt: skip


# Held out ---------------------------------------------------------------------------------------


def validate_heldout(
    fitting: pd.DataFrame,
    heldout: Mapping[str, pd.DataFrame],
    bands: Mapping[str, curves.ToleranceBand],
    floor: float,
    eval_n: int,
    monitored: Mapping[str, Mapping[int, int | None]] | None = None,
) -> dict[str, Any]:
    """Per held-out ensemble: its FAILs with the rate's exact 95 % interval, the PIT
    calibration of each key, and the comparison with the fitting ensemble (pool or not);
    then the FAILs pooled over the ensembles that pool. `monitored`: per ensemble, the
    step the curve monitor flagged each seed at (monitor_flags), its false alarms."""
    found: dict[str, Any] = {"ensembles": {}}
    pooled_fails = pooled_draws = 0
    for name, stats_ in heldout.items():
        judged = judge_seeds(bands, stats_)
        fails, draws = int(judged["fails"].sum()), len(judged)
        pits = {
            key: curves.pit(key, fitting[key].dropna().to_numpy(float),
                            stats_[key].dropna().to_numpy(float), floor, eval_n).tolist()
            for key in curves.KEYS
        }  # fmt: skip
        compared = curves.compare_ensembles(fitting, stats_, floor)
        found["ensembles"][name] = {
            "seeds": [int(s) for s in stats_["seed"]],
            "fails": fails,
            "draws": draws,
            "rate_interval_95": [round(x, 4) for x in curves.failure_interval(fails, draws)],
            "failed": {int(r.seed): r.failed_keys for r in judged.itertuples() if r.fails},
            "pit": {k: _rounded(v) for k, v in curves.pit_calibration(pits).items()},
            "comparison": _rounded(compared),
        }
        if monitored is not None:
            flags = {s: f for s, f in monitored[name].items() if f is not None}
            found["ensembles"][name]["monitor"] = {
                "flagged": len(flags), "draws": len(monitored[name]), "steps": flags,
                "rate_interval_95": [round(x, 4) for x in
                                     curves.failure_interval(len(flags), len(monitored[name]))],
            }  # fmt: skip
        if compared["pool"]:
            pooled_fails, pooled_draws = pooled_fails + fails, pooled_draws + draws
    found["pooled"] = {
        "ensembles": [n for n, e in found["ensembles"].items() if e["comparison"]["pool"]],
        "fails": pooled_fails,
        "draws": pooled_draws,
        "rate_interval_95": (
            [round(x, 4) for x in curves.failure_interval(pooled_fails, pooled_draws)]
            if pooled_draws else None
        ),
    }  # fmt: skip
    found["stratify"] = [n for n, e in found["ensembles"].items() if not e["comparison"]["pool"]]
    return found


def _rounded(obj):
    if isinstance(obj, float | np.floating):
        return round(float(obj), 4)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Mapping):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_rounded(v) for v in obj]
    return obj


def validation_markdown(found: Mapping[str, Any]) -> str:
    lines = [
        "| ensemble | seeds | FAIL | rate, exact 95 % | PIT KS p (min over keys) "
        "| location or spread differs | pooled | monitor flags |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in found["ensembles"].items():
        low, high = e["rate_interval_95"]
        worst = min(p["p"] for p in e["pit"].values())
        differs = [f"{r['key']} ({'location' if r['location_differs'] else 'spread'})"
                   for r in e["comparison"]["keys"]
                   if r["location_differs"] or r["spread_differs"]]  # fmt: skip
        lines.append(
            f"| {name} | {e['seeds'][0]}..{e['seeds'][-1]} | {e['fails']} of {e['draws']} "
            f"| {low:.3f} to {high:.3f} | {worst:.3f} | {', '.join(differs) or 'none'} "
            f"| {'yes' if e['comparison']['pool'] else 'no'} "
            f"| {_monitor_cell(e.get('monitor'))} |"
        )
    return "\n".join(lines) + "\n"


# Power -----------------------------------------------------------------------------------------


def power_table(judged: pd.DataFrame) -> pd.DataFrame:
    """Per fault: runs, runs caught, the fraction with its exact 95 % interval, the keys."""
    from scipy import stats

    rows = []
    for fault, group in judged.groupby("fault", sort=True):
        caught, runs = int(group["fails"].sum()), len(group)
        ci = stats.binomtest(caught, runs).proportion_ci(0.95, method="exact")
        keys = sorted({k for text in group["failed_keys"] for k in text.split()})
        flagged = int(group["monitor_step"].notna().sum()) if "monitor_step" in group else 0
        rows.append({"fault": fault, "runs": runs, "caught": caught, "power": caught / runs,
                     "low": round(ci.low, 3), "high": round(ci.high, 3),
                     "keys": " ".join(keys), "monitor": flagged})  # fmt: skip
    return pd.DataFrame(rows)


def power_markdown(table: pd.DataFrame, breaks: Mapping[str, str]) -> str:
    lines = ["| fault | what it breaks | runs | FAIL | power (exact 95 %) | keys that failed "
             "| flagged by the monitor |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in table.itertuples(index=False):
        keys = ", ".join(f"`{k}`" for k in r.keys.split()) or "none"
        lines.append(f"| `{r.fault}` | {breaks.get(r.fault, '')} | {r.runs} | {r.caught} "
                     f"| {r.power:.2f} ({r.low:.2f} to {r.high:.2f}) | {keys} "
                     f"| {r.monitor} of {r.runs} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def power_command(runs: Path, folder: Path, config: Mapping[str, Any]) -> Path:
    from tcrformer.core.io import read_json

    record = yaml.safe_load((folder / BANDS).read_text(encoding="utf-8"))
    bands, eval_n = read_bands(record), record["method"]["eval_n"]
    prefix, cdr3 = config["ensemble"]["recipe"], config["reversal"]["cdr3"]
    from tcrformer.chapters.ensemble.monitor import Reference, first_flag

    reference = Reference.from_record(record["monitor"])
    rows, breaks, runs_curves = [], {}, {}
    for values_file in sorted(runs.glob("*/seed*/values.json")):
        values = read_json(values_file)
        losses = pd.read_csv(values_file.parent / "losses.csv").sort_values("step")
        runs_curves[f"{values['fault']}_seed{values['seed']}"] = losses["loss"].to_numpy(float)
        flag = first_flag(reference, losses["loss"].to_numpy(float))
        rows.append({"fault": values["fault"], "seed": int(values["seed"]),
                     **run_statistics(losses, values, prefix, cdr3, eval_n),
                     "monitor_step": flag})  # fmt: skip
        breaks[values["fault"]] = values["breaks"]
    if not rows:
        raise ResultFileError(f"{runs}: no <fault>/seed<s>/values.json (run the power target)")
    statistics = pd.DataFrame(rows)
    judged = statistics.merge(judge_seeds(bands, statistics).drop(columns="seed"),
                              left_index=True, right_index=True)  # fmt: skip
    table = power_table(judged)
    summary = {"bands_sha256": hashlib.sha256((folder / BANDS).read_bytes()).hexdigest(),
               "runs": str(runs), "date": datetime.date.today().isoformat(),
               "faults": {r.fault: {"breaks": breaks[r.fault], "runs": r.runs,
                                    "caught": r.caught, "interval_95": [r.low, r.high],
                                    "keys": r.keys.split(), "monitor_flagged": r.monitor}
                          for r in table.itertuples(index=False)}}  # fmt: skip
    judged.to_csv(folder / "power.csv", index=False)
    steps = np.arange(1, max(len(c) for c in runs_curves.values()) + 1)
    wide = pd.DataFrame({"step": steps, **{k: pd.Series(c) for k, c in runs_curves.items()}})
    wide.to_csv(folder / "power_curves.csv", index=False)  # column <fault>_seed<s>
    write_text(folder / "power.md", power_markdown(table, breaks))
    write_text(folder / "power.yaml", yaml.safe_dump(summary, sort_keys=False))
    return folder / "power.yaml"


def _monitor_cell(found) -> str:
    if not found:
        return "not replayed"
    low, high = found["rate_interval_95"]
    return f"{found['flagged']} of {found['draws']} ({low:.3f} to {high:.3f})"


# Command line -----------------------------------------------------------------------------------


def _read_ensemble(folder: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    missing = [name for name in ENSEMBLE_FILES if not (folder / name).is_file()]
    if missing:
        raise ResultFileError(f"{folder}: no {', '.join(missing)} (run the ensemble target)")
    provenance = yaml.safe_load((folder / "golden_bands.yaml").read_text(encoding="utf-8"))
    return pd.read_csv(folder / "statistics_v2.csv"), with_overlay(provenance["provenance"])


def with_overlay(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """An ensemble's provenance with the command that trained it: the ensemble rule records
    `--config run=<run>`, but golden v2's ensembles run as overlays (ensembles/<name>.yaml,
    their seeds and numerics), and only the overlay's command trains the same seeds."""
    overlay = OVERLAYS / f"{str(provenance.get('run', '')).removeprefix('golden_')}.yaml"
    if not overlay.is_file():
        return dict(provenance)
    command = f"snakemake --cores 2 ensemble --configfile config/config.yaml {overlay}"
    return {**provenance, "command": command}


def _fit_inputs(config: Mapping[str, Any]):
    """The golden file's budget, the recipe's smoothing floor, its eval_n, the recipe."""
    from tcrformer.training.recipe import recipe_from_config
    from tcrformer.training.schedule import label_smoothing_floor

    recipe = recipe_from_config(config["reversal"], config["ensemble"]["recipe"])
    budget = golden.read_method(config["golden"]["file"])["budget"]
    return budget, round(label_smoothing_floor(recipe.label_smoothing), 6), recipe.eval_n, recipe


def fit_command(ensemble: Path, folder: Path, config: Mapping[str, Any]) -> Path:
    from tcrformer.chapters.ensemble.monitor import recipe_key
    from tcrformer.core.manifest import git_state

    statistics, provenance = _read_ensemble(ensemble)
    budget, floor, eval_n, recipe = _fit_inputs(config)
    state = git_state()
    provenance = {**provenance, "bands_fitted": {
        "command": f"python -m {MODULE} fit --ensemble {ensemble}",
        "commit": state["commit"], "dirty": state["dirty"],
        "date": datetime.date.today().isoformat()}}  # fmt: skip
    provenance["numerics_fields"] = ensemble_numerics(ensemble)
    record = bands_record(statistics, budget, floor, eval_n, provenance)
    record["monitor"] = {
        "recipe": recipe_key(recipe),
        **monitor_record(pd.read_csv(ensemble / "curves.csv"), budget, floor),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("curves.csv", "statistics_v2.csv"):
        shutil.copyfile(ensemble / name, folder / f"fit_{name}")
    write_text(folder / BANDS, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
    return folder / BANDS


def validate_command(ensembles: Mapping[str, Path], folder: Path) -> Path:
    record = yaml.safe_load((folder / BANDS).read_text(encoding="utf-8"))
    bands = read_bands(record)
    fitting = pd.read_csv(folder / "fit_statistics_v2.csv")
    method = record["method"]
    heldout, provenance, monitored = {}, {}, {}
    for name, path in ensembles.items():
        heldout[name], provenance[name] = _read_ensemble(path)
        if set(heldout[name]["seed"]) & set(method["seeds"]):
            raise ResultFileError(f"{path}: shares seeds with the fitting ensemble")
        monitored[name] = monitor_flags(record["monitor"], pd.read_csv(path / "curves.csv"))
    found = validate_heldout(fitting, heldout, bands, method["floor"], method["eval_n"], monitored)
    found = {"provenance": provenance, "method_sha256": method["sha256"], **found}
    for name, path in ensembles.items():
        for file in ("curves.csv", "statistics_v2.csv"):
            shutil.copyfile(path / file, folder / f"{name}_{file}")
    write_text(folder / "validation.yaml", yaml.safe_dump(found, sort_keys=False))
    write_text(folder / "validation.md", validation_markdown(found))
    return folder / "validation.yaml"


def stratify_command(ensembles: Mapping[str, Path], folder: Path) -> Path:
    """Bands of their own for each held-out ensemble validation.yaml says does not pool,
    fitted by the same method at the same budget, added to bands.yaml under `strata`, with
    each stratum's leave-one-out FAILs in validation.yaml (its seeds have no fresh ones)."""
    record = yaml.safe_load((folder / BANDS).read_text(encoding="utf-8"))
    read_bands(record)  # the method's sha256
    found = yaml.safe_load((folder / "validation.yaml").read_text(encoding="utf-8"))
    method, fitting = record["method"], ensemble_numerics_of_record(record)
    strata, checked = {}, {}
    for name, path in ensembles.items():
        if name not in found["stratify"]:
            raise ConfigError(
                "--ensemble",
                name,
                f"pools with the fitting ensemble ({folder / 'validation.yaml'})",
            )
        statistics, provenance = _read_ensemble(path)
        numerics = ensemble_numerics(path)
        match = {f: v for f, v in numerics.items() if fitting.get(f) != v}
        if not match:
            raise ResultFileError(f"{path}: trained under the fitting ensemble's numerics")
        fitted = bands_record(statistics, method["budget"], method["floor"], method["eval_n"],
                              provenance)  # fmt: skip
        strata[name] = {"match": match, "n": fitted["method"]["n"],
                        "seeds": fitted["method"]["seeds"], "provenance": provenance,
                        "bands": fitted["bands"]}  # fmt: skip
        fails, draws, failed = stratum_leave_one_out(
            statistics, method["budget"], method["floor"], method["eval_n"]
        )
        checked[name] = {"leave_one_out": {"fails": fails, "draws": draws, "failed": failed,
                         "rate_interval_95": [round(x, 4) for x in
                                              curves.failure_interval(fails, draws)]}}  # fmt: skip
    record["strata"] = strata
    found["strata"] = checked
    write_text(folder / BANDS, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
    write_text(folder / "validation.yaml", yaml.safe_dump(found, sort_keys=False))
    return folder / BANDS


def ensemble_numerics_of_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fitting ensemble's NUMERICS_FIELDS, as fit recorded them."""
    return dict(record["provenance"]["numerics_fields"])


def main(argv: list[str] | None = None) -> int:
    from tcrformer.core.config import apply_receptor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fit", "validate", "stratify", "power"])
    parser.add_argument(
        "--ensemble",
        action="append",
        default=[],
        help="fit: an ensemble folder; validate, stratify: name=folder, repeated",
    )
    parser.add_argument("--runs", type=Path, default=Path("results/paper/power"),
                        help="power: the power target's folder")  # fmt: skip
    parser.add_argument("--folder", default=FOLDER, type=Path)
    parser.add_argument("--config", default="config/config.yaml", type=Path)
    args = parser.parse_args(argv)
    config = apply_receptor(yaml.safe_load(args.config.read_text(encoding="utf-8")))
    try:
        if args.command != "power" and not args.ensemble:
            raise ConfigError("--ensemble", None, f"{args.command} needs at least one")
        if args.command == "fit":
            written = fit_command(Path(args.ensemble[0]), args.folder, config)
        elif args.command == "power":
            written = power_command(args.runs, args.folder, config)
        else:
            if any("=" not in e for e in args.ensemble):
                raise ConfigError("--ensemble", args.ensemble, "expected name=folder")
            named = dict(e.split("=", 1) for e in args.ensemble)
            command = validate_command if args.command == "validate" else stratify_command
            written = command({n: Path(p) for n, p in named.items()}, args.folder)
    except (ResultFileError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
