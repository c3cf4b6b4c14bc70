"""Exact tests of the claims, version 4 (docs/claims_v4_design.md): each test defined once.

A seed-based experiment reduces to one paired value per seed, d_s. Two kinds of d_s.

Continuous d_s (a loss ratio, a fraction of 1,000 strings): Fisher's sign-flip test of the
d_s against the margin m. With x_s = d_s - m and T = sum_s x_s, each of the 2^n sign vectors
e gives T* = sum_s e_s x_s; flipping the seeds of a set F gives T* = T - 2 sum_F x_s, so

    p_greater(m) = P*(T* >= T) = P_F( sum_F d_s <= m |F| )     (small when the d_s lie above m)
    p_less(m)    = P*(T* <= T) = P_F( sum_F d_s >= m |F| )

with F a uniformly random subset of the seeds. The null distribution of (|F|, sum_F d_s)
does not depend on m, so it is built once per claim and both p-values, at any margin, and
the interval (the margins neither one-sided test rejects) are read from it. Three ways to
build it, chosen from the data (`SignFlipNull.method` says which):

    enumeration   n <= 20: all 2^n subsets
    lattice       the d_s are counts out of N (a fraction of N strings, net wins out of N):
                  the exact count of subsets of each size with each integer sum, by dynamic
                  programming, for any n. Exact for any margin: m N need not be an integer,
                  because the count of flipped seeds is kept beside the sum
    monte_carlo   otherwise: B = 10^6 random subsets from a registered generator seed,
                  p = (1 + k) / (1 + B), a valid p-value for any B

The lattice N is found from the data (`lattice_of`: the least common denominator, up to
10,000, of the d_s as fractions); sums equal within 1e-12 of their scale (1e-6 of a
count on a lattice) count as ties, that is, as extreme. The interval is bisected to 2^-60
of its search span, each step one look-up in the null (microseconds).

What the test estimates: the sign-flip test is exact when d_s - m is symmetric about 0
under the null, so what it tests is the centre of symmetry of the d_s (their median, and
their mean, when they are symmetric). Skewed d_s whose mean sits at the margin can reject
more often than the level (the outside review, item 7), so each continuous test reports a
one-sample t-test against the same margin beside it (valid for the mean under normality),
and `disagree` marks where the two differ on rejection. A value that is not finite raises.

A claim's direction (greater, less or equivalent, the last as two one-sided tests) turns
the one-sided p-values into p_support and p_refute as v3 did (`support_and_refute`); the
smaller enters Holm.

Binary d_s (a run diverged or not, in each of two paired arms): d_s takes -1, 0 and 1 only,
and the symmetry fails, so the test is on the trinomial itself. Per seed, arm minus
reference is +1 with probability p10, -1 with p01 and 0 otherwise; the effect is
delta = p10 - p01 (the difference of the two arms' event rates). Against a margin m,
H0: delta <= m is composite (p01 is a nuisance), and the exact unconditional test takes
the largest tail probability over it, on the boundary delta = m:

    p = sup_{p01} P(Z(b*, c*) >= Z(b, c) | p10 = p01 + m, p01)

b and c are the counts of +1 and -1 seeds and Z is Tango's (1998) score statistic,

    Z(b, c) = (b - c - n m) / sqrt(n (2 q + m (1 - m)))

with q the restricted maximum-likelihood p01 under delta = m (the root of
2n q^2 + (-(b + c) + (2n - b + c) m) q - c m (1 - m) = 0). Its interval for delta is the
same test inverted. McNemar's exact conditional test (scipy.stats.binomtest on the
discordant seeds) is its margin-0 relative, reported beside it.

The exact (Clopper-Pearson) binomial interval is defined here, once; Holm's step-down over
the claims, once, in protocol.py, which turns these tests into verdicts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special, stats

from tcrformer.chapters.claims.kinds import REFUTED, SUPPORTED

ENUMERATE_UP_TO = 20  # seeds up to which all 2^n sign vectors are listed
RESAMPLES = 10**6  # B, the Monte Carlo test's random sign vectors
GENERATOR_SEED = 4500  # the Monte Carlo test's registered generator seed
CHUNK = 2**16  # sign vectors drawn at once
MAX_DENOMINATOR = 10_000  # the largest lattice N looked for
ON_LATTICE = 1e-6  # |d_s N - round(d_s N)| up to which d_s is a count out of N
MAX_CELLS = 2 * 10**7  # the largest (seeds + 1) x (integer sums) table the lattice builds
TIE = 1e-12  # relative tolerance of sums: equal statistics count as "as extreme"
BISECTIONS = 60  # the interval's bisection steps: resolution 2^-60 of the search span
ALTERNATIVES = ("greater", "less")


def _finite(d: Sequence[float], claim: str) -> np.ndarray:
    values = np.asarray(d, dtype=float).ravel()
    bad = ~np.isfinite(values)
    if bad.any():
        where = np.flatnonzero(bad).tolist()
        raise ValueError(f"{claim}: per-seed values not finite at {where}: {values[bad].tolist()}")
    if values.size == 0:
        raise ValueError(f"{claim}: no per-seed values")
    return values


def _alternative(alternative: str) -> str:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative {alternative!r}: greater or less")
    return alternative


# The sign-flip null distribution ----------------------------------------------------------------


@dataclass(frozen=True)
class SignFlipNull:
    """The sign-flip null of one claim's d_s, margin-free: for each count j of flipped seeds,
    the sorted sums of d over the flipped sets (`sums[j]`, in `scale` units of d: integers on
    a lattice) and their cumulative counts (`counts[j]`)."""

    method: str  # "enumeration", "lattice" or "monte_carlo"
    seeds: int
    resamples: int  # sign vectors behind a p-value: 2^n, or B
    sums: tuple[np.ndarray, ...]
    counts: tuple[np.ndarray, ...]
    scale: int = 1  # the lattice N (d_s = count / N); 1 off a lattice
    tolerance: float = 0.0  # ties, in units of the sums
    span: tuple[float, float] = (0.0, 0.0)  # min and max of the d_s

    @property
    def lattice(self) -> int | None:
        return self.scale if self.method == "lattice" else None

    def _tally(self, margin: float, at_most: bool) -> float:
        """Flipped sets with sum_F d <= m |F| (at_most) or >= m |F|, counted."""
        total = 0.0
        for j, (sums, cumulative) in enumerate(zip(self.sums, self.counts, strict=True)):
            if sums.size == 0:
                continue
            edge = margin * self.scale * j
            if at_most:
                index = np.searchsorted(sums, edge + self.tolerance, side="right")
                total += cumulative[index - 1] if index else 0
            else:
                index = np.searchsorted(sums, edge - self.tolerance, side="left")
                total += cumulative[-1] - (cumulative[index - 1] if index else 0)
        return float(total)

    def _p(self, extreme: float) -> float:
        if self.method == "monte_carlo":
            return (1.0 + extreme) / (1.0 + self.resamples)
        return extreme / self.resamples

    def p_greater(self, margin: float) -> float:
        """P*(T* >= T) against `margin`: small when the d_s lie above it."""
        return self._p(self._tally(margin, at_most=True))

    def p_less(self, margin: float) -> float:
        """P*(T* <= T) against `margin`: small when the d_s lie below it."""
        return self._p(self._tally(margin, at_most=False))

    def p_value(self, margin: float, alternative: str) -> float:
        if _alternative(alternative) == "greater":
            return self.p_greater(margin)
        return self.p_less(margin)

    def monte_carlo_error(self, p: float) -> float:
        """The standard error of a p-value of this null: 0 when exact."""
        if self.method != "monte_carlo":
            return 0.0
        return math.sqrt(p * (1 - p) / self.resamples)

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The margins neither one-sided test rejects at level (1 - confidence) / 2, by
        bisection to 2^-60 of the search span; an end is NaN where even the most extreme
        margin cannot be rejected (too few seeds for the level)."""
        gamma = (1 - confidence) / 2
        low_d, high_d = self.span
        reach = max(high_d - low_d, abs(low_d), abs(high_d), 1.0)
        centre = (low_d + high_d) / 2
        low = _boundary(lambda m: self.p_greater(m) <= gamma, centre, low_d - reach)
        high = _boundary(lambda m: self.p_less(m) <= gamma, centre, high_d + reach)
        return low, high


