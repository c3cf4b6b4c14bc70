"""The claims' decision rule (docs/claims.md, "Protocol"): paired effects over seeds, exact
tests against a margin fixed in advance (tcrformer.stats), and Holm over the experiments.

Every arm of an experiment trains the same seeds, and a seed fixes the initial weights, the
batches and the held-out strings of every arm alike, so the seeds pair the arms. Each
seed-based claim (`kind: experiment`) reduces to one number per seed,

    paired_difference   d_s = metric(arm, s) - metric(reference, s)
    paired_relative     d_s = metric(arm, s) / metric(reference, s) - 1
    seed_mean           d_s = metric(arm, s)                    (one arm's statistic)
    paired_binary       d_s = event(arm, s) - event(reference, s), in {-1, 0, 1}

and its effect is their mean. The binary effect is tested by the exact unconditional test
of paired binary outcomes; every other by the exact sign-flip test, with a t-test beside it
(tcrformer.stats.sign_flip and .binary say how each is built, and what it estimates). Each
gives two one-sided p-values against the margin in the claim's direction, p_support and
p_refute, and a 95 % interval by inverting the same test. The smaller p-value of each
experiment enters one Holm step-down family at `alpha`; a rejected claim is SUPPORTED or
NOT SUPPORTED by the side of its p-value, every other claim INCONCLUSIVE. Each interval is
also given at its Holm level (confidence 1 - 2 alpha / (k - rank); after Holm stops, the
stopping step's), so the interval excludes the margin exactly when Holm rejects.

A seed whose value is missing (NaN, a run that left no number) in any arm leaves the pairs,
and the effect counts it (`seeds`: used, run); an infinite value stops the test.

Counts. A fraction of strings (held-out exact, training exact, their gap) is measured as
integer counts, so its d_s are counts out of a known N (`lattice`): its sign-flip null is
exact at any number of seeds, and a d_s off that lattice raises (stats.sign_flip); above 53
seeds its counts pass 2^53 and are summed in floating point, exact to rounding. A
counted metric read from a record without its counts (an archive written before they were
stored) has only its fraction: where its null then falls to Monte Carlo, the effect says so
(`fallback`), and the table shows it.

Co-primary endpoints. A claim may name further endpoints beside its metric (`co_primary`:
the change in the train minus held-out gap beside the held-out gain), each tested against
its own margin on the same seeds. The claim is SUPPORTED only if every endpoint is (an
intersection-union test: p_support is the largest of theirs, valid at the level with no
adjustment); it is NOT SUPPORTED if any endpoint is shown on the other side of its margin
(a union: p_refute is the smallest of theirs times their count, Bonferroni, which is Holm's
first step over them). The joint p-values are exact where each endpoint's is, and the
smaller of the two enters the family as any claim's does (`joint`). Each endpoint's interval
at the claim's Holm level keeps the verdict's own split: its supporting end at the level
(as the intersection-union test rejects), its refuting end one-sided at the level over k
(as Bonferroni rejects), so that an interval shows an endpoint beyond its margin on
either side exactly when that side of the joint test rejects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tcrclaims.kinds import (  # noqa: F401 (the names, re-exported)
    DIRECTIONS,
    EFFECTS,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REFUTED,
    SUPPORTED,
)
from tcrformer.stats.binary import paired_binary_counts, paired_binary_interval, paired_binary_test
from tcrformer.stats.holm import holm, holm_levels
from tcrformer.stats.sides import Sides, disagree
from tcrformer.stats.sign_flip import continuous_test, sign_flip_null

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
    "paired_binary": (2, _paired_difference),
}
BINARY = ("paired_binary",)  # the effects whose d_s are paired binary outcomes
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


# One experiment's effect --------------------------------------------------------------------


@dataclass(frozen=True)
class Effect(Sides):
    """An experiment's effect: the mean of its d_s, the 95 % interval, the two one-sided
    p-values against the margin (stats.sides.Sides), how the test was built, and the secondary
    test beside it (a t-test beside the sign-flip test, McNemar's beside the binary one)."""

    name: str
    estimate: float  # the mean of the per-seed values
    low: float  # the 95 % interval, by inverting the test
    high: float
    margin: float
    direction: str
    seeds: tuple[int, int]  # (used, run)
    per_seed: tuple[float, ...] = ()  # d_s, every seed run
    method: str = ""  # enumeration, lattice, monte_carlo or exact_unconditional
    monte_carlo_error: float = 0.0  # of p_value; 0 when exact
    secondary: str = ""  # the test beside it
    secondary_p: float = math.nan  # its p-value on the primary's side
    disagree: bool = False  # the two differ on rejection at the claim's Holm level
    holm_low: float = math.nan  # the interval at the claim's Holm level
    holm_high: float = math.nan
    holm_level: float = math.nan  # that interval's confidence
    # with k co-primary endpoints: the one-sided confidence of its refuting end, 1 - level/k
    holm_refute_level: float = math.nan
    metric: str = ""  # what the d_s are of, where the claim says
    lattice: int | None = None  # the N the d_s are counts out of, when known from counts
    fallback: str = ""  # why an exact test expected here ran as Monte Carlo, if it did
    secondary_sides: tuple[float, float] = (math.nan, math.nan)  # its (support, refute)
    endpoints: tuple[Effect, ...] = ()  # a joint effect's endpoints, the primary first

    @property
    def side(self) -> str:
        """The verdict a rejection gives: SUPPORTED or NOT SUPPORTED, by the smaller p."""
        return SUPPORTED if self.supports else REFUTED


def _used(all_d: np.ndarray) -> np.ndarray:
    """The seeds with a value (NaN: none); an infinite value stays, for the test to refuse."""
    return all_d[~np.isnan(all_d)]


def interval(name: str, d: np.ndarray, confidence: float,
             lattice: int | None = None) -> tuple[float, float]:  # fmt: skip
    """The interval of effect `name` by inverting its test, at `confidence` (`lattice`: the
    N the d_s are counts out of, as the test was built)."""
    if name in BINARY:
        return paired_binary_interval(*paired_binary_counts(d, name), confidence)
    return sign_flip_null(d, name, lattice=lattice).interval(confidence)


def effect(
    name: str,
    samples: Sequence[np.ndarray],
    margin: float,
    direction: str,
    metric: str = "",
    lattice: int | None = None,
    counted: bool = False,
) -> Effect:
    """The effect `name` of the arms' per-seed values, its interval and its two one-sided
    p-values against the margin in `direction`. `lattice`: the N the d_s are counts out of,
    known from the counts (the sign-flip test is then exact, or raises); `counted`: the
    metric is a counted fraction whose counts this record lacks (a Monte Carlo null is then
    a fallback, recorded)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: one of {', '.join(DIRECTIONS)}")
    all_d = per_seed_values(name, samples)
    d = _used(all_d)
    common = dict(name=name, margin=margin, direction=direction, metric=metric,
                  seeds=(int(d.size), int(all_d.size)), per_seed=tuple(all_d.tolist()))  # fmt: skip
    if d.size < 2:
        return Effect(1.0, 1.0, estimate=math.nan, low=math.nan, high=math.nan, **common)
    if name in BINARY:
        t = paired_binary_test(d, margin, direction, CONFIDENCE, name)
        return Effect(t.p_support, t.p_refute, estimate=t.estimate, low=t.low, high=t.high,
                      method=t.method, secondary="McNemar (margin 0)", secondary_p=t.mcnemar_p,
                      **common)  # fmt: skip
    t = continuous_test(d, margin, direction, CONFIDENCE, metric or name, lattice)
    t_side = t.t_support if t.p_support <= t.p_refute else t.t_refute
    fallback = ""
    if t.method == "monte_carlo" and counted:
        fallback = (f"{metric or name}: Monte Carlo where counts give an exact test (the "
                    f"records hold fractions without their counts, {t.reason})")  # fmt: skip
    return Effect(t.p_support, t.p_refute, estimate=t.estimate, low=t.low, high=t.high,
                  method=t.method, monte_carlo_error=t.monte_carlo_error, secondary="t-test",
                  secondary_p=t_side, lattice=lattice, fallback=fallback,
                  secondary_sides=(t.t_support, t.t_refute), **common)  # fmt: skip


def _joined(p_support: Sequence[float], p_refute: Sequence[float]) -> tuple[float, float]:
    """The joint (support, refute) p-values of k endpoints: every one shown on its side
    (intersection-union: the largest), or any one shown on the other (Bonferroni: the
    smallest times k, at most 1)."""
    if any(math.isnan(p) for p in (*p_support, *p_refute)):
        return math.nan, math.nan
    return max(p_support), min(1.0, len(p_refute) * min(p_refute))


def joint(endpoints: Sequence[Effect]) -> Effect:
    """One claim's effect over its endpoints (the primary first, then its co-primary
    endpoints, all on the same seeds): the primary's estimate, interval and seeds, and the
    joint p-values (_joined); each endpoint kept (`endpoints`). One endpoint is itself."""
    if len(endpoints) == 1:
        return endpoints[0]
    primary = endpoints[0]
    support, refute = _joined([e.p_support for e in endpoints], [e.p_refute for e in endpoints])
    t_support, t_refute = _joined([e.secondary_sides[0] for e in endpoints],
                                  [e.secondary_sides[1] for e in endpoints])  # fmt: skip
    methods = " + ".join(dict.fromkeys(e.method for e in endpoints if e.method))
    return replace(
        primary, p_support=support, p_refute=refute, method=methods,
        monte_carlo_error=max(e.monte_carlo_error for e in endpoints),
        secondary_p=t_support if support <= refute else t_refute,
        secondary_sides=(t_support, t_refute),
        fallback="; ".join(e.fallback for e in endpoints if e.fallback),
        seeds=(min(e.seeds[0] for e in endpoints), primary.seeds[1]),
        endpoints=tuple(endpoints),
    )  # fmt: skip


# The family -------------------------------------------------------------------------------------


@dataclass
class Decision:
    """A claim's verdict, the numbers it rests on, and a sentence."""

    verdict: str
    measured: str
    effect: Effect | None = None
    adjusted: bool = False  # decided inside the Holm family
    numbers: dict[str, Any] = field(default_factory=dict)
    precondition: str = ""  # "met: ..." or "not met: ..." where the claim registered one


