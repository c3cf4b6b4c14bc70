"""The claims' decision rule (docs/claims.md, "Protocol"): an effect over seeds, an interval,
a margin fixed in advance, and a correction for testing many claims.

Every seed-based claim (`kind: experiment`) has one primary effect, computed from one number
per seed and arm:

    median_difference    median(arm) - median(reference)
    relative_difference  median(arm) / median(reference) - 1
    rate_difference      the difference of two rates of a 0/1 outcome (diverged), one per run
    median               median(arm)                          (one arm's per-seed statistic)

Its uncertainty comes from the seeds: a percentile bootstrap (scipy.stats.bootstrap, each arm
resampled over its own seeds) gives the 95 % interval and the bootstrap distribution. A rate
difference instead gets Newcombe's hybrid score interval (the Wilson intervals of the two
rates, scipy.stats.binomtest, combined; Newcombe 1998, method 10): a bootstrap of 0 of 8
against 0 of 8 would claim a difference of exactly 0, while 0 of 8 still allows a rate of
31 %. Its p-values are those of the interval inverted (the level at which it first clears
the margin). Against the margin m, in the claim's direction, two one-sided p-values:

    greater     p_support = P*(effect <= m)    p_refute = P*(effect >= m)
    less        p_support = P*(effect >= m)    p_refute = P*(effect <= m)
    equivalent  p_support = max(P*(effect <= -m), P*(effect >= m))   (both sides, TOST)
                p_refute  = min(P*(effect >= -m), P*(effect <= m))

(each as (count + 1) / (resamples + 1)). The smaller of the two is the claim's p-value, and
Holm's step-down procedure over all experiments at `alpha` decides: a rejected claim is
SUPPORTED or NOT SUPPORTED by the side of its p-value, any other INCONCLUSIVE. Analytic claims
over random draws use the same test on the draws, at `alpha`, outside the Holm family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from tcrformer.chapters.claims.kinds import (  # noqa: F401 (the names, re-exported)
    DIRECTIONS,
    EFFECTS,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    REFUTED,
    SUPPORTED,
)


def _median_difference(x, y, axis=-1):
    return np.median(x, axis=axis) - np.median(y, axis=axis)


def _relative_difference(x, y, axis=-1):
    return np.median(x, axis=axis) / np.median(y, axis=axis) - 1


def _rate_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _median(x, axis=-1):
    return np.median(x, axis=axis)


STATISTICS: dict[str, tuple[int, Callable]] = {  # effect -> (samples it takes, statistic)
    "median_difference": (2, _median_difference),
    "relative_difference": (2, _relative_difference),
    "rate_difference": (2, _rate_difference),
    "median": (1, _median),
}
if set(STATISTICS) != set(EFFECTS):
    raise ImportError(f"protocol: effects without code: {set(EFFECTS) ^ set(STATISTICS)}")


@dataclass(frozen=True)
class Effect:
    name: str
    estimate: float
    low: float  # the 95 % percentile bootstrap interval
    high: float
    margin: float
    direction: str
    p_support: float
    p_refute: float
    seeds: tuple[int, ...]  # samples per arm

    @property
    def p_value(self) -> float:
        return min(self.p_support, self.p_refute)

    @property
    def side(self) -> str:
        return SUPPORTED if self.p_support <= self.p_refute else REFUTED


def effect(
    name: str,
    samples: Sequence[np.ndarray],
    margin: float,
    direction: str,
    resamples: int = 9999,
    seed: int = 0,
) -> Effect:
    """The effect `name` of the samples (one value per seed each), its interval and its two
    one-sided p-values against the margin."""
    count, statistic = STATISTICS[name]
    samples = tuple(np.asarray(s, dtype=float) for s in samples)
    if len(samples) != count:
        raise ValueError(f"{name} takes {count} samples, got {len(samples)}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: one of {', '.join(DIRECTIONS)}")
    if name == "rate_difference":
        return _rate_effect(samples, margin, direction)
    estimate = float(statistic(*samples))
    if any(s.size < 2 for s in samples) or not np.isfinite(estimate):
        return Effect(name, estimate, math.nan, math.nan, margin, direction, 1.0, 1.0,
                      tuple(s.size for s in samples))  # fmt: skip
    if all(np.ptp(s) == 0 for s in samples):  # nothing varies: every resample is the estimate
        distribution = np.full(resamples, estimate)
        low = high = estimate
    else:
        result = stats.bootstrap(
            samples, statistic, n_resamples=resamples, method="percentile",
            vectorized=True, paired=False, rng=np.random.default_rng(seed),
        )  # fmt: skip
        distribution = result.bootstrap_distribution
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    p_support, p_refute = _p_values(distribution, margin, direction)
    return Effect(name, estimate, low, high, margin, direction, p_support, p_refute,
                  tuple(s.size for s in samples))  # fmt: skip


def newcombe_interval(x: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval for rate(x) - rate(y) of 0/1 outcomes."""

    def wilson(z: np.ndarray) -> tuple[float, float, float]:
        found = stats.binomtest(int(z.sum()), z.size)
        ci = found.proportion_ci(confidence_level=confidence, method="wilson")
        return float(z.mean()), float(ci.low), float(ci.high)

    (p1, l1, u1), (p2, l2, u2) = wilson(x), wilson(y)
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return low, high


