"""Binary outcomes: paired between two arms, and the rate of one.

Paired binary outcomes (a run diverged or not, in each of two paired arms): per seed, arm
minus reference is +1 with probability p10, -1 with p01 and 0 otherwise; the effect is
delta = p10 - p01 (the difference of the two arms' event rates). The d_s take -1, 0 and 1
only, not symmetric about a margin, so the sign-flip test does not apply and the test is on
the trinomial itself. Against a margin m, H0: delta <= m is composite (p01 is a nuisance),
and the exact unconditional test takes the largest tail probability over it, on the
boundary delta = m:

    p = sup_{p01} P(Z(b*, c*) >= Z(b, c) | p10 = p01 + m, p01)

b and c are the counts of +1 and -1 seeds and Z is Tango's (1998) score statistic,

    Z(b, c) = (b - c - n m) / sqrt(n (2 q + m (1 - m)))

with q the restricted maximum-likelihood p01 under delta = m (the root of
2n q^2 + (-(b + c) + (2n - b + c) m) q - c m (1 - m) = 0). Its interval for delta is the
same test inverted. McNemar's exact conditional test (scipy.stats.binomtest on the
discordant seeds) is its margin-0 relative, reported beside it.

The rate of one arm, k events in n trials: the exact (Clopper-Pearson) interval, by scipy.

scipy is imported by the functions that use it: every claims job imports this module, through
the claims' protocol, and most never test anything (scipy.stats takes about half a second).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tcrformer.stats.sides import Sides, checked_alternative, finite_values, support_and_refute

SCORE_TIE = 1e-9  # relative tolerance of Tango's statistic
NUISANCE_GRID = 401  # points of the nuisance p01 searched, then ZOOMS finer grids around
GUARD = 0.02  # the grid of margins on which the paired-binary interval is checked
ZOOMS, ZOOM_GRID = 3, 65  # the largest: the supremum located to 1/400 (1/32)^3 of the range


def _restricted_p01(b: np.ndarray, c: np.ndarray, n: int, m: float) -> np.ndarray:
    """The maximum-likelihood p01 under p10 - p01 = m, for counts b (+1) and c (-1)."""
    a = 2.0 * n
    bb = -(b + c) + (2.0 * n - b + c) * m
    cc = -c * m * (1.0 - m)
    root = (-bb + np.sqrt(np.maximum(bb * bb - 4 * a * cc, 0.0))) / (2 * a)
    return np.clip(root, max(0.0, -m), (1.0 - m) / 2)


def tango_z(b: np.ndarray, c: np.ndarray, n: int, m: float) -> np.ndarray:
    """Tango's score statistic of H0: p10 - p01 = m (large when the +1 seeds dominate)."""
    b, c = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    q = _restricted_p01(b, c, n, m)
    numerator = b - c - n * m
    variance = n * (2 * q + m * (1 - m))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(variance)
    edge = np.where(numerator > 0, np.inf, np.where(numerator < 0, -np.inf, 0.0))
    return np.where(variance > 0, z, edge)


