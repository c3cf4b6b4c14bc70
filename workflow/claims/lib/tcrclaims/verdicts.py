"""Each claim's criterion, evaluated by code: measurements in, a verdict and a sentence out.

The inputs are the measurements the claims chapter made:

    arms[arm]   a list over the arm's seeds of each seed's metrics (evaluate_claim_arm)
    seeds[arm]  those seeds: the arms of an experiment are paired by seed
    analytic    the experiments without training (analytic.py)
    benchmarks  per claim whose test reads a benchmark job of its own (kinds.BENCHMARKS):
                the attention cost, or the GRU and Transformer step rates

First each claim's manipulation checks (PRECONDITIONS): did the situation the claim speaks
of occur here? A claim whose check fails is NOT TESTABLE HERE, whatever its numbers. The
other experiments are decided together by protocol.py: their paired effects first, then one
Holm family. An experiment uses the leading `seeds` (its test's count, default all) of the
seeds its arms share. A by-step metric (metrics.Metric.at_steps) is read at the claim's
`snapshots` by the rule AT_STEPS names (log2 of the mean over them). Analytic claims,
checks and benchmarks each have an evaluator here, of the name their test's `effect` gives
(EVALUATORS, by kind).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tcrclaims import protocol
from tcrclaims.kinds import (
    EVALUATED,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REFUTED,
    SUPPORTED,
    VERDICTS,  # noqa: F401 (re-exported: what each kind of claim may be judged)
)
from tcrclaims.kinds import PRECONDITIONS as KIND_PRECONDITIONS
from tcrclaims.metrics import COUNTED, COUNTED_DIFFERENCES, counted_value


@dataclass(frozen=True)
class Measurements:
    arms: Mapping[str, Sequence[Mapping[str, Any]]]  # arm -> per-seed metrics
    analytic: Mapping[str, Any]
    benchmarks: Mapping[str, Mapping[str, Any]]  # claim id -> its benchmark job's results
    eval_n: int
    seeds: Mapping[str, Sequence[int]] = field(default_factory=dict)  # arm -> its seeds
    benchmark: Mapping[str, Any] = field(default_factory=dict)  # the judged claim's (for_claim)
    # metric -> how a claim reads it at its snapshots, for the by-step metrics (AT_STEPS;
    # metrics.stepped(): the registry itself is each claim's own decision code)
    at_steps: Mapping[str, str] = field(default_factory=dict)

    def for_claim(self, claim_id: str) -> Measurements:
        """What one claim is judged on: these measurements, with its own benchmark's."""
        return replace(self, benchmark=self.benchmarks.get(claim_id, {}))

    def seeds_of(self, arm: str) -> list[int]:
        return list(self.seeds.get(arm, range(len(self.arms[arm]))))

    def values(self, arm: str, metric: str, seeds: Sequence[int] | None = None) -> np.ndarray:
        """One number per seed of the arm, in the order of `seeds` (default: the arm's own);
        None (a diverged run's missing value) as NaN. A counted fraction is read from its
        integer counts where the record has them (metrics.counted_value)."""
        by_seed = dict(zip(self.seeds_of(arm), self.arms[arm], strict=True))
        chosen = self.seeds_of(arm) if seeds is None else seeds
        return np.array([_value(by_seed[s], metric) for s in chosen], dtype=float)

    def lattice(self, arm: str, metric: str, seeds: Sequence[int]) -> int | None:
        """The N every seed's value of a counted metric is a count out of (the least common
        multiple over the seeds), from the records' counts; None for a metric that is not
        counted, or when a record lacks its counts."""
        if metric not in COUNTED and metric not in COUNTED_DIFFERENCES:
            return None
        by_seed = dict(zip(self.seeds_of(arm), self.arms[arm], strict=True))
        found = [counted_value(by_seed[s], metric) for s in seeds]
        if not found or any(f is None for f in found):
            return None
        return math.lcm(*(n for _, n in found))

    def by_step(self, arm: str, metric: str, seeds: Sequence[int]) -> dict[int, np.ndarray]:
        """A by-step metric: {step: one number per seed of `seeds`} (None as NaN)."""
        by_seed = dict(zip(self.seeds_of(arm), self.arms[arm], strict=True))
        rows = [{int(step): v for step, v in (by_seed[s].get(metric) or {}).items()} for s in seeds]
        steps = sorted(set().union(*rows)) if rows else []
        return {step: np.array([math.nan if r.get(step) is None else r[step] for r in rows],
                               dtype=float) for step in steps}  # fmt: skip