def _boundary(rejects: Callable[[float], bool], inside: float, outside: float) -> float:
    """Where `rejects` turns on between a margin inside the interval and one outside it."""
    if not rejects(outside):
        return math.nan
    if rejects(inside):  # only when the d_s are all equal: the interval is that value
        return inside
    for _ in range(BISECTIONS):
        middle = (inside + outside) / 2
        inside, outside = (inside, middle) if rejects(middle) else (middle, outside)
    return (inside + outside) / 2


def _grouped(sums: np.ndarray, sizes: np.ndarray, seeds: int) -> tuple:
    """Per flipped-set size j: the sorted sums, and how many sets reach each (1, 2, ...)."""
    order = np.lexsort((sums, sizes))
    sums, sizes = sums[order], sizes[order]
    edges = np.searchsorted(sizes, np.arange(seeds + 2))
    rows = [sums[edges[j] : edges[j + 1]] for j in range(seeds + 1)]
    return tuple(rows), tuple(np.arange(1, row.size + 1) for row in rows)


def _tolerance(d: np.ndarray) -> float:
    return TIE * max(1.0, float(np.abs(d).sum()))


def enumeration_null(d: np.ndarray) -> SignFlipNull:
    """All 2^n flipped sets (n <= 24)."""
    if d.size > 24:
        raise ValueError(f"enumeration of 2^{d.size} sign vectors: at most 24 seeds")
    sums, sizes = np.zeros(1), np.zeros(1, dtype=np.int64)
    for value in d:  # each seed doubles the list: not flipped, flipped
        sums, sizes = np.concatenate([sums, sums + value]), np.concatenate([sizes, sizes + 1])
    grouped = _grouped(sums, sizes, d.size)
    return SignFlipNull("enumeration", d.size, 2**d.size, *grouped, tolerance=_tolerance(d),
                        span=(float(d.min()), float(d.max())))  # fmt: skip


