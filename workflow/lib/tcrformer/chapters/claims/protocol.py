"""The claims' decision rule, version 3 (docs/claims.md, "Protocol"): paired effects over
seeds, exact tests against a margin fixed in advance, and Holm over the experiments.

Every arm of an experiment trains the same seeds, and a seed fixes the initial weights, the
batches and the held-out strings of every arm alike, so the seeds pair the arms. Each
seed-based claim (`kind: experiment`) reduces to one number per seed,

    paired_difference   d_s = metric(arm, s) - metric(reference, s)
    paired_relative     d_s = metric(arm, s) / metric(reference, s) - 1
    seed_mean           d_s = metric(arm, s)                    (one arm's statistic)

and its effect is their mean, d = mean_s d_s. The test is Fisher's sign-flip (permutation)
test of the seeds' d_s against the margin m: under "the effect is m", each d_s - m is as
likely to have either sign, so the observed sum is compared with its 2^n sign-flipped
copies (every one of them for n <= 16 seeds, else `flips` random ones). Its one-sided
p-values are exact under that symmetry, and never below 2^-n: a claim needs enough seeds
for 2^-n to clear its Holm level (claims/power.py plans this).

    p_above(m) = P*(T >= T_obs)      p_below(m) = P*(T <= T_obs)      T = sum_s e_s (d_s - m)

Against the margin, in the claim's direction:

    greater     p_support = p_above(m)               p_refute = p_below(m)
    less        p_support = p_below(m)               p_refute = p_above(m)
    equivalent  p_support = max(p_above(-m), p_below(m))    (both sides, TOST)
                p_refute  = min(p_below(-m), p_above(m))

The interval is the same test inverted: the margins the two one-sided tests at level gamma
do not reject, at confidence 1 - 2 gamma (95 % for gamma = 0.025). The smaller p-value of
each experiment enters one Holm step-down family at `alpha`; a rejected claim is SUPPORTED
or NOT SUPPORTED by the side of its p-value, every other claim INCONCLUSIVE. Each
experiment's interval is also shown at its Holm step's level (1 - 2 alpha / (k - rank)),
so the interval and the adjusted decision say the same thing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tcrformer.chapters.claims.kinds import (  # noqa: F401 (the names, re-exported)
    DIRECTIONS,
    EFFECTS,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REFUTED,
    SUPPORTED,
)

EXACT_UP_TO = 16  # seeds up to which every sign vector is enumerated (2^16 = 65,536)
CONFIDENCE = 0.95


def _paired_difference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x - y


def _paired_relative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x / y - 1


def _seed_mean(x: np.ndarray) -> np.ndarray:
    return x


PER_SEED: dict[str, tuple[int, Callable]] = {  # effect -> (arms it takes, d_s from them)
    "paired_difference": (2, _paired_difference),
    "paired_relative": (2, _paired_relative),
    "seed_mean": (1, _seed_mean),
}
if set(PER_SEED) != set(EFFECTS):
    raise ImportError(f"protocol: effects without code: {set(EFFECTS) ^ set(PER_SEED)}")


def per_seed_values(name: str, samples: Sequence[np.ndarray]) -> np.ndarray:
    """d_s, one per seed, from the arms' per-seed values (paired by position)."""
    count, reduce = PER_SEED[name]
    samples = tuple(np.asarray(s, dtype=float) for s in samples)
    if len(samples) != count:
        raise ValueError(f"{name} takes {count} arms, got {len(samples)}")
    if len({s.size for s in samples}) != 1:
        raise ValueError(f"{name} pairs seeds: the arms have {[s.size for s in samples]} seeds")
    return reduce(*samples)


# The sign-flip test ----------------------------------------------------------------------------


def sign_vectors(n: int, flips: int = 20000, seed: int = 0) -> np.ndarray:
    """(K, n) signs: all 2^n for n <= EXACT_UP_TO, else the identity and flips - 1 random."""
    if n <= EXACT_UP_TO:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    rng = np.random.default_rng(seed)
    random = rng.choice((1.0, -1.0), size=(flips - 1, n))
    return np.vstack([np.ones((1, n)), random])


def p_above(d: np.ndarray, m: float, signs: np.ndarray) -> float:
    """P*(T >= T_obs) for T = sum e_s (d_s - m): small when the d_s lie above m."""
    centred = d - m
    observed = centred.sum()
    flipped = signs @ centred  # (K,)
    return float(np.mean(flipped >= observed - 1e-12 * max(1.0, abs(observed))))


def p_below(d: np.ndarray, m: float, signs: np.ndarray) -> float:
    return p_above(-d, -m, signs)


def sign_flip_interval(d: np.ndarray, gamma: float, signs: np.ndarray) -> tuple[float, float]:
    """The margins neither one-sided test rejects at level gamma (confidence 1 - 2 gamma);
    (nan, nan) when even the most extreme margin cannot be rejected (too few seeds)."""
    if np.ptp(d) == 0:
        return float(d[0]), float(d[0])
    span = max(float(np.ptp(d)), abs(float(d.mean())), 1e-3)  # the search reaches past d
    low_end, high_end = float(d.min()) - span, float(d.max()) + span

    def bound(rejects: Callable[[float], bool], inside: float, outside: float) -> float:
        if not rejects(outside):
            return math.nan
        for _ in range(60):  # bisection between a kept and a rejected margin
            middle = (inside + outside) / 2
            inside, outside = (inside, middle) if rejects(middle) else (middle, outside)
        return (inside + outside) / 2

    centre = float(d.mean())
    low = bound(lambda m: p_above(d, m, signs) <= gamma, centre, low_end)
    high = bound(lambda m: p_below(d, m, signs) <= gamma, centre, high_end)
    return low, high


