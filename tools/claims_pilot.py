"""The claims' pilot: each candidate setup's spread and room, and what the design's rule
makes of them (the claims design in docs/, sections 3 and 8). Every rule here was fixed
before the pilot ran; none reads a pilot's mean effect.

    python -m tools.claims_pilot report --results results/claims_pilot [--out FOLDER]
    python -m tools.claims_pilot report --archive results/archive/claims_pilot.tar.gz
    python -m tools.claims_pilot cost [--rates results/archive/claims_v4.tar.gz]

The pilot's configuration (workflow/claims/config/claims_pilot.yaml, laid over the claims file
as `--configfile` lays it) names each candidate setup as a claim whose test has the endpoints
a claims run would test: its arms, metric, margin and direction, its co-primary ones, and
those it only reports. Each is read with the decision code's own definitions
(tcrclaims.verdicts: the seeds the arms share, each role's per-seed values, a by-step metric
at the test's snapshots), so a pilot's d_s are what a run's would be.

`report` writes the endpoints' means (and what gives them away: the per-seed discordant
strings of each side) to FOLDER/sealed_means.json, opened after registration, and prints
its SHA-256. What it prints and keeps (report.md, report.json) holds no mean:

    each endpoint   its sd over the pilot's seeds, the sd a plan uses (sd_upper: the 80 %
                    upper bound), skewness and excess kurtosis of its d_s, and where the
                    records keep each string's exactness (heldout_bits, train_bits), the
                    strings' share of the spread: the within-seed binomial variance of d_s,
                    from the paired arms' discordant strings, over the variance of d_s
    room            the reference arm's medians: train minus held-out gap (and its least),
                    held-out exact; whether the setup qualifies for the claim (ROOM, HELDOUT)
    the excess      the measured row (EXCESS_STRINGS strings, EXCESS_WINDOW) and, as
                    description only, each prefix of the strings and v4's 5-snapshot window:
                    the sd, and the sd of log2 of the excess from one snapshot to the next
                    within a seed, at the window's own spacing; where the records keep the
                    per-string excess (excess_per_string), its standard error at any count
                    of strings
    each arm        jobs found of those the configuration runs, failed or non-finite ones,
                    the share of seeds at held-out exact 1.0 and at training exact 1.0, and
                    the CPU seconds, wall seconds and load average of its jobs

`choose` applies the rule (section 8 of the design):

    setups          each generalisation claim takes the first setup of SETUPS (a fixed
                    order, the cheapest job first) that qualifies for it: its reference arm
                    (without the regulariser) has a median gap of at least ROOM and a median
                    held-out exact within HELDOUT. None: the claim is not run, reported as
                    not testable at this scale. The setup's pilot sd only sizes the run
    pre_ln_warmup   measured on EXCESS_STRINGS strings over EXCESS_WINDOW; planned at v4's
                    log2 ratio (PLANNED), at least MIN_EXCESS_SEEDS seeds
    seeds           at the planned effects (PLANNED, in held-out and training exact: a gap
                    is their difference) and the planned sds, power 0.8 at the family's worst
                    Holm step; the exact sign-flip test simulated up to 20 seeds; a count
                    above MAX_SEEDS is unreachable, never capped (tools.claims_power)
    budget          BUDGET_CPU_S less RESERVE, each job priced by the pilot's CPU seconds
                    (a priced arm without them raises). The claims are funded in FAMILY's
                    order, each at its planned count if what is left pays for it; otherwise
                    at the count that is left, and if that count's power at the planned
                    effects (point-estimate sds) is below POWER_FLOOR, the claim leaves the
                    family (NOT TESTABLE AT THIS BUDGET) and its budget passes on. An arm two
                    claims share trains once, at the larger count. The Holm family counts
                    the claims that stay, and the plans are made again at its level
    forecast        each claim's chance of each verdict over a prior on its true effects,
                    centred on v4's estimates with sd sqrt(SE^2 + WIDENED^2) (archived_estimates:
                    from v4's archived records), at the point-estimate sds and the count the
                    budget gives; `predicted` is the most probable verdict, and the power at
                    the planned effects stands beside it

`cost` estimates what a configuration's jobs take, from the per-step times of an archived
run (its training_time.json files and Snakemake benchmarks) and the excess's evaluation time
per 1,000 strings (EXCESS_SECONDS).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import math
import re
import statistics
import sys
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy import stats

from tcrclaims import verdicts
from tcrclaims.kinds import SUPPORTED
from tcrclaims.metrics import EXCESS_PREFIXES, stepped

from tools import claims_power as power

ROOT = Path(__file__).resolve().parents[1]
PILOT = ROOT / "workflow/claims/config/claims_pilot.yaml"
V4_ARCHIVE = ROOT / "results/archive/claims_v4.tar.gz"
OUT = ROOT / "results/claims_pilot_report"  # where `report` writes by default
SEALED = "sealed_means.json"
ALPHA = 0.05
# The family, in the order the budget funds it.
FAMILY = ("pre_ln_warmup", "dropout", "smoothing_generalisation")
# The generalisation setups, (training strings, steps), in the order a claim tries them.
SETUPS = ((500, 1500), (250, 1500), (1000, 3000), (500, 3000), (250, 3000))
ROOM = 0.08  # a setup qualifies: its reference's median gap at least this
HELDOUT = (0.5, 0.95)  # ... and its reference's median held-out exact within these
EXCESS_STRINGS = 5000  # pre_ln_warmup's excess is measured on these held-out strings
MIN_EXCESS_SEEDS = 10
LOG2_GRID = 200  # the exact test's simulated log2 ratios are counts out of this
BUDGET_CPU_S = 12 * 3600 * 2  # a claims run: 12 hours on 2 cores, in CPU-seconds
RESERVE = 0.15  # of the budget, held back
POWER_FLOOR = 0.7  # a claim cut below its planned count stays if its power is at least this
NOT_AT_BUDGET = "NOT TESTABLE AT THIS BUDGET"
NOT_AT_SCALE = "not testable at this scale: no setup qualifies"
# The true effects a plan is made at, in held-out and training exact (a gap endpoint: their
# difference, train minus held-out) or the log2 ratio.
PLANNED = {
    "pre_ln_warmup": {"log2_excess": 0.378},
    "dropout": {"heldout_fraction": 0.02, "train_fraction": 0.0},
    "smoothing_generalisation": {"heldout_fraction": 0.02},
}  # fmt: skip
WIDENED = {"heldout_fraction": 0.02, "gap": 0.02, "log2_excess": 0.1}  # a forecast's prior
# v4's tests as its claims file registered them (arm, reference, endpoints, leading seeds,
# snapshots): what archived_estimates reads from v4's archived records.
V4_TESTS = {
    "pre_ln_warmup": ("deep_pre_flat_1", "deep_pre", ("log2_excess",), 24,
                      (1040, 1080, 1120, 1160, 1200)),
    "dropout": ("fixed", "fixed_no_dropout", ("heldout_fraction", "gap"), 48, ()),
    "smoothing_generalisation": ("fixed", "fixed_no_smoothing", ("heldout_fraction",), 48, ()),
}  # fmt: skip
STRING_COUNTS = (200, 500, 1000, 2000, 5000, 10000)  # the excess's per-string SE shown at
# Seconds to evaluate the eval-mode excess on 1,000 strings at one snapshot, by encoder
# layers, at the per-step speed of the v4 run's machine: measured on a 1-thread job beside a
# loaded machine (6 + 6 Pre-LN: 3.15 s for 2,000 strings where a training step took 0.59 s;
# 2 + 2: 0.92 s where a step took 0.255 s) and scaled by the v4 run's own step times there.
EXCESS_SECONDS = {6: 0.68, 2: 0.16}
JOB = re.compile(r"claims/arms/([a-z0-9_]+)/seed(\d+)/(metrics\.json|training_time\.json)$")
BENCH = re.compile(r"benchmarks/train_claim_arm_([a-z0-9_]+)_seed(\d+)\.tsv$")
# name -> (steps apart, back from the last snapshot, over how many steps)
WINDOWS = {"every 20 steps over the last 200": (20, 200), "every 40 over the last 160": (40, 160)}
EXCESS_WINDOW = "every 20 steps over the last 200"  # pre_ln_warmup's (11 snapshots)


# The pilot's configuration and results --------------------------------------------------------


def merged(base: dict, over: Mapping[str, Any]) -> dict:
    """`over` laid on `base` as Snakemake lays a --configfile: dicts key by key, the rest
    replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(
            out.get(key), dict) else value  # fmt: skip
    return out