def decide(effects: Mapping[str, Effect], alpha: float) -> tuple[dict[str, str], dict[str, Effect]]:
    """({claim id: verdict}, {claim id: effect with its Holm-level interval, and whether its
    secondary test differs at that level}) for one Holm family."""
    ids = list(effects)
    p_values = [effects[i].p_value for i in ids]
    rejected = holm(p_values, alpha)
    verdicts = {
        i: effects[i].side if r else INCONCLUSIVE for i, r in zip(ids, rejected, strict=True)
    }
    adjusted = {}
    for claim_id, level in zip(ids, holm_levels(p_values, alpha), strict=True):
        k = max(1, len(effects[claim_id].endpoints))  # Bonferroni's split of the refute side
        found = _at_level(effects[claim_id], level, k)
        ends = tuple(_at_level(e, level, k) for e in found.endpoints)
        adjusted[claim_id] = replace(
            found, endpoints=ends,
            disagree=found.name not in BINARY
            and disagree(found.p_value, found.secondary_p, level),
        )  # fmt: skip
    return verdicts, adjusted


def _at_level(found: Effect, level: float, split: int = 1) -> Effect:
    """The effect with its interval at a Holm level (confidence 1 - 2 level); one of `split`
    co-primary endpoints (a one-sided direction) has its refuting end one-sided at
    1 - level / split, the level the joint refute side's Bonferroni gives each endpoint."""
    d = _used(np.asarray(found.per_seed, float))
    low = high = math.nan
    refute_level = math.nan
    if d.size >= 2:
        low, high = interval(found.name, d, 1 - 2 * level, found.lattice)
        if split > 1 and found.direction in ("greater", "less"):
            refute_level = 1 - level / split
            wide = interval(found.name, d, 1 - 2 * level / split, found.lattice)
            low, high = (low, wide[1]) if found.direction == "greater" else (wide[0], high)
    return replace(found, holm_low=low, holm_high=high, holm_level=1 - 2 * level,
                   holm_refute_level=refute_level)  # fmt: skip


