"""Fisher's sign-flip test of paired values d_s (one per seed) against a margin m.

With x_s = d_s - m and T = sum_s x_s, each of the 2^n sign vectors e gives
T* = sum_s e_s x_s; flipping the seeds of a set F gives T* = T - 2 sum_F x_s, so

    p_greater(m) = P*(T* >= T) = P_F( sum_F d_s <= m |F| )     (small when the d_s lie above m)
    p_less(m)    = P*(T* <= T) = P_F( sum_F d_s >= m |F| )

with F a uniformly random subset of the seeds. The null distribution of (|F|, sum_F d_s)
does not depend on m, so it is built once and both p-values, at any margin, and the
interval (the margins neither one-sided test rejects) are read from it. Three ways to
build it, chosen from the data (`SignFlipNull.method` says which):

    enumeration   n <= 20: all 2^n subsets
    lattice       the d_s are counts out of N (a fraction of N strings, net wins out of N):
                  the exact count of subsets of each size with each integer sum, by dynamic
                  programming, for any n. Exact for any margin: m N need not be an integer,
                  because the count of flipped seeds is kept beside the sum
    monte_carlo   otherwise: B = 10^6 random subsets from a fixed generator seed,
                  p = (1 + k) / (1 + B), a valid p-value for any B

The lattice N is found from the data (`lattice_of`: the least common denominator, up to
10,000, of the d_s as fractions); sums equal within 1e-12 of their scale (1e-6 of a
count on a lattice) count as ties, that is, as extreme. The interval is bisected to 2^-60
of its search span, each step one look-up in the null (microseconds).

Where the caller knows the d_s are counts out of N (`lattice`: held-out strings right, out
of those evaluated), the null is exact at any n and never Monte Carlo: the d_s must lie on
that lattice, and one off it raises (a fraction that lost its count on the way, as a
float32 fraction does: 0.917 is 0.91699999571 there, 4e-6 of a string off its lattice point
at N = 1,000, beyond the 1e-6 tolerance). The null says why it was built as it was
(`SignFlipNull.reason`).

What the test estimates: the sign-flip test is exact when d_s - m is symmetric about 0
under the null, so what it tests is the centre of symmetry of the d_s (their median, and
their mean, when they are symmetric). Skewed d_s whose mean sits at the margin can reject
more often than the level, so each test reports a one-sample t-test against the same
margin beside it (valid for the mean under normality), and `disagree` marks where the two
differ on rejection. A value that is not finite raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from tcrformer.stats.sides import (
    Sides,
    checked_alternative,
    disagree,
    finite_values,
    support_and_refute,
)

ENUMERATE_UP_TO = 20  # seeds up to which all 2^n sign vectors are listed
RESAMPLES = 10**6  # B, the Monte Carlo test's random sign vectors
GENERATOR_SEED = 4500  # the Monte Carlo test's registered generator seed
CHUNK = 2**16  # sign vectors drawn at once
MAX_DENOMINATOR = 10_000  # the largest lattice N looked for
ON_LATTICE = 1e-6  # |d_s N - round(d_s N)| up to which d_s is a count out of N
MAX_CELLS = 2 * 10**7  # the largest (seeds + 1) x (integer sums) table the lattice builds
TIE = 1e-12  # relative tolerance of sums: equal statistics count as "as extreme"
BISECTIONS = 60  # the interval's bisection steps: resolution 2^-60 of the search span


# The sign-flip null distribution ----------------------------------------------------------------


@dataclass(frozen=True)
class SignFlipNull:
    """The sign-flip null of one set of d_s, margin-free: for each count j of flipped seeds,
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
    reason: str = ""  # why this method: what the data allowed (sign_flip_null)

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
        if checked_alternative(alternative) == "greater":
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
    time: the same draws for every set of n seeds."""
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


def _cells(values: np.ndarray, scale: int | None) -> float:
    """The size of the lattice's table: (seeds + 1) x (integer sums)."""
    return (values.size + 1) * (np.abs(values).sum() * (scale or 0) + 1)


def on_lattice(d: Sequence[float], lattice: int, name: str = "d_s") -> int:
    """The smallest N' dividing `lattice` on which every d_s is a count; a value off the
    lattice of N raises, naming it (a count lost on the way: a float32 fraction)."""
    values = finite_values(d, name)
    if not isinstance(lattice, int | np.integer) or isinstance(lattice, bool) or lattice < 1:
        raise ValueError(f"{name}: lattice {lattice!r}: a count of strings, at least 1")
    off = np.abs(values * lattice - np.round(values * lattice))
    if off.max() > ON_LATTICE:
        worst = int(off.argmax())
        raise ValueError(
            f"{name}: per-seed value {values[worst]!r} is not a count out of {lattice} (off "
            f"by {off[worst] / lattice:.2g}): a fraction that lost its count, as a float32 "
            "fraction does; the exact test needs the counts"
        )
    counts = np.round(values * lattice).astype(np.int64)
    return lattice // math.gcd(lattice, *(int(abs(k)) for k in counts))