def lattice_of(d: np.ndarray) -> int | None:
    """The N for which every d_s is a count out of N (the smallest, up to MAX_DENOMINATOR),
    or None. A continuous d_s within 1e-6 / N of a lattice point would be taken as on it;
    its p-value then moves only through ties closer than that."""
    scale = 1
    for value in d:
        nearest = Fraction(float(value)).limit_denominator(MAX_DENOMINATOR)
        scale = math.lcm(scale, nearest.denominator)
        if scale > MAX_DENOMINATOR:
            return None
    off = np.abs(d * scale - np.round(d * scale)).max()
    return scale if off <= ON_LATTICE else None


def lattice_null(d: np.ndarray, scale: int) -> SignFlipNull:
    """The exact count of flipped sets of each size j with each integer sum of k_s = d_s N,
    by dynamic programming over the seeds: exact for any n (int64 counts up to 62 seeds)."""
    k = np.round(d * scale).astype(np.int64)
    n, low = k.size, int(k[k < 0].sum())
    width = int(np.abs(k).sum()) + 1
    dtype = np.int64 if n <= 62 else np.float64
    table = np.zeros((n + 1, width), dtype=dtype)
    table[0, -low] = 1  # the empty set: size 0, sum 0
    for s, step in enumerate(k):  # a seed is either not flipped or flipped (size + 1, sum + k)
        before = table[: s + 1].copy()
        if step >= 0:
            table[1 : s + 2, step:] += before[:, : width - step]
        else:
            table[1 : s + 2, : width + step] += before[:, -step:]
    support = np.arange(width, dtype=np.int64) + low
    sums, counts = [], []
    for row in table:
        kept = row != 0
        sums.append(support[kept])
        counts.append(np.cumsum(row[kept]))
    return SignFlipNull("lattice", n, 2**n, tuple(sums), tuple(counts), scale=scale,
                        tolerance=ON_LATTICE, span=(float(d.min()), float(d.max())))  # fmt: skip


def monte_carlo_null(d: np.ndarray, resamples: int | None = None, seed: int = GENERATOR_SEED):
    """`resamples` (RESAMPLES) random flipped sets, from generator `seed`, drawn CHUNK at a
    time: the same draws for every claim of n seeds."""
    resamples = RESAMPLES if resamples is None else resamples
    rng = np.random.default_rng(seed)
    sums, sizes = np.empty(resamples), np.empty(resamples, dtype=np.int64)
    for start in range(0, resamples, CHUNK):
        stop = min(start + CHUNK, resamples)
        flipped = rng.integers(0, 2, size=(stop - start, d.size), dtype=np.int8)
        sums[start:stop] = flipped @ d
        sizes[start:stop] = flipped.sum(axis=1)
    grouped = _grouped(sums, sizes, d.size)
    return SignFlipNull("monte_carlo", d.size, resamples, *grouped, tolerance=_tolerance(d),
                        span=(float(d.min()), float(d.max())))  # fmt: skip


