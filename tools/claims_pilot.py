"""The claims' pilot: each candidate setup's spread, room and seeds, and the setup the
design's rule picks (the pilot's section of the claims design in docs/).

    python -m tools.claims_pilot report --results results/claims_pilot
    python -m tools.claims_pilot report --archive results/archive/claims_pilot.tar.gz
    python -m tools.claims_pilot cost [--rates results/archive/claims_v4.tar.gz]

The pilot's configuration (workflow/claims/config/claims_pilot.yaml, laid over the claims file
as `--configfile` lays it) names each candidate setup as a claim whose test has the endpoints
a claims run would test: its arms, metric, margin and direction, and its co-primary ones. Each
is read with the decision code's own definitions (tcrclaims.verdicts: the seeds the arms
share, each role's per-seed values, a by-step metric at the test's snapshots), so a pilot's
d_s are what a run's would be. Per setup, `report` gives:

    each endpoint   its pilot mean and sd over seeds (the mean is shown, never used), the sd
                    a plan uses (tools.claims_power.sd_upper: its 80 % upper bound), the
                    planned effect and the seeds the plan needs for power 0.8 at the worst
                    Holm step; with co-primary endpoints, the seeds both need together
                    (joint_seeds_needed, at the pilot's correlation and at independence) and
                    the chance of each verdict there (the forecast a prediction registers)
    room            the reference arm's train minus held-out gap (median and least over
                    seeds): what the regulariser could close
    the excess      for a by-step metric measured on nested prefixes of its strings
                    (excess_by_prefix) and at snapshots: the same at each count of strings
                    and each window of snapshots (WINDOWS), and the spread of log2 of the
                    excess from one snapshot to the next within a seed (noise of the weights,
                    not of the seeds)

then applies the selection rule (`choose`): it reads the spreads, the room and the cost,
never a pilot's mean effect. `cost` estimates what a configuration's jobs take, from the
per-step times of an archived run (its training_time.json files and Snakemake benchmarks)
and the excess's evaluation time per 1,000 strings (EXCESS_SECONDS).
"""

from __future__ import annotations

import argparse
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

from tcrclaims import verdicts
from tcrclaims.metrics import EXCESS_PREFIXES, stepped

from tools import claims_power as power

ROOT = Path(__file__).resolve().parents[1]
PILOT = ROOT / "workflow/claims/config/claims_pilot.yaml"
ALPHA, EXPERIMENTS = 0.05, 3  # the Holm family the planned run's experiments form
ROOM = 0.08  # a generalisation setup qualifies: its reference's median gap at least this
MIN_STRINGS = 2000  # the excess is evaluated on at least this many held-out strings
BUDGET_S = 12 * 3600 * 2  # a claims run: 12 hours on 2 cores, in job-seconds
# Seconds to evaluate the eval-mode excess on 1,000 strings at one snapshot, by encoder
# layers, at the per-step speed of the v4 run's machine: measured on a 1-thread job beside a
# loaded machine (6 + 6 Pre-LN: 3.15 s for 2,000 strings where a training step took 0.59 s;
# 2 + 2: 0.92 s where a step took 0.255 s) and scaled by the v4 run's own step times there.
EXCESS_SECONDS = {6: 0.68, 2: 0.16}
JOB = re.compile(r"claims/arms/([a-z0-9_]+)/seed(\d+)/(metrics\.json|training_time\.json)$")
BENCH = re.compile(r"benchmarks/train_claim_arm_([a-z0-9_]+)_seed(\d+)\.tsv$")


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


def measurements(settings, metrics: Mapping[str, Mapping[int, dict]], replace_metric=None):
    """verdicts.Measurements of the jobs found (each arm at the seeds it has), with
    `replace_metric` (name, function of a record) swapping one metric's value."""
    arms, seeds = {}, {}
    for arm, by_seed in metrics.items():
        order = [s for s in settings.seeds if s in by_seed]
        rows = [dict(by_seed[s]) for s in order]
        if replace_metric is not None:
            name, value = replace_metric
            rows = [{**row, name: value(row)} for row in rows]
        arms[arm], seeds[arm] = rows, order
    return verdicts.Measurements(arms, {}, {}, settings.eval_n, seeds, at_steps=stepped())