def sign_flip_null(d: Sequence[float], name: str = "d_s", method: str | None = None,
                   lattice: int | None = None) -> SignFlipNull:  # fmt: skip
    """The sign-flip null of `name`'s per-seed values, built the way the data allow:
    enumeration up to 20 seeds, else the lattice when the d_s are counts out of N, else
    Monte Carlo. `lattice`: the N the d_s are known to be counts out of; then they must lie
    on it (else a ValueError) and the null is exact (enumeration or the lattice) or the
    call raises: never Monte Carlo. `method` forces one (the tests compare them)."""
    values = finite_values(d, name)
    if lattice is not None:
        scale = on_lattice(values, lattice, name)
        if method not in (None, "enumeration", "lattice"):
            raise ValueError(f"{name}: counts out of {lattice} take an exact null, not {method}")
        if values.size > ENUMERATE_UP_TO and _cells(values, scale) > MAX_CELLS:
            raise ValueError(
                f"{name}: the exact lattice table of {values.size} seeds (counts out of "
                f"{scale}) has {_cells(values, scale):.3g} cells, over {MAX_CELLS:.3g}"
            )
    else:
        scale = lattice_of(values)
    if method is None:
        if values.size <= ENUMERATE_UP_TO:
            method = "enumeration"
        elif scale is not None and _cells(values, scale) <= MAX_CELLS:
            method = "lattice"
        else:
            method = "monte_carlo"
    if method == "enumeration":
        return replace(enumeration_null(values), reason=f"{values.size} seeds: all 2^n")
    if method == "lattice":
        if scale is None:
            raise ValueError(f"{name}: the per-seed values are not counts out of any N")
        return replace(lattice_null(values, scale), reason=f"counts out of {scale}")
    if method == "monte_carlo":
        why = (
            f"not counts out of any N up to {MAX_DENOMINATOR}"
            if scale is None
            else f"the lattice table ({_cells(values, scale):.3g} cells) over {MAX_CELLS:.3g}"
        )
        return replace(monte_carlo_null(values), reason=why)
    raise ValueError(f"{name}: method {method!r}: enumeration, lattice or monte_carlo")


def sign_flip_p(d: Sequence[float], margin: float, alternative: str, name: str = "d_s") -> float:
    """The sign-flip p-value of the seeds' d_s against `margin`: `greater` is small when the
    d_s lie above it, `less` when below."""
    return sign_flip_null(d, name).p_value(margin, alternative)


def t_test_p(d: Sequence[float], margin: float, alternative: str, name: str = "d_s") -> float:
    """The one-sample t-test's p-value against `margin`, the secondary beside the sign-flip
    test (valid for a mean under normality, where the sign-flip asks for symmetry); NaN when
    the d_s do not vary."""
    from scipy import stats  # here: a job that imports this module seldom calls it

    values = finite_values(d, name)
    if values.size < 2 or np.ptp(values) == 0:
        return math.nan
    found = stats.ttest_1samp(values, margin, alternative=checked_alternative(alternative))
    return float(found.pvalue)


@dataclass(frozen=True)
class ContinuousTest(Sides):
    """A continuous test against a margin: the sign-flip p-values (primary), how
    their null was built, the interval by inversion, and the t-test's (secondary)."""

    name: str  # what the values are of, for messages
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
    reason: str = ""  # why the null was built as it was (SignFlipNull.reason)

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
    name: str = "d_s",
    lattice: int | None = None,
) -> ContinuousTest:
    """The sign-flip test of `name`'s d_s against `margin` in `direction` (greater, less or
    equivalent), with its interval at `confidence` and the t-test beside it; `lattice`: the
    N the d_s are counts out of, when known (sign_flip_null: then exact, or it raises)."""
    values = finite_values(d, name)
    null = sign_flip_null(values, name, lattice=lattice)
    support, refute = support_and_refute(null.p_value, margin, direction)
    t_support, t_refute = support_and_refute(
        lambda m, side: t_test_p(values, m, side, name), margin, direction
    )
    low, high = null.interval(confidence)
    return ContinuousTest(support, refute, name, direction, margin, float(values.mean()),
                          null.method, null.resamples,
                          null.monte_carlo_error(min(support, refute)), low, high, confidence,
                          t_support, t_refute, values.size, null.lattice,
                          null.reason)  # fmt: skip