def sign_flip_null(d: Sequence[float], claim: str = "d_s", method: str | None = None):
    """The sign-flip null of `claim`'s per-seed values, built the way the data allow:
    enumeration up to 20 seeds, else the lattice when the d_s are counts out of N, else
    Monte Carlo. `method` forces one (the tests compare them)."""
    values = _finite(d, claim)
    scale = lattice_of(values)
    cells = (values.size + 1) * (np.abs(values).sum() * (scale or 0) + 1)
    if method is None:
        if values.size <= ENUMERATE_UP_TO:
            method = "enumeration"
        elif scale is not None and cells <= MAX_CELLS:
            method = "lattice"
        else:
            method = "monte_carlo"
    if method == "enumeration":
        return enumeration_null(values)
    if method == "lattice":
        if scale is None:
            raise ValueError(f"{claim}: the per-seed values are not counts out of any N")
        return lattice_null(values, scale)
    if method == "monte_carlo":
        return monte_carlo_null(values)
    raise ValueError(f"{claim}: method {method!r}: enumeration, lattice or monte_carlo")


def sign_flip_p(d: Sequence[float], margin: float, alternative: str, claim: str = "d_s") -> float:
    """The sign-flip p-value of the seeds' d_s against `margin`: `greater` is small when the
    d_s lie above it, `less` when below."""
    return sign_flip_null(d, claim).p_value(margin, alternative)


def t_test_p(d: Sequence[float], margin: float, alternative: str, claim: str = "d_s") -> float:
    """The one-sample t-test's p-value against `margin`, the secondary beside the sign-flip
    test (valid for a mean under normality, where the sign-flip asks for symmetry); NaN when
    the d_s do not vary."""
    values = _finite(d, claim)
    if values.size < 2 or np.ptp(values) == 0:
        return math.nan
    found = stats.ttest_1samp(values, margin, alternative=_alternative(alternative))
    return float(found.pvalue)


def disagree(primary: float, secondary: float, level: float) -> bool:
    """Whether two p-values of one claim differ on rejection at `level` (a NaN secondary
    never disagrees)."""
    if math.isnan(secondary):
        return False
    return (primary <= level) != (secondary <= level)


def support_and_refute(p_of: Callable[[float, str], float], margin: float, direction: str):
    """(p_support, p_refute) of a claim against `margin` in its `direction`, from a one-sided
    test p_of(margin, alternative), as v3's protocol:

        greater     support p(m, greater)                          refute p(m, less)
        less        support p(m, less)                             refute p(m, greater)
        equivalent  support max(p(-m, greater), p(m, less))        (both sides, TOST)
                    refute  min(p(-m, less), p(m, greater))
    """
    if direction == "equivalent":
        support = np.maximum(p_of(-margin, "greater"), p_of(margin, "less"))
        refute = np.minimum(p_of(-margin, "less"), p_of(margin, "greater"))
        return float(support), float(refute)
    if direction not in ALTERNATIVES:
        raise ValueError(f"direction {direction!r}: greater, less or equivalent")
    other = "less" if direction == "greater" else "greater"
    return p_of(margin, direction), p_of(margin, other)


@dataclass(frozen=True)
class Sides:
    """The two one-sided p-values of a claim against its margin."""

    p_support: float
    p_refute: float

    @property
    def p_value(self) -> float:
        """The smaller one-sided p-value: what enters Holm."""
        return min(self.p_support, self.p_refute)

    @property
    def side(self) -> str:
        return SUPPORTED if self.p_support <= self.p_refute else REFUTED