def pilot_settings(pilot: Path = PILOT, root: Path = ROOT):
    """The claims settings a run of the pilot's configuration has."""
    from tcrclaims.settings import Settings
    from tcrformer.core.config import apply_receptor

    config: dict = {}
    for path in (root / "config/config.yaml", root / "workflow/claims/config/claims.yaml", pilot):
        config = merged(config, yaml.safe_load(Path(path).read_text()))
    return Settings.from_config(apply_receptor(config))


def read_jobs(results: Path | None = None, archive: Path | None = None) -> dict[str, Any]:
    """{"metrics": {arm: {seed: metrics}}, "timing": {arm: {seed: training_time}},
    "seconds": {arm: {seed: wall seconds}}} of a run's folder (results/<run>) or archive."""
    found: dict[str, Any] = {"metrics": {}, "timing": {}, "seconds": {}}

    def take(name: str, read) -> None:
        job, bench = JOB.search(name), BENCH.search(name)
        if job:
            key = "metrics" if job[3] == "metrics.json" else "timing"
            found[key].setdefault(job[1], {})[int(job[2])] = json.loads(read())
        elif bench:
            rows = read().splitlines()
            header, values = rows[0].split("\t"), rows[1].split("\t")
            seconds = float(values[header.index("s")])
            found["seconds"].setdefault(bench[1], {})[int(bench[2])] = seconds

    if archive is not None:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    take(member.name, lambda m=member: io.TextIOWrapper(
                        tar.extractfile(m), encoding="utf-8").read())  # fmt: skip
    else:
        for path in sorted(Path(results).rglob("*")):
            if path.is_file():
                take(path.as_posix(), lambda p=path: p.read_text(encoding="utf-8"))
    return found


def measurements(order, metrics: Mapping[str, Mapping[int, dict]], eval_n: int = 0,
                 replace_metric=None) -> verdicts.Measurements:  # fmt: skip
    """verdicts.Measurements of the jobs found (each arm at the seeds of `order` it has), with
    `replace_metric` (name, function of a record) swapping one metric's value."""
    arms, seeds = {}, {}
    for arm, by_seed in metrics.items():
        kept = [s for s in order if s in by_seed]
        rows = [dict(by_seed[s]) for s in kept]
        if replace_metric is not None:
            name, value = replace_metric
            rows = [{**row, name: value(row)} for row in rows]
        arms[arm], seeds[arm] = rows, kept
    return verdicts.Measurements(arms, {}, {}, eval_n, seeds, at_steps=stepped())


def family_of(claim_id: str) -> str | None:
    """The claim of FAMILY a pilot claim is a candidate setup of (its id's start)."""
    return next((c for c in FAMILY if claim_id.startswith(c + "_")), None)


def planned_effect(claim: str, metric: str) -> float:
    """The true effect an endpoint of a claim is planned at (PLANNED): a gap's is the
    planned training exact minus the planned held-out exact."""
    plan = PLANNED[claim]
    if metric == "gap":
        return plan["train_fraction"] - plan["heldout_fraction"]
    return plan[metric]


# What an endpoint's d_s say, the mean apart ----------------------------------------------------


def differences(test: Mapping[str, Any], m, metrics=None) -> tuple[list[int], dict]:
    """The seeds the test's arms share, and each endpoint's d_s (arm minus reference) there,
    as the decision code reads them (`metrics`: these instead of the test's endpoints)."""
    seeds = verdicts.shared_seeds(test, m)
    names = metrics or [end["metric"] for end in verdicts.endpoints(test)]
    found = {}
    for metric in names:
        one = {**test, "metric": metric}
        found[metric] = (verdicts.per_seed(one, m, "arm", seeds)
                         - verdicts.per_seed(one, m, "reference", seeds))  # fmt: skip
    return seeds, found


