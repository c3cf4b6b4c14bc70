"""Each claim's criterion, evaluated by code: measurements in, a verdict and a sentence out.

The inputs are the measurements the claims chapter made:

    arms[arm]   a list over seeds of each seed's metrics (evaluate_claim_arm)
    analytic    the experiments without training (analytic.py)
    cost        the attention cost benchmark; speed the GRU and Transformer step rates

Experiments (seed-based) are decided together by protocol.py: their effects first, then one
Holm family. Analytic claims, checks and benchmarks each have an evaluator here, of the name
their test's `effect` gives (EVALUATORS, by kind).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tcrformer.chapters.claims import protocol
from tcrformer.chapters.claims.kinds import (
    EVALUATED,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    REFUTED,
    SUPPORTED,
    VERDICTS,  # noqa: F401 (re-exported: what each kind of claim may be judged)
)


@dataclass(frozen=True)
class Measurements:
    arms: Mapping[str, Sequence[Mapping[str, Any]]]  # arm -> per-seed metrics
    analytic: Mapping[str, Any]
    cost: Mapping[str, Any]
    speed: Mapping[str, Any]
    eval_n: int

    def values(self, arm: str, metric: str) -> np.ndarray:
        """One number per seed of the arm (None, a diverged run's missing value, as NaN)."""
        return np.array(
            [math.nan if seed.get(metric) is None else seed[metric] for seed in self.arms[arm]],
            dtype=float,
        )


def _spread(x: np.ndarray) -> str:
    """'median (min–max)' over seeds."""
    finite = x[np.isfinite(x)]
    if not finite.size:
        return "not finite"
    return f"{np.median(finite):.4g} ({finite.min():.4g}–{finite.max():.4g})"


# Experiments: one number per seed ------------------------------------------------------------


def diverged(final: np.ndarray, reference_median: float, factor: float) -> np.ndarray:
    """A run diverged when its final loss is not finite or above factor x the reference."""
    return (~np.isfinite(final) | (final > factor * reference_median)).astype(float)


def per_seed(test: Mapping[str, Any], m: Measurements, role: str) -> np.ndarray:
    """The test's metric for one role (arm or reference) as one number per seed; several
    arms (a sweep of rates) give each seed the mean over them, except for a rate, whose
    units are the runs (every arm's seeds, one after the other)."""
    names = test[role]
    names = [names] if isinstance(names, str) else list(names)
    values = [_metric(test, m, arm) for arm in names]
    if test["effect"] == "rate_difference":
        return np.concatenate(values)
    return np.mean(values, axis=0)


def _metric(test: Mapping[str, Any], m: Measurements, arm: str) -> np.ndarray:
    if test["metric"] != "diverged":
        return m.values(arm, test["metric"])
    reference = test["divergence_reference"]
    reference = reference if isinstance(reference, str) else reference[arm]
    finals = m.values(reference, "final_loss")
    return diverged(m.values(arm, "final_loss"), float(np.nanmedian(finals)), test["factor"])


def experiment_effect(test: Mapping[str, Any], m: Measurements, resamples: int, seed: int):
    roles = ("arm", "reference") if "reference" in test else ("arm",)
    samples = [per_seed(test, m, role) for role in roles]
    found = protocol.effect(
        test["effect"], samples, test["margin"], test["direction"], resamples, seed
    )
    return found, samples


def experiment_sentence(test: Mapping[str, Any], samples, found) -> str:
    names = [test[r] if isinstance(test[r], str) else "+".join(test[r])
             for r in ("arm", "reference") if r in test]  # fmt: skip
    parts = [f"{name} {_spread(s)}" for name, s in zip(names, samples, strict=True)]
    return f"{test['metric']} per seed: {' vs '.join(parts)}; effect {protocol.effect_text(found)}"


# Analytic claims, checks and benchmarks ------------------------------------------------------


def _draws(test, m: Measurements, alpha: float, resamples: int, seed: int):
    """The median of a per-draw quantity, tested against the margin over the draws."""
    draws = np.asarray(m.analytic["jacobian_ratios"], dtype=float)
    found = protocol.effect("median", [draws], test["margin"], test["direction"], resamples, seed)
    reach = float(np.mean(draws >= test["margin"]))
    text = (
        f"{test['metric']} over {draws.size} draws: median {protocol.effect_text(found)}; "
        f"{reach:.0%} of draws reach {test['margin']:g}"
    )
    return protocol.decide_alone(found, alpha), text, found


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
    memory, seconds = m.cost["memory_exponent"], m.cost["time_exponent"]
    text = (
        f"allocated memory grows as L^{memory:.2f}; time (a benchmark) as L^{seconds:.2f} "
        f"(L >= {m.cost['min_length']}, this machine)"
    )
    return (HOLDS if test["low"] <= memory <= test["high"] else FAILS), text, None


def _speed(test, m: Measurements, *_):
    """SUPPORTED if every block's GRU/Transformer step-rate ratio is below `below`; NOT
    SUPPORTED if every one is above `above`; otherwise INCONCLUSIVE."""
    gru = np.asarray(m.speed["gru_blocks"], float)
    transformer = np.asarray(m.speed["transformer_blocks"], float)
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
    "analytic": {"draws": _draws, "first_rise": _first_rise},
    "check": {"relative": _relative, "permutation": _permutation, "quadratic": _quadratic},
    "benchmark": {"speed": _speed},
}
if {k: set(v) for k, v in EVALUATORS.items()} != {k: set(v) for k, v in EVALUATED.items()}:
    raise ImportError("verdicts: evaluators and claims.kinds.EVALUATED disagree")


# Every claim -------------------------------------------------------------------------------------


def judge_all(settings, m: Measurements) -> dict[str, protocol.Decision]:
    """{claim id: Decision}: the experiments as one Holm family, every other claim alone."""
    decisions, effects = {}, {}
    for claim in settings.claims:
        test = claim.test
        if claim.kind == "experiment":
            found, samples = experiment_effect(test, m, settings.resamples, settings.bootstrap_seed)
            effects[claim.id] = found
            decisions[claim.id] = protocol.Decision(
                INCONCLUSIVE, experiment_sentence(test, samples, found), found, adjusted=True
            )
        else:
            evaluate = EVALUATORS[claim.kind][test["effect"]]
            verdict, text, found = evaluate(
                test, m, settings.alpha, settings.resamples, settings.bootstrap_seed
            )
            decisions[claim.id] = protocol.Decision(verdict, text, found)
    for claim_id, verdict in protocol.decide(effects, settings.alpha).items():
        decisions[claim_id].verdict = verdict
    return decisions