@dataclass(frozen=True)
class ContinuousTest(Sides):
    """A continuous claim's test against its margin: the sign-flip p-values (primary), how
    their null was built, the interval by inversion, and the t-test's (secondary)."""

    claim: str
    direction: str
    margin: float
    estimate: float  # mean of the d_s
    method: str  # enumeration, lattice or monte_carlo
    resamples: int
    monte_carlo_error: float  # of p_value; 0 when exact
    low: float
    high: float
    confidence: float
    t_support: float
    t_refute: float
    seeds: int
    lattice: int | None = None

    def disagree(self, level: float) -> bool:
        """Whether the t-test differs from the sign-flip test on rejection at `level`, on
        either side."""
        return disagree(self.p_support, self.t_support, level) or disagree(
            self.p_refute, self.t_refute, level
        )


def continuous_test(
    d: Sequence[float],
    margin: float,
    direction: str,
    confidence: float = 0.95,
    claim: str = "d_s",
) -> ContinuousTest:
    """The sign-flip test of `claim`'s d_s against `margin` in `direction` (greater, less or
    equivalent), with its interval at `confidence` and the t-test beside it."""
    values = _finite(d, claim)
    null = sign_flip_null(values, claim)
    support, refute = support_and_refute(null.p_value, margin, direction)
    t_support, t_refute = support_and_refute(
        lambda m, side: t_test_p(values, m, side, claim), margin, direction
    )
    low, high = null.interval(confidence)
    return ContinuousTest(support, refute, claim, direction, margin, float(values.mean()),
                          null.method, null.resamples,
                          null.monte_carlo_error(min(support, refute)), low, high, confidence,
                          t_support, t_refute, values.size, null.lattice)  # fmt: skip


# Paired binary outcomes -------------------------------------------------------------------------

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
    _check_counts(plus, minus, n, margin)
    if _alternative(alternative) == "less":  # mirror: the reference's events against the arm's
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
    if plus + minus == 0:
        return 1.0
    found = stats.binomtest(plus, plus + minus, 0.5, alternative=_alternative(alternative))
    return float(found.pvalue)


@dataclass(frozen=True)
class BinaryTest(Sides):
    """A paired-binary claim's test: the exact unconditional p-values (primary), the interval
    for p10 - p01 by inversion, and McNemar's exact p at margin 0 in the claim's direction
    (secondary; NaN for equivalence)."""

    claim: str
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


def paired_binary_counts(d: Sequence[float], claim: str = "d_s") -> tuple[int, int, int]:
    """(plus, minus, n): the seeds whose outcome d_s is +1 and -1, and all of them."""
    values = _finite(d, claim)
    if not np.isin(values, (-1.0, 0.0, 1.0)).all():
        raise ValueError(f"{claim}: paired binary outcomes must be -1, 0 or 1: {values.tolist()}")
    return int((values == 1).sum()), int((values == -1).sum()), values.size


def paired_binary_test(
    d: Sequence[float],
    margin: float,
    direction: str,
    confidence: float = 0.95,
    claim: str = "d_s",
) -> BinaryTest:
    """The exact unconditional test of `claim`'s per-seed outcomes d_s in {-1, 0, 1}
    against `margin` in `direction`, its interval and McNemar's test beside it."""
    plus, minus, n = paired_binary_counts(d, claim)
    support, refute = support_and_refute(
        lambda m, side: paired_binary_p(plus, minus, n, m, side), margin, direction
    )
    low, high = paired_binary_interval(plus, minus, n, confidence)
    mcnemar = math.nan if direction == "equivalent" else mcnemar_exact_p(plus, minus, direction)
    return BinaryTest(support, refute, claim, direction, margin, plus, minus, n,
                      (plus - minus) / n, low, high, confidence, mcnemar)  # fmt: skip


# Intervals of a rate ----------------------------------------------------------------------------


def exact_binomial_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a rate, k events in n trials."""
    found = stats.binomtest(k, n).proportion_ci(confidence, method="exact")
    return float(found.low), float(found.high)


__all__ = [
    "Sides",
    "BinaryTest",
    "ContinuousTest",
    "SignFlipNull",
    "continuous_test",
    "disagree",
    "exact_binomial_interval",
    "mcnemar_exact_p",
    "paired_binary_counts",
    "paired_binary_interval",
    "paired_binary_p",
    "paired_binary_test",
    "sign_flip_null",
    "sign_flip_p",
    "support_and_refute",
    "t_test_p",
    "tango_z",
]