@functools.lru_cache(maxsize=64)
def _outcomes(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (b, c) with b + c <= n, and the log multinomial coefficient of each."""
    from scipy import special

    b, c = np.array([(i, j) for i in range(n + 1) for j in range(n + 1 - i)]).T
    log_coef = special.gammaln(n + 1) - special.gammaln(b + 1) - special.gammaln(c + 1)
    return b, c, log_coef - special.gammaln(n - b - c + 1)


def _check_counts(plus: int, minus: int, n: int, margin: float) -> None:
    if not 0 <= plus + minus <= n or min(plus, minus) < 0:
        raise ValueError(f"paired outcomes: plus {plus} and minus {minus} of {n} seeds")
    if not -1 < margin < 1:
        raise ValueError(f"paired outcomes: margin {margin} outside (-1, 1)")


def paired_binary_p(plus: int, minus: int, n: int, margin: float, alternative: str) -> float:
    """The exact unconditional p-value of n paired binary outcomes with `plus` seeds where
    only the arm had the event and `minus` where only the reference had it:
    `greater` tests H0: p10 - p01 <= margin, `less` H0: p10 - p01 >= margin."""
    from scipy import special

    _check_counts(plus, minus, n, margin)
    if checked_alternative(alternative) == "less":  # mirror: the reference's events, the arm's
        return paired_binary_p(minus, plus, n, -margin, "greater")
    b, c, log_coef = _outcomes(n)
    z = tango_z(b, c, n, margin)
    observed = float(tango_z(np.array([plus]), np.array([minus]), n, margin)[0])
    slack = SCORE_TIE * max(1.0, abs(observed)) if np.isfinite(observed) else 0.0
    extreme = z >= observed - slack
    b, c, log_coef = b[extreme], c[extreme], log_coef[extreme]

    def tail(p01: np.ndarray) -> np.ndarray:  # P(as extreme) on the boundary, at each p01
        p01 = np.asarray(p01, dtype=float)[:, None]
        p00 = np.maximum(1.0 - 2 * p01 - margin, 0.0)
        log_p = log_coef + special.xlogy(b, p01 + margin) + special.xlogy(c, p01)
        return np.exp(log_p + special.xlogy(n - b - c, p00)).sum(axis=1)

    grid = np.linspace(max(0.0, -margin), (1.0 - margin) / 2, NUISANCE_GRID)
    values = tail(grid)
    largest = float(values.max())
    for _ in range(ZOOMS):  # a finer grid between the neighbours of the largest so far
        best = int(values.argmax())
        grid = np.linspace(grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)], ZOOM_GRID)
        values = tail(grid)
        largest = max(largest, float(values.max()))
    return min(1.0, largest)


def paired_binary_interval(
    plus: int, minus: int, n: int, confidence: float = 0.95, resolution: float = 1e-6
) -> tuple[float, float]:
    """The interval for delta = p10 - p01 that inverts the exact unconditional test: the
    hull of the margins neither one-sided test rejects at (1 - confidence) / 2, its ends
    found by bisection to `resolution` and checked against a grid of margins GUARD apart
    (an end moves out to any margin on the grid that is kept: the test's p-value need not
    be monotone in the margin)."""
    _check_counts(plus, minus, n, 0.0)
    gamma, estimate = (1 - confidence) / 2, (plus - minus) / n
    edge = 1 - 1e-9

    def rejects_below(m: float) -> bool:  # H0: delta <= m rejected: the interval lies above m
        return paired_binary_p(plus, minus, n, m, "greater") <= gamma

    def rejects_above(m: float) -> bool:
        return paired_binary_p(plus, minus, n, m, "less") <= gamma

    def end(rejects, outside: float) -> float:
        inside = min(max(estimate, -edge), edge)
        if not rejects(outside):  # kept up to the edge of the parameter space
            return float(np.sign(outside))
        while abs(outside - inside) > resolution:
            middle = (inside + outside) / 2
            inside, outside = (inside, middle) if rejects(middle) else (middle, outside)
        return outside  # the rejected side: the interval errs wide, by < resolution

    low, high = end(rejects_below, -edge), end(rejects_above, edge)
    grid = np.arange(-1 + GUARD, 1, GUARD)
    kept_below = [m for m in grid[grid < low] if not (rejects_below(m) or rejects_above(m))]
    kept_above = [m for m in grid[grid > high] if not (rejects_above(m) or rejects_below(m))]
    return float(min([low, *kept_below])), float(max([high, *kept_above]))


def mcnemar_exact_p(plus: int, minus: int, alternative: str = "greater") -> float:
    """McNemar's exact (conditional) one-sided p-value of H0: p10 <= p01 (`greater`) or
    p10 >= p01 (`less`): the discordant seeds' split, binomial at 1/2 (1 when none is
    discordant)."""
    from scipy import stats

    if plus + minus == 0:
        return 1.0
    found = stats.binomtest(plus, plus + minus, 0.5, alternative=checked_alternative(alternative))
    return float(found.pvalue)


@dataclass(frozen=True)
class BinaryTest(Sides):
    """A paired-binary test: the exact unconditional p-values (primary), the interval
    for p10 - p01 by inversion, and McNemar's exact p at margin 0 in the direction
    (secondary; NaN for equivalence)."""

    name: str  # what the values are of, for messages
    direction: str
    margin: float
    plus: int  # seeds +1: the event in the arm only
    minus: int  # seeds -1: in the reference only
    seeds: int
    estimate: float  # (plus - minus) / seeds
    low: float
    high: float
    confidence: float
    mcnemar_p: float
    method: str = "exact_unconditional"


def paired_binary_counts(d: Sequence[float], name: str = "d_s") -> tuple[int, int, int]:
    """(plus, minus, n): the seeds whose outcome d_s is +1 and -1, and all of them."""
    values = finite_values(d, name)
    if not np.isin(values, (-1.0, 0.0, 1.0)).all():
        raise ValueError(f"{name}: paired binary outcomes must be -1, 0 or 1: {values.tolist()}")
    return int((values == 1).sum()), int((values == -1).sum()), values.size


def paired_binary_test(
    d: Sequence[float],
    margin: float,
    direction: str,
    confidence: float = 0.95,
    name: str = "d_s",
) -> BinaryTest:
    """The exact unconditional test of `name`'s per-seed outcomes d_s in {-1, 0, 1}
    against `margin` in `direction`, its interval and McNemar's test beside it."""
    plus, minus, n = paired_binary_counts(d, name)
    support, refute = support_and_refute(
        lambda m, side: paired_binary_p(plus, minus, n, m, side), margin, direction
    )
    low, high = paired_binary_interval(plus, minus, n, confidence)
    mcnemar = math.nan if direction == "equivalent" else mcnemar_exact_p(plus, minus, direction)
    return BinaryTest(support, refute, name, direction, margin, plus, minus, n,
                      (plus - minus) / n, low, high, confidence, mcnemar)  # fmt: skip


# The rate of one arm ------------------------------------------------------------------------------


def exact_binomial_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a rate, k events in n trials."""
    from scipy import stats

    found = stats.binomtest(k, n).proportion_ci(confidence, method="exact")
    return float(found.low), float(found.high)