def effect_text(found: Effect) -> str:
    """'0.62 (95 % CI 0.5 to 0.75; needs above 0.25; p 0.0039, lattice; t-test p 0.003;
    seeds 8/8 paired)'."""
    where = {"greater": "above", "less": "below", "equivalent": "within ±"}[found.direction]
    where = where.rstrip()
    ci = "no interval" if math.isnan(found.low) else f"95 % CI {found.low:.4g} to {found.high:.4g}"
    holm_part = ""
    if not math.isnan(found.holm_low):
        holm_part = (
            f"; Holm-level {found.holm_level:.3%} CI {found.holm_low:.4g} to {found.holm_high:.4g}"
        )
        if not math.isnan(found.holm_refute_level):
            end = "upper" if found.direction == "greater" else "lower"
            holm_part += f", its {end} end one-sided at {found.holm_refute_level:.3%} (Bonferroni)"
    beside = ""
    if found.secondary and not math.isnan(found.secondary_p):
        differs = ", differs at the Holm level" if found.disagree else ""
        beside = f"; {found.secondary} p {found.secondary_p:.2g}{differs}"
    text = (
        f"{found.estimate:.4g} ({ci}{holm_part}; needs {where} {found.margin:g}; "
        f"p {found.p_value:.2g}, {found.method or 'no test'}{beside}; "
        f"seeds {found.seeds[0]}/{found.seeds[1]} paired)"
    )
    if found.endpoints:
        parts = "; ".join(f"{e.metric or e.name} {effect_text(e)}" for e in found.endpoints)
        text += (f"; every endpoint must be shown on its side (joint p support "
                 f"{found.p_support:.2g}, refute {found.p_refute:.2g}, Bonferroni over "
                 f"{len(found.endpoints)}): {parts}")  # fmt: skip
    return text