def shape(d: np.ndarray) -> tuple[float, float]:
    """Skewness and excess kurtosis of the d_s (bias-corrected; NaN with too few seeds or
    none varying)."""
    if d.size < 4 or np.ptp(d) <= 1e-9 * max(1.0, float(np.abs(d).max())):
        return math.nan, math.nan
    return (float(stats.skew(d, bias=False)),
            float(stats.kurtosis(d, fisher=True, bias=False)))  # fmt: skip


def spread(d: np.ndarray, end: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """One endpoint's spread over the pilot's seeds (its row: no mean), and its mean (for
    the sealed file only)."""
    d = d[np.isfinite(d)]
    n = int(d.size)
    sd = float(np.std(d, ddof=1)) if n >= 2 else math.nan
    skew, kurtosis = shape(d)
    row = {"metric": end["metric"], "margin": end.get("margin"),
           "direction": end.get("direction"), "seeds": n, "sd": sd,
           "planned_sd": power.sd_upper(sd, n) if n >= 2 else math.nan,
           "skewness": skew, "excess_kurtosis": kurtosis}  # fmt: skip
    return row, float(np.mean(d)) if n else math.nan


# Each string's exactness: the paired arms' discordant strings ---------------------------------

BITS = {"heldout": ("heldout_bits", "heldout_exact", "heldout_total"),
        "train": ("train_bits", "train_exact", "train_total")}  # fmt: skip


def string_bits(record: Mapping[str, Any], side: str) -> np.ndarray | None:
    """Which of the record's held-out (or training) strings were exactly right, from its
    packed bits (base64 of np.packbits(..., bitorder="little")); None where it has none. Bits
    that disagree with the record's count raise."""
    key, count, total = BITS[side]
    if record.get(key) is None:
        return None
    raw = np.frombuffer(base64.b64decode(record[key]), dtype=np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[: record[total]].astype(bool)
    if bits.size != record[total] or int(bits.sum()) != record[count]:
        raise ValueError(f"{key}: {int(bits.sum())} of {bits.size} strings right, where the "
                         f"record counts {record[count]} of {record[total]}")  # fmt: skip
    return bits


def discordant(test, metrics, seeds) -> dict[str, list[tuple[int, int, int]]]:
    """{side: [(b, c, N) per seed]}: the strings right in the arm and wrong in the
    reference (b), the other way (c), of N, where both arms keep their bits at every seed."""
    found = {}
    for side in BITS:
        rows = []
        for s in seeds:
            a = string_bits(metrics[test["arm"]][s], side)
            r = string_bits(metrics[test["reference"]][s], side)
            if a is None or r is None or a.size != r.size:
                break
            rows.append((int((a & ~r).sum()), int((~a & r).sum()), int(a.size)))
        else:
            if rows:
                found[side] = rows
    return found


def within_variance(b: int, c: int, n: int) -> float:
    """The variance of a seed's difference of two fractions of the same n strings, over the
    strings (the per-string differences, +1 b times, -1 c times, 0 otherwise)."""
    return ((b + c) - (b - c) ** 2 / n) / (n * (n - 1)) if n > 1 else math.nan


def strings_share(d: np.ndarray, metric: str, pairs: Mapping[str, list]) -> float | None:
    """The strings' share of the spread of an endpoint's d_s: the mean within-seed binomial
    variance over the variance of d_s over seeds; None without the bits it needs."""
    sides = {"heldout_fraction": ("heldout",), "train_fraction": ("train",),
             "gap": ("train", "heldout")}.get(metric, ())  # fmt: skip
    if not sides or any(side not in pairs for side in sides) or d.size < 2:
        return None
    within = sum(np.array([within_variance(*row) for row in pairs[side]]) for side in sides)
    total = float(np.var(d, ddof=1))
    return float(np.mean(within)) / total if total > 0 else math.nan


# The report -----------------------------------------------------------------------------------


def room(m, test, seeds) -> dict[str, float]:
    """The reference arm's medians over the seeds: its gap (and least gap) and held-out
    exact; and whether the setup qualifies for the claim (ROOM, HELDOUT)."""
    gap = m.values(test["reference"], "gap", seeds)
    held = m.values(test["reference"], "heldout_fraction", seeds)
    found = {"median_gap": float(np.nanmedian(gap)), "least_gap": float(np.nanmin(gap)),
             "median_heldout": float(np.nanmedian(held))}  # fmt: skip
    return found


def qualifies(found: Mapping[str, float]) -> bool:
    """A setup qualifies for a claim: its reference's median gap is at least ROOM, and its
    median held-out exact within HELDOUT (ends included)."""
    low, high = HELDOUT
    return bool(found["median_gap"] >= ROOM and low <= found["median_heldout"] <= high)


def setup_report(claim, m, metrics, settings) -> tuple[dict[str, Any], dict[str, Any]]:
    """One candidate setup of a generalisation claim: its endpoints' spreads (tested, then
    reported), their correlation, the reference's room, the discordant strings per seed;
    and, apart, the means (for the sealed file)."""
    test = claim.test
    ends = verdicts.endpoints(test)
    described = [{"metric": name} for name in test.get("report", ())]
    names = [e["metric"] for e in ends + described]
    seeds, found = differences(test, m, names)
    pairs = discordant(test, metrics, seeds)
    rows, means = [], {}
    for end in ends + described:
        row, means[end["metric"]] = spread(found[end["metric"]], end)
        row["tested"] = end in ends
        row["strings_share"] = strings_share(found[end["metric"]], end["metric"], pairs)
        rows.append(row)
    arm = settings.arms[test["arm"]]
    report: dict[str, Any] = {
        "id": claim.id, "claim": family_of(claim.id), "arm": test["arm"],
        "reference": test["reference"], "setup": [arm.train_set, arm.steps], "seeds": seeds,
        "endpoints": rows, "room": room(m, test, seeds),
        "discordant": {side: [b + c for b, c, _ in rows_] for side, rows_ in pairs.items()},
    }  # fmt: skip
    report["qualifies"] = qualifies(report["room"])
    if len(ends) == 2:
        a, b = (found[e["metric"]] for e in ends)
        keep = np.isfinite(a) & np.isfinite(b)
        corr = np.corrcoef(a[keep], b[keep])[0, 1] if keep.sum() > 2 else 0.0
        report["correlation"] = float(corr)
    by_seed = {side: {str(s): [b, c] for s, (b, c, _) in zip(seeds, rows_, strict=True)}
               for side, rows_ in pairs.items()}  # fmt: skip
    sealed = {"means": means, "discordant": by_seed}
    return report, sealed


# The excess: at each count of strings and each window of snapshots ------------------------------


def window(snapshots: list[int], every: int, span: int) -> list[int]:
    """The snapshots `every` steps apart, back from the last, within `span` steps of it."""
    last = max(snapshots)
    return [s for s in snapshots if (last - s) % every == 0 and last - s <= span]


def by_count(prefixes: Mapping) -> dict[int, Any]:
    """excess_by_prefix with its counts as integers (JSON keeps them as strings)."""
    return {int(k): v for k, v in prefixes.items()}


def excess_reports(claim, metrics, settings) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The excess claim at each count of strings its records hold (excess_by_prefix and its
    own) and each window of snapshots (WINDOWS): the spread, and the step-to-step noise at
    the window's own spacing. The row of EXCESS_STRINGS strings and EXCESS_WINDOW is the
    measurement (`measured`); the others describe. The means come apart (sealed)."""
    test = claim.test
    own = test.get("excess_strings")
    first = next(iter(next(iter(metrics.values())).values()))
    counts = sorted({*by_count(first.get("excess_by_prefix", {})), *([own] if own else [])})
    endpoint = verdicts.endpoints(test)[0]
    rows, means = [], {}
    for count in counts:

        def at(row, count=count):
            return row["log2_excess"] if count == own else by_count(row["excess_by_prefix"])[count]

        m = measurements(settings.seeds, metrics, settings.eval_n, ("log2_excess", at))
        for name, (every, span) in WINDOWS.items():
            steps = window(list(test["snapshots"]), every, span)
            seeds, found = differences({**test, "snapshots": steps}, m)
            row, means[f"{count} strings, {name}"] = spread(found[test["metric"]], endpoint)
            measured = count == EXCESS_STRINGS and name == EXCESS_WINDOW
            if not measured:
                row["planned_sd"] = None  # description only: nothing is planned on it
            rows.append({"id": claim.id, "claim": family_of(claim.id), "arm": test["arm"],
                         "reference": test["reference"], "strings": count, "window": name,
                         "snapshots": steps, "measured": measured, **row,
                         "step_to_step_sd": step_noise(m, test, seeds, steps)})  # fmt: skip
    return rows, means


def step_noise(m, test, seeds, steps: list[int]) -> float:
    """The sd, over the seeds of both arms, of log2 of the excess at one snapshot of the
    window over the one before it (`steps` apart): how much the weights alone move it."""
    jumps = []
    for role in ("arm", "reference"):
        by_step = m.by_step(test[role], test["metric"], seeds)
        kept = [s for s in sorted(steps) if s in by_step]
        for before, after in zip(kept, kept[1:], strict=False):
            jumps.append(np.log2(by_step[after] / by_step[before]))
    values = np.concatenate(jumps) if jumps else np.array([])
    values = values[np.isfinite(values)]
    return float(np.std(values, ddof=1)) if values.size >= 2 else math.nan


def per_string_sd(entry: Mapping[str, float]) -> float:
    """The sd over strings of log2 of the excess at one snapshot, per string: from the
    per-string excess's mean and variance by the delta method, sqrt(var) / (mean ln 2), or
    given as such (`log2_var`)."""
    if "log2_var" in entry:
        return math.sqrt(entry["log2_var"])
    return math.sqrt(entry["var"]) / (entry["mean"] * math.log(2))


def excess_string_se(claim, metrics, steps, strings=STRING_COUNTS) -> dict[int, float] | None:
    """{E: the standard error of one arm's log2 excess at one snapshot on E strings}, the
    median over the claim's arms, seeds and the window's snapshots (the mean over snapshots
    of the same strings has at most this); None where no record keeps excess_per_string."""
    sds = []
    for role in ("arm", "reference"):
        for record in metrics.get(claim.test[role], {}).values():
            by_step = record.get("excess_per_string") or {}
            sds += [per_string_sd(by_step[str(s)]) for s in steps if str(s) in by_step]
    sds = [x for x in sds if math.isfinite(x)]
    if not sds:
        return None
    sd = statistics.median(sds)
    return {e: sd / math.sqrt(e) for e in strings}


# Each arm: its jobs, its ceilings, its cost -------------------------------------------------------


def _finite(record: Mapping[str, Any]) -> bool:
    """Whether every value a claim reads from the record, where the record has it, is
    finite: held-out exact and the gap (from their counts, or as fractions), the excess at
    each snapshot and prefix."""
    m = verdicts.Measurements({"a": [record]}, {}, {}, 0, {"a": [0]})
    kept = [name for name, keys in (("heldout_fraction", ("heldout_fraction", "heldout_total")),
                                    ("gap", ("gap", "train_total")))
            if any(key in record for key in keys)]  # fmt: skip
    if not all(np.isfinite(m.values("a", name)).all() for name in kept):
        return False
    by_step = [record.get("log2_excess") or {}, *(record.get("excess_by_prefix") or {}).values()]
    return all(v is not None and math.isfinite(v) for by in by_step for v in by.values())


def _median(values) -> float | None:
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.median(kept) if kept else None


def _load(timing: Mapping[str, Any]) -> float | None:
    """The load average a job recorded (the 1-minute one of three)."""
    load = timing.get("load_average")
    return load[0] if isinstance(load, list | tuple) and load else load


def arm_rows(settings, jobs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per arm the pilot runs: its jobs found and failed (no metrics), those with a value
    that is not finite, the share of seeds at held-out exact 1.0 and training exact 1.0,
    and the median CPU seconds, wall seconds and load average of its jobs."""
    rows = []
    for arm in settings.tested_arms():
        expected = list(settings.seeds_of(arm))
        found = jobs["metrics"].get(arm, {})
        timing = jobs["timing"].get(arm, {})
        records = [found[s] for s in expected if s in found]

        def ceiling(side, records=records):
            _, count, total = BITS[side]
            kept = [r for r in records if r.get(total) and r.get(count) is not None]
            return sum(r[count] == r[total] for r in kept) / len(kept) if kept else None

        rows.append({
            "arm": arm, "jobs": len(expected), "found": len(records),
            "failed": [s for s in expected if s not in found],
            "non_finite": [s for s in expected if s in found and not _finite(found[s])],
            "heldout_at_1": ceiling("heldout"), "train_at_1": ceiling("train"),
            "cpu_seconds": _median(t.get("cpu_seconds") for t in timing.values()),
            "wall_seconds": _median([t.get("wall_seconds") for t in timing.values()]
                                    or list(jobs["seconds"].get(arm, {}).values())),
            "load_average": _median(_load(t) for t in timing.values()),
        })  # fmt: skip
    return rows


def report(settings, jobs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """({"setups", "excess", "excess_se", "arms"}: what the pilot shows, no mean in it;
    {claim id: its means and discordant strings}: what is sealed)."""
    m = measurements(settings.seeds, jobs["metrics"], settings.eval_n)
    found: dict[str, Any] = {"setups": [], "excess": [], "excess_se": {}, "arms": []}
    sealed: dict[str, Any] = {}
    for claim in settings.claims:
        arms = claim.arms()
        if claim.kind != "experiment" or not all(a in jobs["metrics"] for a in arms):
            continue
        if claim.test["metric"] in stepped():
            mine = {a: jobs["metrics"][a] for a in arms}
            rows, sealed[claim.id] = excess_reports(claim, mine, settings)
            found["excess"] += rows
            steps = window(list(claim.test["snapshots"]), *WINDOWS[EXCESS_WINDOW])
            se = excess_string_se(claim, mine, steps)
            if se is not None:
                found["excess_se"][claim.id] = se
        else:
            row, sealed[claim.id] = setup_report(claim, m, jobs["metrics"], settings)
            found["setups"].append(row)
    found["arms"] = arm_rows(settings, jobs)
    return found, sealed


def seal(sealed: Mapping[str, Any], folder: Path) -> str:
    """Write the means to folder/SEALED; its SHA-256."""
    text = json.dumps(sealed, sort_keys=True, indent=1, default=float) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SEALED).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# The rule -----------------------------------------------------------------------------------------


def archived_estimates(archive: Path = V4_ARCHIVE) -> dict[str, dict[str, tuple[float, float]]]:
    """{claim: {endpoint: (v4's estimate, its standard error)}} from v4's archived per-seed
    records (V4_TESTS, read as the decision code reads them). The standard error is the sd
    of the d_s over the root of their count; v4's interval width over 3.92 would overstate
    it where the sign-flip interval is lopsided (dropout's, 0.0152 to 0.0625)."""
    jobs = read_jobs(archive=archive)
    found: dict[str, dict[str, tuple[float, float]]] = {}
    for claim, (arm, reference, metrics, count, snapshots) in V4_TESTS.items():
        order = sorted(set(jobs["metrics"][arm]) & set(jobs["metrics"][reference]))[:count]
        m = measurements(order, {a: jobs["metrics"][a] for a in (arm, reference)})
        test = {"arm": arm, "reference": reference, "snapshots": list(snapshots)}
        _, d = differences(test, m, list(metrics))
        found[claim] = {name: (float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(x.size)))
                        for name, x in d.items()}  # fmt: skip
    return found


def prior(v4: Mapping[str, Mapping[str, tuple[float, float]]], claim: str,
          metrics: list[str]) -> list[tuple[float, float]]:  # fmt: skip
    """A forecast's prior on the claim's true effects, endpoint by endpoint (independent):
    centred on v4's estimate, its sd v4's standard error widened for the new setup,
    sqrt(SE^2 + WIDENED^2)."""
    return [(v4[claim][name][0], math.hypot(v4[claim][name][1], WIDENED[name]))
            for name in metrics]  # fmt: skip


def prices(jobs: Mapping[str, Any], arms) -> dict[str, float]:
    """{arm: the median CPU seconds of its pilot jobs} (training_time.json's cpu_seconds).
    An arm none of whose jobs recorded them raises: a job is never priced by a default."""
    found = {}
    for arm in arms:
        seconds = [t["cpu_seconds"] for t in jobs["timing"].get(arm, {}).values()
                   if t.get("cpu_seconds") is not None]  # fmt: skip
        if not seconds:
            raise ValueError(f"arm {arm}: no pilot job recorded cpu_seconds (training_time.json);"
                             " the budget prices each job by the pilot's CPU seconds")  # fmt: skip
        found[arm] = float(statistics.median(seconds))
    return found


def pick_setups(setups: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """{generalisation claim: the row of the first setup of SETUPS that qualifies for it,
    or None}. The setups' spreads play no part."""
    picked = {}
    for claim in FAMILY:
        rows = {tuple(r["setup"]): r for r in setups if r["claim"] == claim}
        if rows:
            picked[claim] = next((rows[s] for s in SETUPS if s in rows and rows[s]["qualifies"]),
                                 None)  # fmt: skip
    return picked


def _endpoints(claim: str, rows: list[dict[str, Any]], sd: str) -> list[dict[str, Any]]:
    """The claim's tested endpoints at their planned effects, with the sd named (`sd` or
    `planned_sd`), as claims_power takes them."""
    return [{"margin": r["margin"], "direction": r["direction"], "sd": r[sd],
             "mean": planned_effect(claim, r["metric"]),
             "grid": LOG2_GRID if r["metric"] == "log2_excess" else power.GRID}
            for r in rows]  # fmt: skip


def plan_seeds(claim: str, run: Mapping[str, Any], level: float) -> int | None:
    """The seeds the claim's plan needs at `level` (at its planned effects and planned sds;
    two endpoints: at the pilot's correlation and at independence, the more); None:
    unreachable."""
    ends = _endpoints(claim, run["endpoints"], "planned_sd")
    floor = MIN_EXCESS_SEEDS if claim == "pre_ln_warmup" else 2
    if len(ends) == 2:
        return power.joint_seeds_needed(ends, [run["correlation"], 0.0], level, at_least=floor)
    one = ends[0]
    return power.seeds_needed(one["margin"], one["direction"], one["sd"], level,
                              effect=one["mean"], at_least=floor, exact=True,
                              grid=one["grid"])  # fmt: skip


def verdict_chances(claim: str, run: Mapping[str, Any], n: int, level: float,
                    v4=None) -> dict[str, float]:  # fmt: skip
    """The chance of each verdict at n seeds, the point-estimate sds and correlation: at
    the planned effects, or over v4's prior (`v4`: a forecast)."""
    ends = _endpoints(claim, run["endpoints"], "sd")
    belief = None if v4 is None else prior(v4, claim, [r["metric"] for r in run["endpoints"]])
    return power.verdicts_by_simulation(n, ends, run.get("correlation", 0.0), level,
                                        prior=belief)  # fmt: skip


def power_at(claim: str, run: Mapping[str, Any], n: int, level: float) -> float:
    """P(SUPPORTED) at n seeds, the planned effects and the point-estimate sds; 0 where n
    seeds cannot reach the level at all."""
    if n < max(2, power.feasible_seeds(level)):
        return 0.0
    return verdict_chances(claim, run, n, level)[SUPPORTED]


def fund(runs: Mapping[str, Mapping[str, Any]], plans: Mapping[str, int | None],
         cpu: Mapping[str, float], level: float) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The budget's rule over the claims of `runs`, in FAMILY's order: {claim: its seeds,
    CPU seconds and whether it was cut, or that it leaves (`left`)}. An arm already funded
    for an earlier claim costs only the seeds beyond its count."""
    left_over = BUDGET_CPU_S * (1 - RESERVE)
    trained: dict[str, int] = {}
    out: dict[str, dict[str, Any]] = {}
    for claim in (c for c in FAMILY if c in runs):
        arms = runs[claim]["arms"]

        def spend(n, arms=arms):
            return sum(max(0, n - trained.get(a, 0)) * cpu[a] for a in arms)

        planned = plans[claim]
        row: dict[str, Any] = {"planned": power.UNREACHABLE if planned is None else planned}
        if planned is not None and spend(planned) <= left_over:
            n = planned
        else:
            n = max((k for k in range(power.MAX_SEEDS + 1) if spend(k) <= left_over), default=0)
            row.update(cut=True, power=power_at(claim, runs[claim], n, level))
            if row["power"] < POWER_FLOOR:
                out[claim] = {**row, "seeds": n, "left": True, "verdict": NOT_AT_BUDGET}
                continue
        row.update(seeds=n, cpu_seconds=spend(n))
        left_over -= spend(n)
        trained.update({a: max(trained.get(a, 0), n) for a in arms})
        out[claim] = row
    return out


def runs_of(found: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """({claim: what its run is planned from: arms, tested endpoints, correlation, setup},
    {claim: why it is not run}) from the report."""
    runs: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    for claim, row in pick_setups(found["setups"]).items():
        if row is None:
            out[claim] = NOT_AT_SCALE
            continue
        runs[claim] = {"arms": [row["arm"], row["reference"]], "setup": row["setup"],
                       "pilot_claim": row["id"], "correlation": row.get("correlation", 0.0),
                       "endpoints": [e for e in row["endpoints"] if e["tested"]]}  # fmt: skip
    measured = [r for r in found["excess"] if r["measured"]]
    if measured:
        row = measured[0]
        runs["pre_ln_warmup"] = {"arms": [row["arm"], row["reference"]], "pilot_claim": row["id"],
                                 "endpoints": [row], "strings": row["strings"],
                                 "snapshots": row["snapshots"]}  # fmt: skip
    for claim, run in list(runs.items()):
        if not all(math.isfinite(e["sd"]) and e["sd"] > 0 for e in run["endpoints"]):
            out[claim] = "not plannable: no pilot spread"
            del runs[claim]
    return runs, out


def choose(found: Mapping[str, Any], jobs: Mapping[str, Any], v4,
           alpha: float = ALPHA) -> dict[str, Any]:  # fmt: skip
    """The design's rule (the module's table): each claim's setup, its planned and funded
    seeds, the family and its level, and each claim's forecast. Reads the report's spreads,
    room and the jobs' CPU seconds, never a pilot's mean."""
    runs, not_run = runs_of(found)
    not_run.update({c: "not run: the pilot measured it nowhere" for c in FAMILY
                    if c not in runs and c not in not_run})  # fmt: skip
    cpu = prices(jobs, sorted({a for run in runs.values() for a in run["arms"]}))
    staying, left, plans = [c for c in FAMILY if c in runs], {}, {}
    while True:
        level = alpha / max(1, len(staying))
        for claim in staying:
            if (claim, level) not in plans:
                plans[claim, level] = plan_seeds(claim, runs[claim], level)
        funded = fund({c: runs[c] for c in staying}, {c: plans[c, level] for c in staying},
                      cpu, level)  # fmt: skip
        leaving = [c for c in staying if funded[c].get("left")]
        left.update({c: funded[c] for c in leaving})
        if not leaving:
            break
        staying = [c for c in staying if c not in leaving]
    claims: dict[str, Any] = {}
    for claim in FAMILY:
        if claim in not_run:
            claims[claim] = {"verdict": not_run[claim]}
        elif claim in left:
            claims[claim] = {**{k: v for k, v in runs[claim].items() if k != "endpoints"},
                             **left[claim]}  # fmt: skip
        else:
            row = funded[claim]
            forecast = verdict_chances(claim, runs[claim], row["seeds"], level, v4)
            claims[claim] = {
                **{k: v for k, v in runs[claim].items() if k != "endpoints"}, **row,
                "forecast": forecast, "predicted": max(forecast, key=forecast.get),
                "power": row.get("power", power_at(claim, runs[claim], row["seeds"], level)),
            }  # fmt: skip
    spent = sum(c.get("cpu_seconds", 0.0) for c in claims.values())
    return {"family": staying, "level": level, "claims": claims, "cpu_per_job": cpu,
            "budget": {"cpu_seconds": BUDGET_CPU_S, "reserve": RESERVE,
                       "available": BUDGET_CPU_S * (1 - RESERVE), "spent": spent}}  # fmt: skip


# What `report` prints ---------------------------------------------------------------------------


def _f(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _endpoint_name(e: Mapping[str, Any]) -> str:
    if e.get("margin") is None:
        return f"{e['metric']} (reported)"
    return f"{e['metric']} ({e['direction']} {e['margin']:g})"


def _chances(found: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in found.items())


def markdown(found: Mapping[str, Any], picked: Mapping[str, Any] | None, digest: str,
             problem: str = "") -> str:  # fmt: skip
    """The report as printed: spreads, room, ceilings, costs and the rule's choices; no
    mean of any endpoint (those are in the sealed file, whose SHA-256 it gives)."""
    lines = [f"The pilot's means are sealed in {SEALED} (SHA-256 {digest}), opened after "
             "registration. Nothing below is a mean effect.", "",
             "Generalisation setups (each claim's reference: the arm without its regulariser)",
             "", "| pilot claim | endpoint | seeds | sd | plan sd | skewness | excess kurtosis "
             "| strings' share | correlation | reference gap: median (least) | reference "
             "held-out: median | qualifies |", "|---" * 12 + "|"]  # fmt: skip
    for r in found["setups"]:
        room_ = r["room"]
        for i, e in enumerate(r["endpoints"]):
            first = i == 0
            lines.append("| " + " | ".join([
                f"`{r['id']}`" if first else "", _endpoint_name(e), str(e["seeds"]),
                _f(e["sd"]), _f(e["planned_sd"]), _f(e["skewness"]),
                _f(e["excess_kurtosis"]), _f(e["strings_share"]),
                _f(r.get("correlation")) if first else "",
                f"{_f(room_['median_gap'])} ({_f(room_['least_gap'])})" if first else "",
                _f(room_["median_heldout"]) if first else "",
                ("yes" if r["qualifies"] else "no") if first else ""]) + " |")  # fmt: skip
    discordant_ = [r for r in found["setups"] if r["discordant"]]
    if discordant_:
        lines += ["", "Discordant strings per seed (right in one arm, wrong in the other)", "",
                  "| pilot claim | held-out | training |", "|---|---|---|"]  # fmt: skip
        for r in discordant_:
            cells = [", ".join(map(str, r["discordant"].get(s, []))) or "—"
                     for s in ("heldout", "train")]  # fmt: skip
            lines.append(f"| `{r['id']}` | {cells[0]} | {cells[1]} |")
    if found["excess"]:
        lines += ["", "The excess (log2 of the ratio; only the measured row plans)", "",
                  "| pilot claim | strings | window | row | seeds | sd | plan sd | skewness "
                  "| excess kurtosis | step-to-step sd |", "|---" * 10 + "|"]  # fmt: skip
        for r in found["excess"]:
            lines.append(f"| `{r['id']}` | {r['strings']} | {r['window']} | "
                         f"{'measured' if r['measured'] else 'description'} | {r['seeds']} | "
                         f"{_f(r['sd'])} | {_f(r['planned_sd'])} | {_f(r['skewness'])} | "
                         f"{_f(r['excess_kurtosis'])} | {_f(r['step_to_step_sd'])} |")  # fmt: skip
    for claim_id, se in found["excess_se"].items():
        lines += ["", f"`{claim_id}`: the standard error of one arm's log2 excess at one "
                  "snapshot, from the strings alone: " + ", ".join(
                      f"{_f(v)} on {e:,}" for e, v in se.items())]  # fmt: skip
    lines += ["", "Arms (medians over their jobs)", "",
              "| arm | jobs found | failed seeds | non-finite seeds | held-out exact 1.0 | "
              "training exact 1.0 | CPU s a job | wall s a job | load average |",
              "|---" * 9 + "|"]  # fmt: skip
    for a in found["arms"]:
        lines.append(f"| {a['arm']} | {a['found']}/{a['jobs']} | "
                     f"{', '.join(map(str, a['failed'])) or '—'} | "
                     f"{', '.join(map(str, a['non_finite'])) or '—'} | "
                     f"{_f(a['heldout_at_1'], 2)} | {_f(a['train_at_1'], 2)} | "
                     f"{_f(a['cpu_seconds'], 4)} | {_f(a['wall_seconds'], 4)} | "
                     f"{_f(a['load_average'])} |")  # fmt: skip
    lines += ["", "The rule", ""]
    if picked is None:
        lines.append(f"Not applied: {problem}")
    else:
        budget = picked["budget"]
        lines += [f"Family: {', '.join(picked['family']) or 'none'}; Holm's worst step "
                  f"{picked['level']:.4g}. Budget {budget['cpu_seconds']:,} CPU-seconds, "
                  f"{budget['reserve']:.0%} held back: {budget['available']:,.0f} to spend, "
                  f"{budget['spent']:,.0f} spent.", "",
                  "| claim | setup | planned seeds | seeds | CPU seconds | power at the planned "
                  "effects | forecast | predicted |", "|---" * 8 + "|"]  # fmt: skip
        for claim, c in picked["claims"].items():
            if "seeds" not in c:
                lines.append(f"| `{claim}` | {c['verdict']} | | | | | | |")
                continue
            where = (f"{c['setup'][0]:,} strings, {c['setup'][1]:,} steps" if "setup" in c
                     else f"{c['strings']:,} strings, {len(c['snapshots'])} snapshots")  # fmt: skip
            if c.get("left"):
                lines.append(f"| `{claim}` | {where} | {c['planned']} | {c['seeds']} (what is "
                             f"left) | | {_f(c['power'], 2)} | | {c['verdict']} |")  # fmt: skip
                continue
            seeds = f"{c['seeds']}{' (cut)' if c.get('cut') else ''}"
            lines.append(f"| `{claim}` | {where} | {c['planned']} | {seeds} | "
                         f"{c['cpu_seconds']:,.0f} | {_f(c['power'], 2)} | "
                         f"{_chances(c['forecast'])} | {c['predicted']} |")  # fmt: skip
        lines += ["", "CPU seconds a job: " + ", ".join(
            f"{arm} {s:,.0f}" for arm, s in picked["cpu_per_job"].items())]  # fmt: skip
    lines += ["", "Planned seeds: power 0.8 at the planned effects and sds (the 80 % upper "
              f"bound), unreachable above {power.MAX_SEEDS}. Power: at the planned effects and "
              "the point-estimate sds. Forecast: over a prior centred on v4's estimates. "
              "The lattice counts above 53 seeds are floating point: exact to "
              "rounding."]  # fmt: skip
    return "\n".join(lines) + "\n"


# Cost ---------------------------------------------------------------------------------------------


def arm_class(recipe) -> tuple[int, bool, bool]:
    """What a step's time depends on here: encoder layers, dropout on, smoothing on."""
    return recipe.num_layers, recipe.dropout > 0, recipe.label_smoothing > 0


def archived_rates(jobs: Mapping[str, Any], settings) -> dict[tuple, tuple[float, float]]:
    """{arm class: (seconds a step, seconds of the rest of a job)} from an archived run's
    jobs (median over its Transformer arms of each class, of at least 100 steps)."""
    found: dict[tuple, list[tuple[float, float]]] = {}
    for arm, by_seed in jobs["timing"].items():
        for seed, timing in by_seed.items():
            wall = jobs["seconds"].get(arm, {}).get(seed)
            trained = timing["trained"]
            if wall is None or trained["arch"] != "transformer" or trained["steps"] < 100:
                continue
            key = (trained["num_layers"], trained["dropout"] > 0, trained["label_smoothing"] > 0)
            per_step = timing["train_seconds"] / timing["steps_run"]
            found.setdefault(key, []).append((per_step, wall - timing["train_seconds"]))
    return {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v))
            for k, v in found.items()}  # fmt: skip