def _value(record: Mapping[str, Any], metric: str) -> float:
    """A record's value of a metric: a counted one from its counts where it has them."""
    if metric in COUNTED or metric in COUNTED_DIFFERENCES:
        found = counted_value(record, metric)
        if found is not None:
            return found[0]
    value = record.get(metric)
    return math.nan if value is None else value


def _spread(x: np.ndarray) -> str:
    """'median (min–max)' over seeds."""
    finite = x[np.isfinite(x)]
    if not finite.size:
        return "not finite"
    return f"{np.median(finite):.4g} ({finite.min():.4g}–{finite.max():.4g})"


def _names(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


# Experiments: one number per seed, the arms paired by seed ------------------------------------


def shared_seeds(test: Mapping[str, Any], m: Measurements) -> list[int]:
    """The seeds every arm of the test ran, in order, the leading `seeds` of them when the
    test names a count: what pairs the arms."""
    arms = [a for role in ("arm", "reference") if role in test for a in _names(test[role])]
    common = set(m.seeds_of(arms[0])).intersection(*(m.seeds_of(a) for a in arms[1:]))
    ordered = [s for s in m.seeds_of(arms[0]) if s in common]
    return ordered[: test.get("seeds", len(ordered))]


# By-step metrics: the steps of the claim's `snapshots` a value is read at -------------------


def _log2_mean_over_steps(test, m: Measurements, arm: str, metric: str, seeds) -> np.ndarray:
    by_step = m.by_step(arm, metric, seeds)
    missing = np.full(len(seeds), np.nan)  # a step no seed measured: no value
    return np.log2(np.mean([by_step.get(step, missing) for step in test["snapshots"]], axis=0))


AT_STEPS: dict[str, Callable] = {"log2_mean": _log2_mean_over_steps}


def arm_values(test: Mapping[str, Any], m: Measurements, arm: str, metric: str, seeds):
    """One number per seed of `seeds`: a by-step metric read at the test's snapshots."""
    rule = m.at_steps.get(metric)
    if rule is None:
        return m.values(arm, metric, seeds)
    if not test.get("snapshots"):
        raise ValueError(f"{metric} is measured at weight snapshots: the test names none")
    return AT_STEPS[rule](test, m, arm, metric, seeds)


def per_seed(test: Mapping[str, Any], m: Measurements, role: str, seeds) -> np.ndarray:
    """The test's metric for one role (arm or reference), one number per seed of `seeds`;
    several arms give each seed the mean over them."""
    names = _names(test[role])
    return np.mean([arm_values(test, m, arm, test["metric"], seeds) for arm in names], axis=0)


# Experiments: one number per seed, the arms paired by seed ------------------------------------


def endpoints(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The test's endpoints, each {metric, margin, direction}: its own, then its
    `co_primary` ones (protocol, "Co-primary endpoints"), tested on the same arms and seeds."""
    own = {key: test[key] for key in ("metric", "margin", "direction")}
    return [own, *(dict(end) for end in test.get("co_primary", ()))]


def _role_lattice(test, m: Measurements, role: str, seeds) -> int | None:
    """The N a role's per-seed values are counts out of: its arms' lattice, times their
    number where several are averaged; None if any arm's is unknown."""
    names = _names(test[role])
    found = [m.lattice(arm, test["metric"], seeds) for arm in names]
    if any(n is None for n in found):
        return None
    return len(names) * math.lcm(*found)


def _lattice(test, m: Measurements, roles, seeds) -> int | None:
    """The N the test's d_s are counts out of, when its metric is counted and every record
    has its counts; a ratio of counts has none."""
    if test["effect"] == "paired_relative" or not seeds:
        return None
    found = [_role_lattice(test, m, role, seeds) for role in roles]
    return None if any(n is None for n in found) else math.lcm(*found)


def experiment_effect(test: Mapping[str, Any], m: Measurements):
    """The claim's effect (joint over its endpoints) and the primary endpoint's per-seed
    values of each role."""
    roles = ("arm", "reference") if "reference" in test else ("arm",)
    seeds = shared_seeds(test, m)
    found, samples = [], None
    for end in endpoints(test):
        one = {**test, **end}
        values = [per_seed(one, m, role, seeds) for role in roles]
        counted = end["metric"] in COUNTED or end["metric"] in COUNTED_DIFFERENCES
        found.append(protocol.effect(test["effect"], values, end["margin"], end["direction"],
                                     end["metric"], _lattice(one, m, roles, seeds),
                                     counted))  # fmt: skip
        samples = values if samples is None else samples
    return protocol.joint(found), samples


def experiment_sentence(test: Mapping[str, Any], samples, found, m: Measurements) -> str:
    names = ["+".join(_names(test[r])) for r in ("arm", "reference") if r in test]
    parts = [f"{name} {_spread(s)}" for name, s in zip(names, samples, strict=True)]
    text = f"{test['metric']} per seed: {' vs '.join(parts)}; effect {protocol.effect_text(found)}"
    arms = [a for r in ("arm", "reference") if r in test for a in _names(test[r])]
    seeds = shared_seeds(test, m)
    beside = [(end["metric"], "co-primary") for end in endpoints(test)[1:]]
    beside += [(metric, "reported") for metric in test.get("report", ())]  # never tested
    for metric, role in beside:
        parts = "; ".join(f"{a} {_spread(arm_values(test, m, a, metric, seeds))}" for a in arms)
        text += f"; {metric} ({role}) {parts}"
    return text


# Manipulation checks: did the claim's situation occur here? -----------------------------------


def _medians(check, m: Measurements, metric: str, test) -> dict[str, float]:
    """Each named arm's median of a metric over the test's seeds that the arm ran (all of
    the arm's seeds when the test names no arm)."""
    used = shared_seeds(test, m) if test.get("arm") else None
    medians = {}
    for arm in check["arms"]:
        seeds = None if used is None else [s for s in used if s in m.seeds_of(arm)]
        medians[arm] = float(np.nanmedian(m.values(arm, metric, seeds or None)))
    return medians


def _converged(check, m: Measurements, test) -> tuple[bool, str]:
    """Every named arm's median held-out exact (fraction) is at least `at_least`."""
    return _median_at_least({**check, "metric": "heldout_fraction"}, m, test)


def _median_at_least(check, m: Measurements, test) -> tuple[bool, str]:
    """Every named arm's median `metric` over the claim's seeds is at least `at_least`."""
    medians = _medians(check, m, check["metric"], test)
    ok = all(v >= check["at_least"] for v in medians.values())
    parts = ", ".join(f"{arm} {v:.3g}" for arm, v in medians.items())
    return ok, f"median {check['metric']} {parts} (needs >= {check['at_least']:g})"


def _by_design(check, *_) -> tuple[bool, str]:
    """Never met: the registered design cannot tell the claim's answers apart (`reason`);
    the effect is measured and shown, outside the Holm family."""
    return False, f"by design: {check['reason']}"


def _blowup(check, m: Measurements, *_) -> tuple[bool, str]:
    """The bad batch reached the gradient and did harm in the named (unclipped) arm."""
    arm = check["arm"]
    damage = float(np.nanmedian(m.values(arm, "stress_damage")))
    ratio = float(np.nanmedian(m.values(arm, "stress_norm_ratio")))
    ok = damage >= check["damage_at_least"] and ratio >= check["norm_ratio_at_least"]
    return ok, (
        f"{arm}: median damage {damage:.3g} (needs >= {check['damage_at_least']:g}), "
        f"gradient norm at the bad step {ratio:.3g} x the steps before "
        f"(needs >= {check['norm_ratio_at_least']:g})"
    )


def _parallelism(check, m: Measurements, *_) -> tuple[bool, str]:
    """The Transformer gains at least `at_least` from the benchmark's threads."""
    gain, threads = float(m.benchmark["parallel_speedup"]), int(m.benchmark["threads"])
    ok = threads >= 2 and gain >= check["at_least"]
    return (
        ok,
        f"Transformer on {threads} threads {gain:.3g} x its speed on 1 "
        f"(needs >= {check['at_least']:g})",
    )


PRECONDITIONS: dict[str, Callable] = {
    "converged": _converged,
    "median_at_least": _median_at_least,
    "by_design": _by_design,
    "blowup": _blowup,
    "parallelism": _parallelism,
}
if set(PRECONDITIONS) != set(KIND_PRECONDITIONS):
    raise ImportError("verdicts: manipulation checks and kinds.PRECONDITIONS disagree")


def precondition_met(claim, m: Measurements) -> tuple[bool, str]:
    """All of the claim's manipulation checks, and what each found."""
    found = [PRECONDITIONS[check["check"]](check, m, claim.test) for check in claim.precondition]
    met = all(ok for ok, _ in found)
    text = "; ".join(text for _, text in found)
    return met, ("met: " if met else "not met: ") + text if found else ""


# Analytic claims, checks and benchmarks ------------------------------------------------------


def _every_seed(test, m: Measurements, *_):
    """HOLDS if every seed's value (or paired difference, arm minus reference) is above
    `above` / below `below`."""
    seeds = shared_seeds(test, m)
    values = per_seed(test, m, "arm", seeds)
    if "reference" in test:
        values = values - per_seed(test, m, "reference", seeds)
    ok = (
        values.size > 0
        and np.isfinite(values).all()
        and bool(
            np.all(values > test["above"]) if "above" in test else np.all(values < test["below"])
        )
    )
    bound = f"above {test['above']:g}" if "above" in test else f"below {test['below']:g}"
    what = "difference" if "reference" in test else "value"
    text = f"{test['metric']} {what} per seed (seeds {seeds}): {_spread(values)}; every one {bound}"
    return (HOLDS if ok else FAILS), text, None


def _draws_share(test, m: Measurements, *_):
    """HOLDS if at least `share` of the draws are above `above`."""
    draws = np.asarray(m.analytic["jacobian_ratios"], dtype=float)
    reach = float(np.mean(draws > test["above"]))
    text = (
        f"{test['metric']} over {draws.size} draws: median {np.median(draws):.3g}; "
        f"{reach:.1%} of draws above {test['above']:g} (needs {test['share']:.0%})"
    )
    return (HOLDS if reach >= test["share"] else FAILS), text, None


def _first_rise(test, m: Measurements, *_):
    """SUPPORTED if the similarity falls at every step over distances 0..`within`."""
    rise = m.analytic["cosine_first_rise"]
    where = "never, up to the largest distance" if rise is None else f"first at distance {rise}"
    ok = rise is None or rise > test["within"]
    return (SUPPORTED if ok else REFUTED), f"cos(PE[0], PE[k]) falls and rises again {where}", None


def _relative(test, m: Measurements, *_):
    """HOLDS if every relative residual of the fitted maps is below `below`."""
    residuals = m.analytic["relative_residuals"]
    text = "relative residual " + ", ".join(f"k={k}: {r:.2g}" for k, r in residuals.items())
    return (HOLDS if all(r < test["below"] for r in residuals.values()) else FAILS), text, None


def _permutation(test, m: Measurements, *_):
    """HOLDS if the shuffle error is below `off_below` without positions, above `on_above`
    with them."""
    off, on = m.analytic["permutation_off"], m.analytic["permutation_on"]
    ok = off < test["off_below"] and on > test["on_above"]
    return (
        (HOLDS if ok else FAILS),
        f"shuffle error {off:.2g} without positions, {on:.2g} with",
        None,
    )


def _quadratic(test, m: Measurements, *_):
    """HOLDS if the memory exponent over L >= min_length lies in [low, high]."""
    memory, seconds = m.benchmark["memory_exponent"], m.benchmark["time_exponent"]
    text = (
        f"allocated memory grows as L^{memory:.2f}; time (a benchmark) as L^{seconds:.2f} "
        f"(L >= {m.benchmark['min_length']}, this machine)"
    )
    return (HOLDS if test["low"] <= memory <= test["high"] else FAILS), text, None


def _speed(test, m: Measurements, *_):
    """SUPPORTED if every block's GRU/Transformer step-rate ratio is below `below`; NOT
    SUPPORTED if every one is above `above`; otherwise INCONCLUSIVE."""
    gru = np.asarray(m.benchmark["gru_blocks"], float)
    transformer = np.asarray(m.benchmark["transformer_blocks"], float)
    ratios = gru / transformer
    text = (
        f"GRU over Transformer steps/s per block {', '.join(f'{r:.2f}' for r in ratios)} "
        f"({np.median(gru):.1f} vs {np.median(transformer):.1f} steps/s, median block)"
    )
    if np.all(ratios < test["below"]):
        return SUPPORTED, text, None
    if np.all(ratios > test["above"]):
        return REFUTED, text, None
    return INCONCLUSIVE, text, None


EVALUATORS: dict[str, dict[str, Callable]] = {
    "analytic": {"first_rise": _first_rise},
    "check": {
        "relative": _relative,
        "permutation": _permutation,
        "quadratic": _quadratic,
        "every_seed": _every_seed,
        "draws_share": _draws_share,
    },  # fmt: skip
    "benchmark": {"speed": _speed},
}
if {k: set(v) for k, v in EVALUATORS.items()} != {k: set(v) for k, v in EVALUATED.items()}:
    raise ImportError("verdicts: evaluators and kinds.EVALUATED disagree")


# Every claim -------------------------------------------------------------------------------------


def judge_all(settings, m: Measurements) -> dict[str, protocol.Decision]:
    """{claim id: Decision}. A claim whose manipulation check fails is NOT TESTABLE HERE and
    leaves the family; the other experiments are one Holm family; every other claim alone."""
    decisions, effects, samples = {}, {}, {}
    for claim in settings.claims:
        seen = m.for_claim(claim.id)
        met, situation = precondition_met(claim, seen)
        if claim.kind == "experiment":
            found, samples[claim.id] = experiment_effect(claim.test, m)
            decisions[claim.id] = protocol.Decision(NOT_TESTABLE, "", found, adjusted=met,
                                                    precondition=situation)  # fmt: skip
            if met:
                effects[claim.id] = found
        else:
            verdict, text, found = EVALUATORS[claim.kind][claim.test["effect"]](claim.test, seen)
            decisions[claim.id] = protocol.Decision(
                verdict if met else NOT_TESTABLE, text, found, precondition=situation
            )
    verdicts, adjusted = protocol.decide(effects, settings.alpha)
    for claim_id, verdict in verdicts.items():
        decisions[claim_id].verdict, decisions[claim_id].effect = verdict, adjusted[claim_id]
    for claim in settings.claims:
        if claim.kind == "experiment":
            decision = decisions[claim.id]
            decision.measured = experiment_sentence(claim.test, samples[claim.id],
                                                    decision.effect, m)  # fmt: skip
    return decisions