# What a setup's endpoints say -------------------------------------------------------------------


def differences(test: Mapping[str, Any], m) -> tuple[list[int], dict[str, np.ndarray]]:
    """The seeds the test's arms share, and each endpoint's d_s (arm minus reference) there,
    as the decision code reads them."""
    seeds = verdicts.shared_seeds(test, m)
    found = {}
    for end in verdicts.endpoints(test):
        one = {**test, **end}
        found[end["metric"]] = (verdicts.per_seed(one, m, "arm", seeds)
                                - verdicts.per_seed(one, m, "reference", seeds))  # fmt: skip
    return seeds, found


def endpoint_row(d: np.ndarray, end: Mapping[str, Any], level: float) -> dict[str, Any]:
    """One endpoint's spread over the pilot's seeds and the plan's seeds for it alone."""
    d = d[np.isfinite(d)]
    n = int(d.size)
    sd = float(np.std(d, ddof=1)) if n >= 2 else math.nan
    row = {"metric": end["metric"], "margin": end["margin"], "direction": end["direction"],
           "seeds": n, "mean": float(np.mean(d)) if n else math.nan, "sd": sd,
           "planned_effect": power.planned_effect(end["margin"], end["direction"])}  # fmt: skip
    row["planned_sd"] = power.sd_upper(sd, n) if n >= 2 else math.nan
    usable = n >= 2 and math.isfinite(row["planned_sd"]) and row["planned_sd"] > 0
    row["plan_seeds"] = (power.seeds_needed(end["margin"], end["direction"], row["planned_sd"],
                                            level) if usable else None)  # fmt: skip
    return row


def setup_report(claim, m, level: float, settings) -> dict[str, Any]:
    """One candidate setup (a pilot claim): its endpoints, their joint plan and forecast, and
    the reference arm's room."""
    test = claim.test
    seeds, found = differences(test, m)
    ends = verdicts.endpoints(test)
    rows = [endpoint_row(found[e["metric"]], e, level) for e in ends]
    report: dict[str, Any] = {"id": claim.id, "arm": test["arm"],
                              "reference": test["reference"], "seeds": seeds, "endpoints": rows,
                              "train_set": settings.arms[test["arm"]].train_set}  # fmt: skip
    gap = m.values(test["reference"], "gap", seeds)
    if np.isfinite(gap).any():  # a fixed training set: the room the regulariser has
        held = m.values(test["reference"], "heldout_fraction", seeds)
        report["room"] = {"median_gap": float(np.nanmedian(gap)),
                          "least_gap": float(np.nanmin(gap)),
                          "median_heldout": float(np.nanmedian(held))}  # fmt: skip
    planned = [{"margin": r["margin"], "direction": r["direction"], "mean": r["planned_effect"],
                "sd": r["planned_sd"]} for r in rows]  # fmt: skip
    if any(not (math.isfinite(p["sd"]) and p["sd"] > 0) for p in planned):
        return report
    corr = 0.0
    if len(rows) == 2:
        a, b = (found[e["metric"]] for e in ends)
        keep = np.isfinite(a) & np.isfinite(b)
        corr = float(np.corrcoef(a[keep], b[keep])[0, 1]) if keep.sum() > 2 else 0.0
        report["correlation"] = corr
        report["plan_seeds"] = power.joint_seeds_needed(planned, [corr, 0.0], level)
    else:
        report["plan_seeds"] = rows[0]["plan_seeds"]
    n = report["plan_seeds"]
    report["forecast"] = power.verdicts_by_simulation(n, planned, corr, level)
    return report


# The excess: at each count of strings and each window of snapshots ------------------------------

# name -> (steps apart, back from the last snapshot, over how many steps)
WINDOWS = {"every 20 steps over the last 200": (20, 200), "every 40 over the last 160": (40, 160)}


def window(snapshots: list[int], every: int, span: int) -> list[int]:
    """The snapshots `every` steps apart, back from the last, within `span` steps of it."""
    last = max(snapshots)
    return [s for s in snapshots if (last - s) % every == 0 and last - s <= span]


