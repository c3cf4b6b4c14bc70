"""A key's scale and its fit: the Box-Cox scale of a loss window's excess over the floor,
lambda by the ordinary (untruncated) Box-Cox normal likelihood, and the logit scale of the
anti-diagonal. Vectorised over fitting ensembles: the calibrations and the bootstrap refit
thousands of them at once.

Units. A window's data are t = log x (x = mean - floor > 0); the anti-diagonal's t = logit(a).
Bounds are returned in t. The Box-Cox scale is taken of x / g (g the ensemble's geometric
mean): the bounds are equivariant under scaling x, and the relative scale keeps x^lam exact
in floating point where x^lam itself would underflow the spread (loss_late's x is about 0.05).

The fit (refit_relative). lam-hat maximises the Box-Cox normal profile likelihood, Jacobian
included, sought as lam sd(log x) on one fixed grid (RELATIVE_GRID) and refined between grid
points: each ensemble's log x is divided by its SD, fitted, and mapped back. That keeps the
fit exactly equivariant under x -> A x^B, so the law of the band depends on the shape c of
the generating model alone (shape.py).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

SMALL = 1e-6  # |lam| below this is the log scale
RELATIVE_GRID = np.linspace(-4.0, 4.0, 401)  # lam sd(log x) is sought here (step 0.02)
PROFILE_LEVEL = 0.95  # lam's profile-likelihood interval
H_NORMAL = -0.5 - 0.5 * math.log(2 * math.pi)  # the normal's maximal mean log-likelihood


# The Box-Cox scale on log x ----------------------------------------------------------------


def box_cox_log(t: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """BoxCox(exp(t); lam) = (exp(lam t) - 1) / lam (t itself for |lam| < SMALL), broadcast."""
    t, lam = np.asarray(t, float), np.asarray(lam, float)
    if lam.ndim == 0:
        return t if abs(lam) < SMALL else np.expm1(lam * t) / lam
    log = np.abs(lam) < SMALL
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(log, t, np.expm1(lam * t) / np.where(log, 1.0, lam))


def box_cox_inverse_log(y: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """log x from y = BoxCox(x; lam): log1p(lam y) / lam. Beyond the scale's reach (lam y <= -1)
    -inf (x = 0, the floor) for lam > 0 and +inf for lam < 0, whose scale is bounded above."""
    y, lam = np.asarray(y, float), np.asarray(lam, float)
    log = np.abs(lam) < SMALL
    safe = np.where(log, 1.0, lam)
    base = 1 + lam * y
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.log(np.where(base > 0, base, 1.0)) / safe
        beyond = np.where(lam > 0, -np.inf, np.inf)
        return np.where(log, y, np.where(base > 0, inside, beyond))


def logit(a) -> np.ndarray:
    a = np.asarray(a, float)
    return np.log(a / (1 - a))


# lam by maximum likelihood -------------------------------------------------------------------


def centred(t: np.ndarray) -> np.ndarray:
    """Rows of log x less their means: log of x / its geometric mean. (E, n) -> (E, n)."""
    return t - t.mean(axis=-1, keepdims=True)


def profile_grid(u: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The Box-Cox normal's profile log-likelihood (over mu, sigma; Jacobian included, up to a
    constant) at every lam of an evenly spaced grid. u: (E, n) centred log x; returns (G, E).

    On x / g the Jacobian (lam - 1) sum(log x / g) vanishes, so the profile is
    n (H_NORMAL - log S), S the ML SD of y = BoxCox(x / g; lam) = sd((x / g)^lam) / |lam|.
    w = exp(lam u) is carried from one grid point to the next by one product (exact again
    every 32 points): the exponential is the cost of the whole fit."""
    n, step = u.shape[-1], grid[1] - grid[0]
    ratio = np.exp(step * u)
    profile, w = np.empty((len(grid), len(u))), np.exp(grid[0] * u)
    for j, lam in enumerate(grid):
        if j % 32 == 0:
            w = np.exp(lam * u)
        else:
            np.multiply(w, ratio, out=w)
        if abs(lam) < SMALL:
            profile[j] = n * (H_NORMAL - np.log(u.std(axis=-1)))
            continue
        mean_w = w.mean(axis=-1)
        var_w = np.einsum("ij,ij->i", w, w) / n - mean_w**2
        profile[j] = n * (H_NORMAL - np.log(np.sqrt(var_w) / abs(lam)))
    return profile