@dataclass(frozen=True)
class Effect:
    name: str
    estimate: float  # the mean of the per-seed values
    low: float  # the 95 % sign-flip interval
    high: float
    margin: float
    direction: str
    p_support: float
    p_refute: float
    seeds: tuple[int, ...]  # seeds per arm
    per_seed: tuple[float, ...] = ()  # d_s
    holm_low: float = math.nan  # the interval at the claim's Holm level
    holm_high: float = math.nan
    holm_level: float = math.nan  # that interval's confidence

    @property
    def p_value(self) -> float:
        return min(self.p_support, self.p_refute)

    @property
    def side(self) -> str:
        return SUPPORTED if self.p_support <= self.p_refute else REFUTED


def _p_values(d: np.ndarray, margin: float, direction: str, signs) -> tuple[float, float]:
    if direction == "greater":
        return p_above(d, margin, signs), p_below(d, margin, signs)
    if direction == "less":
        return p_below(d, margin, signs), p_above(d, margin, signs)
    support = max(p_above(d, -margin, signs), p_below(d, margin, signs))
    refute = min(p_below(d, -margin, signs), p_above(d, margin, signs))
    return support, refute


def effect(
    name: str,
    samples: Sequence[np.ndarray],
    margin: float,
    direction: str,
    flips: int = 20000,
    seed: int = 0,
) -> Effect:
    """The effect `name` of the arms' per-seed values, its interval and its two one-sided
    p-values against the margin. A seed whose value is missing (a diverged run's NaN) in
    any arm is left out of the pairs, and counted in `seeds`."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: one of {', '.join(DIRECTIONS)}")
    all_d = per_seed_values(name, samples)
    d = all_d[np.isfinite(all_d)]
    seeds = (int(d.size), int(all_d.size))
    if d.size < 2:
        return Effect(name, math.nan, math.nan, math.nan, margin, direction, 1.0, 1.0, seeds,
                      tuple(all_d.tolist()))  # fmt: skip
    signs = sign_vectors(d.size, flips, seed)
    low, high = sign_flip_interval(d, (1 - CONFIDENCE) / 2, signs)
    p_support, p_refute = _p_values(d, margin, direction, signs)
    return Effect(name, float(d.mean()), low, high, margin, direction, p_support, p_refute,
                  seeds, tuple(all_d.tolist()))  # fmt: skip


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


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """Each hypothesis's Holm step level alpha / (m - rank), rank by p-value."""
    order = np.argsort(p_values, kind="stable")
    levels = [math.nan] * len(p_values)
    for rank, index in enumerate(order):
        levels[index] = alpha / (len(p_values) - rank)
    return levels


@dataclass
class Decision:
    """A claim's verdict, the numbers it rests on, and a sentence."""

    verdict: str
    measured: str
    effect: Effect | None = None
    adjusted: bool = False  # decided inside the Holm family
    numbers: dict[str, Any] = field(default_factory=dict)
    precondition: str = ""  # "met: ..." or "not met: ..." where the claim registered one


def decide(
    effects: Mapping[str, Effect], alpha: float, samples: Mapping[str, np.ndarray] | None = None
) -> tuple[dict[str, str], dict[str, Effect]]:
    """({claim id: verdict}, {claim id: effect with its Holm-level interval}) for a Holm
    family; `samples` (claim id -> d_s) gives the intervals, else they stay NaN."""
    ids = list(effects)
    p_values = [effects[i].p_value for i in ids]
    rejected = holm(p_values, alpha)
    verdicts = {
        i: effects[i].side if r else INCONCLUSIVE for i, r in zip(ids, rejected, strict=True)
    }
    adjusted = {}
    for claim_id, level in zip(ids, holm_levels(p_values, alpha), strict=True):
        found = effects[claim_id]
        d = np.asarray((samples or {}).get(claim_id, found.per_seed), float)
        d = d[np.isfinite(d)]
        low = high = math.nan
        if d.size >= 2:
            low, high = sign_flip_interval(d, level, sign_vectors(d.size))
        adjusted[claim_id] = replace(found, holm_low=low, holm_high=high, holm_level=1 - 2 * level)
    return verdicts, adjusted


def effect_text(found: Effect) -> str:
    """'0.62 (95 % CI 0.5 to 0.75; needs above 0.25; p 0.0039; seeds 8/8)'."""
    where = {"greater": "above", "less": "below", "equivalent": "within ±"}[found.direction]
    where = where.rstrip()
    interval = (
        "no interval" if math.isnan(found.low) else f"95 % CI {found.low:.4g} to {found.high:.4g}"
    )
    holm_part = ""
    if not math.isnan(found.holm_low):
        holm_part = (
            f"; Holm-level {found.holm_level:.3%} CI {found.holm_low:.4g} to {found.holm_high:.4g}"
        )
    return (
        f"{found.estimate:.4g} ({interval}{holm_part}; needs {where} {found.margin:g}; "
        f"p {found.p_value:.2g}; seeds {found.seeds[0]}/{found.seeds[1]} paired)"
    )