def job_seconds(settings, arm: str, rates) -> float:
    """One (arm, seed) job's estimated wall seconds: its steps at its class's rate, the rest
    of the job as the class's, and the excess's evaluation at its snapshots."""
    from tcrformer.training.measures import EXCESS_STRINGS  # imports torch

    recipe = settings.recipe(arm, settings.seeds[0])
    key = arm_class(recipe)
    if key not in rates:
        near = [k for k in rates if k[0] == key[0]] or list(rates)
        key = near[0]
    per_step, rest = rates[key]
    seconds = recipe.steps * per_step + rest
    extras = settings.extras_of(arm)
    if "snapshots" in extras:
        strings = settings.excess_strings_of(arm) or EXCESS_STRINGS
        total = strings + sum(k for k in EXCESS_PREFIXES if k < strings)
        per_1000 = EXCESS_SECONDS.get(recipe.num_layers, max(EXCESS_SECONDS.values()))
        seconds += len(extras["snapshots"]) * total / 1000 * per_1000
    return seconds


def cost(settings, rates) -> dict[str, Any]:
    """Per arm the claims read: its jobs, estimated seconds a job, and CPU hours; the
    total, and the wall hours on 2 cores."""
    rows = []
    for arm in settings.tested_arms():
        each = job_seconds(settings, arm, rates)
        jobs = len(settings.seeds_of(arm))
        rows.append({"arm": arm, "jobs": jobs, "seconds_per_job": each,
                     "cpu_hours": jobs * each / 3600})  # fmt: skip
    total = sum(r["cpu_hours"] for r in rows)
    return {"arms": rows, "cpu_hours": total, "wall_hours_2_cores": total / 2}