def by_count(prefixes: Mapping) -> dict[int, Any]:
    """excess_by_prefix with its counts as integers (JSON keeps them as strings)."""
    return {int(k): v for k, v in prefixes.items()}


def excess_reports(claim, metrics, settings, level: float) -> list[dict[str, Any]]:
    """The excess claim at each count of strings its records hold (excess_by_prefix and
    its own) and each window of snapshots (WINDOWS): the endpoint's spread and seeds."""
    test = claim.test
    own = test.get("excess_strings")
    first = next(iter(next(iter(metrics.values())).values()))
    counts = sorted({*by_count(first.get("excess_by_prefix", {})), *([own] if own else [])})
    endpoint = verdicts.endpoints(test)[0]
    rows = []
    for count in counts:

        def at(row, count=count):
            return row["log2_excess"] if count == own else by_count(row["excess_by_prefix"])[count]

        m = measurements(settings, metrics, ("log2_excess", at))
        for name, (every, span) in WINDOWS.items():
            steps = window(list(test["snapshots"]), every, span)
            seeds, found = differences({**test, "snapshots": steps}, m)
            row = endpoint_row(found[test["metric"]], endpoint, level)
            rows.append({"strings": count, "window": name, "snapshots": steps, **row,
                         "step_to_step_sd": step_noise(m, test, seeds)})  # fmt: skip
    return rows


def step_noise(m, test, seeds) -> float:
    """The sd, over the seeds of both arms and their snapshots, of log2 of the excess at
    one snapshot over the one before: how much the weights alone move it."""
    jumps = []
    for role in ("arm", "reference"):
        by_step = m.by_step(test[role], test["metric"], seeds)
        steps = sorted(s for s in by_step if s in test["snapshots"])
        for before, after in zip(steps, steps[1:], strict=False):
            jumps.append(np.log2(by_step[after] / by_step[before]))
    values = np.concatenate(jumps) if jumps else np.array([])
    values = values[np.isfinite(values)]
    return float(np.std(values, ddof=1)) if values.size >= 2 else math.nan


# The rule -----------------------------------------------------------------------------------------


def arm_seconds(jobs: Mapping[str, Any], arms: list[str]) -> dict[str, float]:
    """The median wall seconds of each arm's pilot jobs (their Snakemake benchmarks); 1 for
    every arm where some arm has none (the cost is then counted in jobs)."""
    found = {arm: list(jobs.get("seconds", {}).get(arm, {}).values()) for arm in arms}
    if not all(found.values()):
        return dict.fromkeys(arms, 1.0)
    return {arm: statistics.median(times) for arm, times in found.items()}


def choose(reports: list[dict[str, Any]], jobs: Mapping[str, Any]) -> dict[str, Any]:
    """The design's rule. Generalisation (setups grouped by their shared arm): a setup
    qualifies when every claim of it has the reference's median gap at least ROOM; of those,
    the one whose claims run cheapest at the seeds their plans need (the shared arm at the
    larger count, each reference at its own), ties to the larger training set; none: the
    setup with the most room, marked. Excess claims: of the rows on at least MIN_STRINGS
    strings, the fewest seeds, ties to fewer strings, then fewer snapshots."""
    picked: dict[str, Any] = {}
    setups: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        if "room" in r:
            setups.setdefault(r["arm"], []).append(r)
    every = [a for arm, cs in setups.items() for a in (arm, *(c["reference"] for c in cs))]
    seconds = arm_seconds(jobs, every)
    costs = {}
    for arm, claims in setups.items():
        if any(c.get("plan_seeds") is None for c in claims):
            continue
        shared = max(c["plan_seeds"] for c in claims) * seconds[arm]
        costs[arm] = shared + sum(c["plan_seeds"] * seconds[c["reference"]] for c in claims)
    qualifying = [a for a, cs in setups.items() if a in costs
                  and all(c["room"]["median_gap"] >= ROOM for c in cs)]  # fmt: skip
    if qualifying:
        size = {a: cs[0]["train_set"] or 0 for a, cs in setups.items()}
        best = min(qualifying, key=lambda a: (costs[a], -size[a]))
        picked["generalisation"] = {"setup": best, "cost": costs[best],
                                    "within_budget": costs[best] <= BUDGET_S}  # fmt: skip
    elif setups:
        best = max(setups, key=lambda a: min(c["room"]["median_gap"] for c in setups[a]))
        picked["generalisation"] = {"setup": best, "no_room": True}
    excess = [r for r in reports if "strings" in r]
    usable = [r for r in excess if r["strings"] >= MIN_STRINGS and r["plan_seeds"] is not None]
    if usable:
        best = min(usable, key=lambda r: (r["plan_seeds"], r["strings"], len(r["snapshots"])))
        picked["excess"] = {k: best[k] for k in ("strings", "window", "snapshots", "plan_seeds")}
    return picked


