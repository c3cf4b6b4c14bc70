"""Golden check v4's held-out validation: counts beyond bands, exact binomial tests.

The held-out seeds, registered with the design (config/golden/v4/design.md), are judged once,
after the method is frozen. What decides, fixed before any of them is read, each at level 5 %:

    (i)  pooled: over the 9 one-sided tests, the seeds beyond the bands made at a 5 % family
         budget (share 0.05 / 9 each); under the method the count is Binomial(9 n, share),
         and an excess rejects;
    (ii) per side: the seeds beyond a band at a 5 % per-side share (the body of each
         model), an exact one-sided binomial test each, Holm over the 9 sides.

Everything else is descriptive: each side's count beyond the committed bands (share
alpha / 9), and the family-wise FAILs with the exact one-sided upper bound on their rate,
the rate the data support ("consistent with up to x %"). The pooled test treats the sides
as independent draws: the two sides of a key cannot both be exceeded by one seed, and the
keys are only mildly dependent, which makes the pooled count if anything less variable than
the binomial, so the test stays conservative in that respect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from tcrformer.stats.binary import exact_binomial_interval
from tcrformer.stats.holm import holm, holm_levels

Band = tuple[float, float]  # (low, high); -inf or +inf where a side is not judged
Bands = Mapping[str, Band]  # key -> band
LEVEL = 0.05  # each primary test's level


@dataclass(frozen=True)
class SideCount:
    key: str
    side: str  # "low" | "high"
    beyond: int  # seeds beyond this side
    seeds: int  # seeds judged on this key
    share: float  # the side's nominal exceedance
    p: float  # exact one-sided binomial p of an excess


def sides(bands: Bands) -> list[tuple[str, str]]:
    """The judged one-sided tests: a side whose end is infinite is not judged."""
    judged = []
    for key, (low, high) in bands.items():
        judged += [(key, "low")] if np.isfinite(low) else []
        judged += [(key, "high")] if np.isfinite(high) else []
    return judged


def beyond(values: np.ndarray, band: Band, side: str) -> np.ndarray:
    """Which values lie beyond one side of the band (NaN: not judged, never beyond)."""
    low, high = band
    with np.errstate(invalid="ignore"):
        return values < low if side == "low" else values > high


def excess_p(count: int, trials: int, share: float) -> float:
    """P(X >= count) for X ~ Binomial(trials, share): the exact p of an excess."""
    return float(stats.binom.sf(count - 1, trials, share))


def side_counts(values: Mapping[str, np.ndarray], bands: Bands, share: float) -> list[SideCount]:
    """Per judged side: the seeds beyond it and the exact p of that many or more."""
    counts = []
    for key, side in sides(bands):
        x = np.asarray(values[key], float)
        judged = int(np.isfinite(x).sum())
        k = int(beyond(x, bands[key], side).sum())
        counts.append(SideCount(key, side, k, judged, share, excess_p(k, judged, share)))
    return counts


def pooled_test(counts: list[SideCount]) -> dict[str, float]:
    """(i): the count over every side against Binomial(side-draws, share)."""
    k, trials = sum(c.beyond for c in counts), sum(c.seeds for c in counts)
    share = counts[0].share
    critical = int(stats.binom.isf(LEVEL, trials, share)) + 1  # smallest count with p <= LEVEL
    while excess_p(critical - 1, trials, share) <= LEVEL:
        critical -= 1
    p = excess_p(k, trials, share)
    return {"beyond": k, "draws": trials, "expected": trials * share, "critical": critical,
            "p": p, "rejects": p <= LEVEL}  # fmt: skip


def per_side_test(counts: list[SideCount]) -> list[dict]:
    """(ii): each side's excess p against its Holm level over the sides."""
    p = [c.p for c in counts]
    decided = zip(counts, holm_levels(p, LEVEL), holm(p, LEVEL), strict=True)
    return [
        {"key": c.key, "side": c.side, "beyond": c.beyond, "seeds": c.seeds,
         "expected": c.seeds * c.share, "p": c.p, "holm_level": level, "rejects": rejects}
        for c, level, rejects in decided
    ]  # fmt: skip


def family_wise(failed: np.ndarray, confidence: float = 0.95) -> dict[str, float]:
    """FAILs of n seeds and the exact one-sided upper confidence bound on the rate: the
    upper end of the two-sided Clopper-Pearson interval at 1 - 2 (1 - confidence)."""
    k, n = int(np.sum(failed)), len(failed)
    upper = exact_binomial_interval(k, n, 1 - 2 * (1 - confidence))[1]
    return {"fail": k, "seeds": n, "rate": k / n, "upper": upper}


def validate(
    values: Mapping[str, np.ndarray], band_at: Callable[[float], Bands], budget: float
) -> dict:
    """The whole record. `values`: key -> the held-out seeds' statistics (one array per key,
    seeds aligned, NaN where a key is not judged); `band_at(share)`: the frozen method's
    bands at a per-side share; `budget`: the golden file's family budget."""
    tests = len(sides(band_at(budget)))
    committed = band_at(budget / tests)
    failed = np.zeros(len(next(iter(values.values()))), bool)
    for key, side in sides(committed):
        failed |= beyond(np.asarray(values[key], float), committed[key], side)
    return {
        "pooled": pooled_test(side_counts(values, band_at(LEVEL / tests), LEVEL / tests)),
        "per_side": per_side_test(side_counts(values, band_at(LEVEL), LEVEL)),
        "committed": [vars(c) for c in side_counts(values, committed, budget / tests)],
        "family_wise": family_wise(failed),
    }


def location_tests(fitting: Mapping[str, np.ndarray], heldout: Mapping[str, np.ndarray]) -> dict:
    """Per key, Welch's t test of the fitting seeds' mean against the held-out seeds' (on the
    judged values, NaN left out): a shift between the two would move every side's rate.
    Reported, not a decision."""
    tests = {}
    for key in fitting:
        a, b = (np.asarray(v, float) for v in (fitting[key], heldout[key]))
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        t = stats.ttest_ind(a, b, equal_var=False)
        shift = (b.mean() - a.mean()) / a.std(ddof=1)
        tests[key] = {"shift_sd": float(shift), "t": float(t.statistic), "p": float(t.pvalue)}
    return tests