# The command line ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    reporting = commands.add_parser("report")
    reporting.add_argument("--pilot", type=Path, default=PILOT)
    where = reporting.add_mutually_exclusive_group(required=True)
    where.add_argument("--results", type=Path, help="results/<run> of the pilot")
    where.add_argument("--archive", type=Path, help="an archive of the pilot run")
    reporting.add_argument("--alpha", type=float, default=ALPHA)
    reporting.add_argument("--v4", type=Path, default=V4_ARCHIVE, help="v4's archived run")
    reporting.add_argument("--out", type=Path, default=OUT,
                           help=f"writes report.md, report.json and {SEALED} here")  # fmt: skip
    costing = commands.add_parser("cost")
    costing.add_argument("--pilot", type=Path, default=PILOT)
    costing.add_argument("--rates", type=Path, default=V4_ARCHIVE)
    args = parser.parse_args(argv)
    settings = pilot_settings(args.pilot)
    if args.command == "cost":
        found = cost(settings, archived_rates(read_jobs(archive=args.rates), settings))
        for row in found["arms"]:
            print(f"{row['arm']}: {row['jobs']} jobs x {row['seconds_per_job']:.0f} s = "
                  f"{row['cpu_hours']:.2f} CPU h")  # fmt: skip
        hours = found["wall_hours_2_cores"]
        print(f"total {found['cpu_hours']:.1f} CPU h, {hours:.1f} h on 2 cores")
        return 0
    jobs = read_jobs(args.results, args.archive)
    if not jobs["metrics"]:
        print("error: no finished pilot job found", file=sys.stderr)
        return 1
    found, sealed = report(settings, jobs)
    digest = seal(sealed, args.out)
    picked, problem = None, ""
    try:
        picked = choose(found, jobs, archived_estimates(args.v4), args.alpha)
    except ValueError as error:
        problem = str(error)
    text = markdown(found, picked, digest, problem)
    print(text, end="")
    (args.out / "report.md").write_text(text, encoding="utf-8")
    kept = {"sealed_sha256": digest, "rows": found, "picked": picked}
    (args.out / "report.json").write_text(json.dumps(kept, indent=1, default=str))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