def report(settings, jobs: Mapping[str, Any], level: float) -> list[dict[str, Any]]:
    """Every pilot claim's report (setup_report; for a by-step metric, excess_reports)."""
    m = measurements(settings, jobs["metrics"])
    rows: list[dict[str, Any]] = []
    for claim in settings.claims:
        arms = claim.arms()
        if claim.kind != "experiment" or not all(a in jobs["metrics"] for a in arms):
            continue
        if claim.test["metric"] in stepped():
            mine = {a: jobs["metrics"][a] for a in arms}
            rows += [{"id": claim.id, **r} for r in excess_reports(claim, mine, settings, level)]
        else:
            rows.append(setup_report(claim, m, level, settings))
    return rows


def markdown(rows: list[dict[str, Any]], picked: Mapping[str, Any], level: float) -> str:
    def f(x, digits=3):
        return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else (
            f"{x:.{digits}g}" if isinstance(x, float) else str(x))  # fmt: skip

    lines = [f"Level of the plan: {level:.4g} (alpha / the family's experiments); power "
             f"{power.POWER}.", "", "| setup | endpoint | seeds | mean | sd | plan sd | planned "
             "| plan seeds | room (median, least gap) | joint seeds | forecast |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if "strings" in r:
            continue
        room = r.get("room")
        room_text = f"{f(room['median_gap'])}, {f(room['least_gap'])}" if room else "—"
        forecast = ", ".join(f"{k} {v:.2f}" for k, v in r.get("forecast", {}).items()) or "—"
        for i, e in enumerate(r["endpoints"]):
            lead = [
                f"`{r['id']}`" if i == 0 else "",
            ]
            lines.append(
                "| "
                + " | ".join(
                    lead
                    + [
                        f"{e['metric']} ({e['direction']} {e['margin']:g})",
                        str(e["seeds"]),
                        f(e["mean"]),
                        f(e["sd"]),
                        f(e["planned_sd"]),
                        f(e["planned_effect"]),
                        f(e["plan_seeds"]),
                        room_text if i == 0 else "",
                        f(r.get("plan_seeds")) if i == 0 else "",
                        forecast if i == 0 else "",
                    ]
                )
                + " |"
            )
    excess = [r for r in rows if "strings" in r]
    if excess:
        lines += ["", "| claim | strings | window | seeds | mean | sd | plan sd | plan seeds | "
                  "step-to-step sd |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in excess:
            lines.append(f"| `{r['id']}` | {r['strings']} | {r['window']} | {r['seeds']} | "
                         f"{f(r['mean'])} | {f(r['sd'])} | {f(r['planned_sd'])} | "
                         f"{f(r['plan_seeds'])} | {f(r['step_to_step_sd'])} |")  # fmt: skip
    lines += ["", "Picked by the rule: " + json.dumps(picked, sort_keys=True)]
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
    reporting.add_argument("--experiments", type=int, default=EXPERIMENTS)
    reporting.add_argument("--json", type=Path, help="also write the rows here")
    costing = commands.add_parser("cost")
    costing.add_argument("--pilot", type=Path, default=PILOT)
    costing.add_argument("--rates", type=Path, default=ROOT / "results/archive/claims_v4.tar.gz")
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
    level = args.alpha / args.experiments
    rows = report(settings, jobs, level)
    picked = choose(rows, jobs)
    print(markdown(rows, picked, level), end="")
    if args.json:
        args.json.write_text(json.dumps({"level": level, "rows": rows, "picked": picked},
                                        indent=1, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