def fit_lambda(u: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lam-hat per row: the best point of the grid, refined by the parabola through it and its
    neighbours (within half a step; an edge stays). u: (E, n) centred log x. Returns lam-hat
    (E,) and the profile on the grid (G, E)."""
    profile = profile_grid(u, grid)
    best = np.argmax(profile, axis=0)
    inner = np.clip(best, 1, len(grid) - 2)
    rows = np.arange(profile.shape[1])
    left, mid, right = (profile[inner + i, rows] for i in (-1, 0, 1))
    curve = left - 2 * mid + right
    with np.errstate(divide="ignore", invalid="ignore"):
        offset = np.clip(np.where(curve < 0, 0.5 * (left - right) / curve, 0.0), -0.5, 0.5)
    edge = (best == 0) | (best == len(grid) - 1)
    return np.where(edge, grid[best], grid[inner] + offset * (grid[1] - grid[0])), profile


def profile_interval(
    profile: np.ndarray, grid: np.ndarray, level: float = PROFILE_LEVEL
) -> tuple[float, float]:
    """lam's profile-likelihood interval from one ensemble's profile on the grid (G,): where
    2 (max - profile) crosses the chi-square(1) quantile, interpolated linearly between grid
    points; an end that reaches the grid's edge is -inf or +inf (not identified there)."""
    drop = 2 * (profile.max() - profile) - stats.chi2.ppf(level, 1)
    inside = np.flatnonzero(drop <= 0)
    first, last = inside[0], inside[-1]

    def cross(i: int, j: int) -> float:  # drop[i] > 0 >= drop[j]
        return float(grid[i] + (grid[j] - grid[i]) * drop[i] / (drop[i] - drop[j]))

    low = -math.inf if first == 0 else cross(first - 1, first)
    high = math.inf if last == len(grid) - 1 else cross(last + 1, last)
    return low, high


# The fit -------------------------------------------------------------------------------------


class ScaleFit(NamedTuple):
    """Per fitting ensemble (each field (E,)): its mean t (log of its reference g), lam (None:
    the logit's own scale), and the mean m and SD s (ddof 1) on the scale of x / g; n its
    seeds."""

    shift: np.ndarray
    lam: np.ndarray | None
    m: np.ndarray
    s: np.ndarray
    n: int

    def bound(self, k, side: str) -> np.ndarray:
        """m -+ k s sqrt(1 + 1/n) on the scale ('low': minus), mapped back to t: -inf at the
        floor, +inf above the reach of a lam < 0."""
        sign = -1.0 if side == "low" else 1.0
        y = self.m + sign * np.asarray(k) * self.s * math.sqrt(1 + 1 / self.n)
        return self.shift + (y if self.lam is None else box_cox_inverse_log(y, self.lam))

    def bounds(self, k_low: float, k_high: float) -> tuple[np.ndarray, np.ndarray]:
        return self.bound(k_low, "low"), self.bound(k_high, "high")


def scale_moments(u: np.ndarray, lam) -> tuple[np.ndarray, np.ndarray]:
    """Mean and SD (ddof 1) per row on the key's scale: BoxCox(exp(u); lam), or u itself for
    lam None. u: (E, n); lam: () or (E,); returns (E,), (E,)."""
    y = u if lam is None else box_cox_log(u, np.asarray(lam, float)[..., None])
    return y.mean(axis=-1), y.std(axis=-1, ddof=1)


def fixed_fit(t: np.ndarray, lam: float | None) -> ScaleFit:
    """The scale at a fixed lam (None: the anti-diagonal's logit, no lam). t: (E, n)."""
    u, shift = centred(t), t.mean(axis=-1)
    lams = None if lam is None else np.full(len(t), lam)
    return ScaleFit(shift, lams, *scale_moments(u, lam), t.shape[-1])


def refit(t: np.ndarray, grid: np.ndarray) -> ScaleFit:
    """The scale at lam-hat, lam sought on `grid` itself. t: (E, n) log x."""
    u, shift = centred(t), t.mean(axis=-1)
    lam = fit_lambda(u, grid)[0]
    return ScaleFit(shift, lam, *scale_moments(u, lam), t.shape[-1])


def refit_relative(t: np.ndarray, grid: np.ndarray = RELATIVE_GRID) -> ScaleFit:
    """The method's fit: lam-hat sd(log x) sought on the fixed relative grid (each ensemble's
    log x over its SD fitted, mapped back: lam / sd, the scale's m and s times sd).
    t: (E, n) log x."""
    sd = t.std(axis=-1, ddof=1)
    fit = refit(t / sd[:, None], grid)
    return ScaleFit(fit.shift * sd, fit.lam / sd, fit.m * sd, fit.s * sd, fit.n)


def in_chunks(t: np.ndarray, fit=refit_relative, chunk: int = 16_000) -> ScaleFit:
    """A fit of many ensembles, `chunk` at a time (the profile on the grid is (G, chunk))."""
    parts = [fit(t[i : i + chunk]) for i in range(0, len(t), chunk)]
    fields = (np.concatenate([getattr(p, f) for p in parts]) for f in ("shift", "lam", "m", "s"))
    return ScaleFit(*fields, t.shape[-1])