def _rate_effect(samples, margin: float, direction: str) -> Effect:
    x, y = samples
    if not set(np.unique(np.concatenate(samples))) <= {0.0, 1.0}:
        raise ValueError("rate_difference takes 0/1 outcomes, one per run")
    estimate = float(x.mean() - y.mean())
    low, high = newcombe_interval(x, y, 0.95)

    def p_clearing(side: str, bound: float) -> float:
        """The smallest one-sided level at which the interval clears `bound` on `side`."""

        def clears(alpha: float) -> bool:
            lo, hi = newcombe_interval(x, y, 1 - 2 * alpha)
            return lo > bound if side == "above" else hi < bound

        if not clears(0.4999):
            return 1.0
        small, large = 1e-9, 0.4999
        if clears(small):
            return small
        for _ in range(60):  # bisection on the level
            middle = (small + large) / 2
            small, large = (small, middle) if clears(middle) else (middle, large)
        return large

    if direction == "greater":
        p_support, p_refute = p_clearing("above", margin), p_clearing("below", margin)
    elif direction == "less":
        p_support, p_refute = p_clearing("below", margin), p_clearing("above", margin)
    else:
        p_support = max(p_clearing("above", -margin), p_clearing("below", margin))
        p_refute = min(p_clearing("below", -margin), p_clearing("above", margin))
    return Effect("rate_difference", estimate, low, high, margin, direction,
                  p_support, p_refute, (x.size, y.size))  # fmt: skip


def _p_values(distribution: np.ndarray, margin: float, direction: str) -> tuple[float, float]:
    def share(mask: np.ndarray) -> float:
        return float((mask.sum() + 1) / (mask.size + 1))

    d = np.asarray(distribution)
    if direction == "greater":
        return share(d <= margin), share(d >= margin)
    if direction == "less":
        return share(d >= margin), share(d <= margin)
    inside_low, inside_high = share(d <= -margin), share(d >= margin)
    return max(inside_low, inside_high), min(share(d >= -margin), share(d <= margin))


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise `alpha`.
    The i-th smallest p-value is compared with alpha / (m - i); the first that fails stops."""
    order = np.argsort(p_values, kind="stable")
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected


@dataclass
class Decision:
    """A claim's verdict, the numbers it rests on, and a sentence."""

    verdict: str
    measured: str
    effect: Effect | None = None
    adjusted: bool = False  # decided inside the Holm family
    numbers: dict[str, Any] = field(default_factory=dict)


def decide(effects: Mapping[str, Effect], alpha: float) -> dict[str, str]:
    """{claim id: verdict} for a Holm family of effects."""
    ids = list(effects)
    rejected = holm([effects[i].p_value for i in ids], alpha)
    return {i: effects[i].side if r else INCONCLUSIVE for i, r in zip(ids, rejected, strict=True)}


def decide_alone(found: Effect, alpha: float) -> str:
    """The verdict of one effect outside a family (analytic claims over random draws)."""
    return found.side if found.p_value <= alpha else INCONCLUSIVE


def effect_text(found: Effect) -> str:
    """'0.62 (95 % CI 0.5 to 0.75; needs above 0.25; p 0.0001; seeds 8/8)'."""
    where = {"greater": "above", "less": "below", "equivalent": "within ±"}[found.direction]
    where = where.rstrip()
    interval = (
        "no interval" if math.isnan(found.low) else f"95 % CI {found.low:.4g} to {found.high:.4g}"
    )
    return (
        f"{found.estimate:.4g} ({interval}; needs {where} {found.margin:g}; "
        f"p {found.p_value:.2g}; seeds {'/'.join(str(n) for n in found.seeds)})"
    )
