"""Golden check v4's continuous keys: the loss windows and the anti-diagonal, their candidate
bounds, and the simulation that picks one (config/golden/v4/design.md, answers 1-4 and 6).

    python -m tools.golden_v4.windows simulate [--ensembles N] [--out FOLDER]
    python -m tools.golden_v4.windows power [--k K] [--out FOLDER]

Models. A loss window's excess over the smoothing floor, x = mean - floor > 0, is a truncated
Box-Cox normal: y = BoxCox(x; lam) ~ Normal(mu, sigma) restricted to the scale's reach (x > 0:
y > -1/lam for lam > 0, y < -1/lam for lam < 0), lam unknown. The anti-diagonal a is normal
on logit(a), or sinh-arcsinh skewed there. Heavier tails (reported, never used to choose):
Student-t on the same scale, scaled to the same SD, truncated the same way.

Candidates, two one-sided prediction bounds per key, each side a share alpha / TESTS:

    C   lam-hat by maximum likelihood (the truncated likelihood); m -+ k_side s sqrt(1 + 1/n)
        on its scale, k_side a constant of the method: the largest multiplier that, at any lam
        of the simulated range, makes the mean exact exceedance equal the share (calibrate_k)
    B   lam-hat by maximum likelihood; the multiplier per side and per fit calibrated by a
        parametric bootstrap at the fitted model (nested: its cost is paid at every fit)
    U   the union of the t bounds over lam's 95 % profile-likelihood interval (reported only)
    v3  the t bound at v3's fixed lam (tools.golden), the reference the v4 method replaces

A candidate is judged by its exact exceedance: the generating model's probability beyond each
fitted bound, averaged over simulated fitting ensembles (the marginal rate the guarantee is
about), with the Monte-Carlo error of that mean. The rule (answer 3): a candidate qualifies if,
for every normal model in range, each side's ratio (mean exceedance / share) is at most 1.05
and its Monte-Carlo 95 % upper end at most 1.10; of those, per side, the narrower mean band
wins, a band at the floor counting as lost power (width_sd).

Units. Internally a window's data are t = log x and the antidiagonal's t = logit(a); bounds are
returned in t. A window's Box-Cox scale is taken of x / g (g the ensemble's geometric mean):
the bounds are equivariant under scaling x, and the relative scale keeps lam up to 40 exact
in floating point where x^lam itself would underflow the spread (loss_late's x is about 0.05).
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import integrate, optimize, special, stats

from tools import golden

ROOT = Path(__file__).resolve().parents[2]
ALPHA = 0.01  # the golden file's budget
SHARE = ALPHA / golden.TESTS  # one one-sided test's share, Bonferroni over 9
N_FIT = 80  # fitting seeds
FLOOR = 0.611088  # the smoothing floor of the reversal recipe
V3_FITTING = ROOT / "config/golden/v3/fitting.csv"
OUT = ROOT / "config/golden/v4/simulation"
WINDOWS = ("loss_start", "loss_early", "loss_late")
KEYS = (*WINDOWS, "antidiagonal")
# The generating lambdas (answer 4): they cover v3's profile intervals with margin; 0.5 apart
# for the two later windows (v3's estimates 3.5 and 3.7 lie inside), 1 apart for loss_start.
LAMBDA_GRID = {
    "loss_start": np.arange(-7.0, 16.5, 1.0),
    "loss_early": np.arange(0.0, 8.25, 0.5),
    "loss_late": np.arange(0.0, 8.25, 0.5),
}
# lam-hat is sought on this grid, then refined (wider than the generating grid: at n = 80 the
# truncated profile is flat over about +-10 for loss_start's tiny relative spread, and for the
# later windows it often rises again at lam 10..25, where the truncated normal near its edge
# fits their left skew in log x).
FIT_GRID = {
    "loss_start": np.arange(-40.0, 50.25, 0.5),
    "loss_early": np.arange(-10.0, 40.125, 0.25),
    "loss_late": np.arange(-10.0, 40.125, 0.25),
}
DFS = (5, 8, 15, 30)  # the heavier tails' degrees of freedom (answer 4)
WIDTH_CAP = 10.0  # SDs: a bound farther out (at the floor, or infinite) counts as this wide
MULTIPLIER_RANGE = (0.5, 12.0)  # bracket of every calibrated multiplier
PROFILE_LEVEL = 0.95
SMALL = 1e-6  # |lam| below this is the log scale
ENSEMBLES = 8000  # fitting ensembles per model (answer 3)
INNER = 64  # (B)'s bootstrap ensembles per fit
CALIBRATION = 2  # (C)'s calibration draws this many times the ensembles per model


# The truncated normal's likelihood, standardized -------------------------------------------


@functools.cache
def _truncated_table() -> tuple[np.ndarray, ...]:
    """The normal's maximum likelihood on data of mean 0 and (ML) variance 1, truncated below
    at -d: for each d, (d, h = the maximal mean log-likelihood, mu', sigma' at the maximum).

    The truncated normal is an exponential family on a fixed support, so its MLE matches the
    sample's mean and variance; in tau = (mu' + d) / sigma' with lam = phi(tau) / Phi(tau):
    sigma' = 1 / sqrt(1 - tau lam - lam^2), mu' = -sigma' lam, d = sigma' (tau + lam). d runs
    from 1 (tau -> -inf, the exponential limit) to infinity (no truncation). Shapes: (T,)."""
    tau = np.linspace(-40.0, 40.0, 40001)
    ratio = math.sqrt(2 / math.pi) / special.erfcx(-tau / math.sqrt(2))  # phi / Phi, stably
    sigma = 1 / np.sqrt(1 - tau * ratio - ratio**2)
    mu = -sigma * ratio
    d = sigma * (tau + ratio)
    h = -np.log(sigma) - (mu**2 + 1) / (2 * sigma**2) - special.log_ndtr(tau)
    return d, h - 0.5 * math.log(2 * math.pi), mu, sigma


H_NORMAL = -0.5 - 0.5 * math.log(2 * math.pi)  # h without truncation (d = infinity)


def truncated_h(d: np.ndarray) -> np.ndarray:
    """The truncated normal's maximal mean log-likelihood on standardized data at distance d
    (in ML SDs) from the truncation point; below the table (d <= 1) the supremum is the
    exponential limit, -log d - 1."""
    table_d, table_h, _, _ = _truncated_table()
    d = np.asarray(d, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.interp(d, table_d, table_h, right=H_NORMAL)
        return np.where(d < table_d[0], -np.log(d) - 1, inside)


def truncated_mle(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The standardized MLE (mu', sigma') at distance d; clamped at the table's edge (d <= 1
    has no maximum: the limit is an exponential, reached at mu' -> -inf)."""
    table_d, _, mu, sigma = _truncated_table()
    d = np.asarray(d, float)
    return np.interp(d, table_d, mu, right=0.0), np.interp(d, table_d, sigma, right=1.0)


# The Box-Cox scale, relative and vectorised ---------------------------------------------------


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
    -inf (x = 0, the floor) for lam > 0 and +inf for lam < 0, as tools.golden.box_cox_inverse."""
    y, lam = np.asarray(y, float), np.asarray(lam, float)
    log = np.abs(lam) < SMALL
    safe = np.where(log, 1.0, lam)
    base = 1 + lam * y
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.log(np.where(base > 0, base, 1.0)) / safe
        beyond = np.where(lam > 0, -np.inf, np.inf)
        return np.where(log, y, np.where(base > 0, inside, beyond))


def box_cox_inverse_array(y: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """tools.golden.box_cox_inverse, elementwise (the simulation needs millions)."""
    return np.exp(box_cox_inverse_log(y, lam))


# lam by maximum likelihood -------------------------------------------------------------------


def centred(t: np.ndarray) -> np.ndarray:
    """Rows of log x less their means: log of x / its geometric mean. (E, n) -> (E, n)."""
    return t - t.mean(axis=-1, keepdims=True)


def _profile(mean_w, var_w, lam, n: int, truncated: bool) -> np.ndarray:
    """The profile log-likelihood from the moments of w = (x / g)^lam (ML variance): the scale
    y = (w - 1) / lam has ML SD S = sd(w) / |lam|, and its distance to the reach in S is
    d = mean(w) / sd(w) on either sign of lam. truncated False: the plain normal's (v3's)."""
    sd_w = np.sqrt(var_w)
    h = truncated_h(mean_w / sd_w) if truncated else H_NORMAL
    return n * (h - np.log(sd_w / np.abs(lam)))


def _profile_log(u: np.ndarray) -> np.ndarray:
    """The profile at lam 0 (the log scale, no truncation): n (h(inf) - log S)."""
    return u.shape[-1] * (H_NORMAL - np.log(u.std(axis=-1)))


def profile_loglik(u: np.ndarray, lam: np.ndarray, truncated: bool = True) -> np.ndarray:
    """The truncated Box-Cox normal's log-likelihood at lam, maximised over (mu, sigma), up to
    a constant. u: (E, n) log x centred per row; lam: () or (E,); returns (E,).

    On x / g (log g = mean log x) the Jacobian (lam - 1) sum(log x / g) vanishes, so the
    profile is n (h(d) - log S): S the ML SD of y = BoxCox(x / g; lam), d its mean's distance
    to the reach -1/lam in S (truncated_h)."""
    lam = np.broadcast_to(np.asarray(lam, float), u.shape[:-1])
    log = np.abs(lam) < SMALL
    w = np.exp(np.where(log, 1.0, lam)[..., None] * u)
    found = _profile(
        w.mean(axis=-1), w.var(axis=-1), np.where(log, 1.0, lam), u.shape[-1], truncated
    )
    return np.where(log, _profile_log(u), found)


def profile_grid(u: np.ndarray, grid: np.ndarray, truncated: bool = True) -> np.ndarray:
    """The profile log-likelihood at every lam of an evenly spaced grid. u: (E, n) centred;
    returns (G, E). w = exp(lam u) is carried from one grid point to the next by one product
    (exact again every 32 points): the exponential is the cost of the whole fit."""
    n, step = u.shape[-1], grid[1] - grid[0]
    ratio = np.exp(step * u)
    profile, w = np.empty((len(grid), len(u))), np.exp(grid[0] * u)
    for j, lam in enumerate(grid):
        if j % 32 == 0:
            w = np.exp(lam * u)
        else:
            np.multiply(w, ratio, out=w)
        if abs(lam) < SMALL:
            profile[j] = _profile_log(u)
            continue
        mean_w = w.mean(axis=-1)
        var_w = np.einsum("ij,ij->i", w, w) / n - mean_w**2
        profile[j] = _profile(mean_w, var_w, lam, n, truncated)
    return profile


def fit_lambda(
    u: np.ndarray, grid: np.ndarray, truncated: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """lam-hat per row by maximum likelihood: the best point of the grid, refined by the
    parabola through it and its neighbours (within half a step; an edge stays). u: (E, n)
    centred log x. Returns lam-hat (E,) and the profile on the grid (G, E)."""
    profile = profile_grid(u, grid, truncated)
    best = np.argmax(profile, axis=0)
    inner = np.clip(best, 1, len(grid) - 2)
    rows = np.arange(profile.shape[1])
    left, mid, right = (profile[inner + i, rows] for i in (-1, 0, 1))
    curve = left - 2 * mid + right
    with np.errstate(divide="ignore", invalid="ignore"):
        offset = np.clip(np.where(curve < 0, 0.5 * (left - right) / curve, 0.0), -0.5, 0.5)
    edge = (best == 0) | (best == len(grid) - 1)
    return np.where(edge, grid[best], grid[inner] + offset * (grid[1] - grid[0])), profile


def profile_interval(profile: np.ndarray, level: float = PROFILE_LEVEL) -> np.ndarray:
    """Which grid points lie in lam's profile-likelihood interval: 2 (max - profile) within
    the chi-square(1) quantile. (G, E) -> (G, E) bool."""
    return 2 * (profile.max(axis=0) - profile) <= stats.chi2.ppf(level, 1)


# The bounds -----------------------------------------------------------------------------------


class ScaleFit(NamedTuple):
    """Per fitting ensemble (each field (E,), or (c, inner) for (B)'s inner ensembles): its
    mean t (log of its reference g), lam (None: the logit's own scale), and the mean m and SD
    s (ddof 1) on the scale of x / g; n its seeds."""

    shift: np.ndarray
    lam: np.ndarray | None
    m: np.ndarray
    s: np.ndarray
    n: int

    def bound(self, k: np.ndarray, side: str) -> np.ndarray:
        """m -+ k s sqrt(1 + 1/n) on the scale ('low': minus), mapped back to t: -inf at the
        floor, +inf above the reach of a lam < 0."""
        sign = -1.0 if side == "low" else 1.0
        y = self.m + sign * np.asarray(k) * self.s * math.sqrt(1 + 1 / self.n)
        return self.shift + (y if self.lam is None else box_cox_inverse_log(y, self.lam))

    def reshape(self, shape: tuple[int, ...]) -> ScaleFit:
        lam = None if self.lam is None else np.reshape(self.lam, shape)
        shift, m, s = (np.reshape(v, shape) for v in (self.shift, self.m, self.s))
        return ScaleFit(shift, lam, m, s, self.n)


def scale_moments(u: np.ndarray, lam: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Mean and SD (ddof 1) per row on the key's scale: BoxCox(exp(u); lam), or u itself for
    lam None. u: (E, n); lam: () or (E,); returns (E,), (E,)."""
    y = u if lam is None else box_cox_log(u, np.asarray(lam, float)[..., None])
    return y.mean(axis=-1), y.std(axis=-1, ddof=1)


def fixed_fit(t: np.ndarray, lam: float | None) -> ScaleFit:
    """The scale at a fixed lam (v3's method; None: the anti-diagonal's logit). t: (E, n)."""
    u, shift = centred(t), t.mean(axis=-1)
    return ScaleFit(
        shift, None if lam is None else np.full(len(t), lam), *scale_moments(u, lam), t.shape[-1]
    )


def refit(t: np.ndarray, grid: np.ndarray, truncated: bool = True) -> ScaleFit:
    """The scale at lam-hat, by maximum likelihood over the grid. t: (E, n) log x."""
    u, shift = centred(t), t.mean(axis=-1)
    lam = fit_lambda(u, grid, truncated)[0]
    return ScaleFit(shift, lam, *scale_moments(u, lam), t.shape[-1])


def t_multiplier(n: int, level: float = SHARE) -> float:
    """Student's t_{n-1}(1 - level): the exact multiplier for a normal sample."""
    return float(stats.t.ppf(1 - level, df=n - 1))


def bounds(fit: ScaleFit, k_low: float, k_high: float) -> tuple[np.ndarray, np.ndarray]:
    return fit.bound(k_low, "low"), fit.bound(k_high, "high")


def bounds_v3(t: np.ndarray, lam: float | None) -> tuple[np.ndarray, np.ndarray]:
    """v3's method: the t bound at a fixed lam (tools.golden.LAMBDA; None: logit)."""
    k = t_multiplier(t.shape[-1])
    return bounds(fixed_fit(t, lam), k, k)


def bounds_c(t, k, grid, truncated: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Candidate C: lam refitted by maximum likelihood (grid None: the logit, no lam), then
    the constant multipliers k = (k_low, k_high). t: (E, n) -> low (E,), high (E,)."""
    fit = fixed_fit(t, None) if grid is None else refit(t, grid, truncated)
    return bounds(fit, *k)


def bounds_u(t: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidate U: the lowest low and highest high t bound over the grid points of lam's 95 %
    profile-likelihood interval. t: (E, n) -> (E,), (E,)."""
    u, shift, n = centred(t), t.mean(axis=-1), t.shape[-1]
    inside = profile_interval(profile_grid(u, grid))  # (G, E)
    k = t_multiplier(n)
    low, high = np.full(len(t), np.inf), np.full(len(t), -np.inf)
    for lam, keep in zip(grid, inside, strict=True):
        fit = ScaleFit(shift, np.full(len(t), lam), *scale_moments(u, lam), n)
        low = np.where(keep, np.minimum(low, fit.bound(k, "low")), low)
        high = np.where(keep, np.maximum(high, fit.bound(k, "high")), high)
    return low, high


def bounds_b(
    t: np.ndarray,
    grid: np.ndarray,
    inner: int,
    rng: np.random.Generator,
    inner_grid: np.ndarray | None = None,
    chunk: int = 250,
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate B: lam-hat by maximum likelihood, then per fit and side the multiplier whose
    mean exact exceedance under the fitted truncated model, over `inner` ensembles drawn from
    it and refitted (lam, m, s; lam on inner_grid, by default the same grid), equals the
    share. t: (E, n) -> low (E,), high (E,)."""
    n, fit = t.shape[-1], refit(t, grid)
    fitted = fitted_model(centred(t), fit.lam)  # on each ensemble's x / g
    k = np.empty((2, len(t)))
    for start in range(0, len(t), chunk):
        part = slice(start, start + chunk)
        model = fitted.take(part)  # fields (c, 1): one model per outer fit
        c = len(model.mu)
        again = model.draw((c, inner, n), rng).reshape(-1, n)
        again = refit(again, grid if inner_grid is None else inner_grid).reshape((c, inner))
        k[:, part] = calibrate(model, again)
    return fit.bound(k[0], "low"), fit.bound(k[1], "high")


# The bands of one fitting ensemble (what the v4 fit calls) --------------------------------------


def window_band(means: np.ndarray, floor: float, k: tuple[float, float], grid: np.ndarray) -> dict:
    """A loss window's band by (C) in loss units: lam-hat by the truncated likelihood, then
    m -+ k s sqrt(1 + 1/n) on BoxCox(x / g; lam-hat), x = mean - floor, g the geometric mean
    of x (the band is that of BoxCox(x), and x / g keeps x^lam in range), mapped back with
    tools.golden.box_cox_inverse (the floor, or infinity, beyond the scale's reach). Also
    lam's 95 % profile-likelihood interval on the grid."""
    x = np.asarray(means, float) - floor
    t = np.log(x)
    g, n = float(np.exp(t.mean())), len(x)
    lam, profile = fit_lambda(centred(t[None, :]), grid)
    lam, inside = float(lam[0]), grid[profile_interval(profile)[:, 0]]
    y = golden.box_cox(x / g, lam)
    half = float(np.std(y, ddof=1)) * math.sqrt(1 + 1 / n)
    m = float(np.mean(y))
    return {
        "low": floor + g * golden.box_cox_inverse(m - k[0] * half, lam),
        "high": floor + g * golden.box_cox_inverse(m + k[1] * half, lam),
        "lambda": lam,
        "lambda_interval": [float(inside.min()), float(inside.max())],
        "n": n,
    }


def antidiagonal_band(values: np.ndarray, k: tuple[float, float]) -> dict:
    """The anti-diagonal's band by (C): m -+ k s sqrt(1 + 1/n) on logit(a)."""
    y = golden.logit(values)
    half = float(np.std(y, ddof=1)) * math.sqrt(1 + 1 / len(y))
    m = float(np.mean(y))
    expit = special.expit
    return {
        "low": float(expit(m - k[0] * half)),
        "high": float(expit(m + k[1] * half)),
        "n": len(y),
    }


# Generating models ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """A key's generating model: y = mu + sigma e on the scale of lam (BoxCox of x relative to
    a reference; lam None: logit(a) itself), e standardized (mean 0, SD 1 before truncation):
    normal, Student-t(df) scaled to SD 1, or sinh-arcsinh skewed by eps (tail weight 1),
    truncated to the scale's reach. lam, mu, sigma may be arrays: one model per element."""

    lam: float | np.ndarray | None
    mu: float | np.ndarray
    sigma: float | np.ndarray
    df: float = math.inf
    eps: float = 0.0

    @property
    def name(self) -> str:
        if self.eps:
            family = f"sinh-arcsinh skew {sinh_arcsinh_moments(self.eps)[2]:+.2f}"
        else:
            family = "normal" if self.df == math.inf else f"t{self.df:g}"
        return family if self.lam is None else f"{family} lam={self.lam:g}"

    def take(self, part: slice) -> Model:
        """Elements `part` of an array-valued model as a column: fields (c, 1)."""
        column = {f: np.asarray(getattr(self, f))[part][:, None] for f in ("lam", "mu", "sigma")}
        return replace(self, **column)

    # the standardized law e, in logs: the fitted models of (B) can be truncated far out ---

    def _normal_of(self, e: np.ndarray) -> np.ndarray:
        """The standard normal deviate with the same cdf as e (normal and sinh-arcsinh)."""
        if not self.eps:
            return e
        mean, sd, _ = sinh_arcsinh_moments(self.eps)
        return np.sinh(np.arcsinh(e * sd + mean) - self.eps)

    def _from_normal(self, z: np.ndarray) -> np.ndarray:
        if not self.eps:
            return z
        mean, sd, _ = sinh_arcsinh_moments(self.eps)
        return (np.sinh(np.arcsinh(z) + self.eps) - mean) / sd

    def _t_scale(self) -> float:
        return math.sqrt(self.df / (self.df - 2))  # a t(df) draw over this has SD 1

    def logcdf(self, e: np.ndarray) -> np.ndarray:
        if self.df == math.inf:
            return special.log_ndtr(self._normal_of(e))
        with np.errstate(divide="ignore"):
            return np.log(special.stdtr(self.df, e * self._t_scale()))

    def logsf(self, e: np.ndarray) -> np.ndarray:
        if self.df == math.inf:
            return special.log_ndtr(-self._normal_of(e))
        with np.errstate(divide="ignore"):
            return np.log(special.stdtr(self.df, -e * self._t_scale()))

    def ppf_log(self, log_p: np.ndarray) -> np.ndarray:
        """The e with logcdf(e) = log_p."""
        if self.df == math.inf:
            return self._from_normal(special.ndtri_exp(log_p))
        return special.stdtrit(self.df, np.exp(log_p)) / self._t_scale()

    def isf_log(self, log_q: np.ndarray) -> np.ndarray:
        """The e with logsf(e) = log_q."""
        if self.df == math.inf:
            return self._from_normal(-special.ndtri_exp(log_q))
        return -special.stdtrit(self.df, np.exp(log_q)) / self._t_scale()

    # the scale and its reach --------------------------------------------------------------------

    def reach(self) -> tuple[np.ndarray, np.ndarray]:
        """The truncation points in e, (low, high): -inf / +inf where the scale is unbounded."""
        if self.lam is None:
            return np.asarray(-np.inf), np.asarray(np.inf)
        lam = np.asarray(self.lam, float)
        with np.errstate(divide="ignore"):
            edge = (-1 / np.where(lam == 0, 1.0, lam) - self.mu) / self.sigma
        return np.where(lam > 0, edge, -np.inf), np.where(lam < 0, edge, np.inf)

    def to_e(self, t: np.ndarray) -> np.ndarray:
        y = t if self.lam is None else box_cox_log(t, self.lam)
        return (y - self.mu) / self.sigma

    def draw(self, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Draws of t (log x, or logit a) of shape `size`; array fields broadcast against it
        with one more axis (fields (c, 1), size (c, r, n)). A draw on the reach's edge (of
        probability 0, but rounding can hit it) is kept finite."""
        low, high = (np.asarray(v)[..., None] for v in self.reach())
        log_p = np.log(rng.uniform(size=size))
        e = np.where(  # above a finite lower edge, from the upper tail: no cancellation
            np.isfinite(low),
            self.isf_log(log_p + self.logsf(low)),
            self.ppf_log(log_p + self.logcdf(high)),
        )
        mu, sigma = (np.asarray(v)[..., None] for v in (self.mu, self.sigma))
        y = mu + sigma * e
        if self.lam is None:
            return y
        return np.clip(box_cox_inverse_log(y, np.asarray(self.lam, float)[..., None]), -700, 700)

    def exceedance(self, bound: np.ndarray, side: str) -> np.ndarray:
        """The model's probability beyond `bound` (in t) on `side` ('low': below it), as a
        ratio of logs to the reach's mass: exact however far out the truncation lies."""
        low, high = self.reach()
        e = np.clip(self.to_e(np.asarray(bound, float)), low, high)
        with np.errstate(invalid="ignore"):
            below_edge = self.logsf(e) - self.logsf(low)  # log P(e' > e), truncated below
            above_edge = self.logcdf(e) - self.logcdf(high)  # log P(e' < e), truncated above
        upper_edge = np.isfinite(high)
        if side == "low":
            return np.where(upper_edge, np.exp(above_edge), -np.expm1(below_edge))
        return np.where(upper_edge, -np.expm1(above_edge), np.exp(below_edge))

    def width_sd(self, bound: np.ndarray, side: str) -> np.ndarray:
        """How far the bound lies from the model's centre mu, outward, in sigma on its scale; a
        bound beyond the reach (at the floor, or infinite) sits at the reach, and every width
        is capped at WIDTH_CAP: a band that far out is lost power."""
        low, high = self.reach()
        e = np.clip(self.to_e(np.asarray(bound, float)), low, high)
        return np.minimum(-e if side == "low" else e, WIDTH_CAP)


@functools.cache
def sinh_arcsinh_moments(eps: float) -> tuple[float, float, float]:
    """Mean, SD and skewness of sinh(asinh(Z) + eps) = Z cosh eps + sqrt(1 + Z^2) sinh eps,
    Z standard normal."""

    def raw(power: int) -> float:
        def f(z):
            return (z * math.cosh(eps) + math.sqrt(1 + z * z) * math.sinh(eps)) ** power

        found = integrate.quad(lambda z: f(z) * math.exp(-z * z / 2), -40, 40, epsabs=1e-13)
        return found[0] / math.sqrt(2 * math.pi)

    m1, m2, m3 = raw(1), raw(2), raw(3)
    var = m2 - m1**2
    return m1, math.sqrt(var), (m3 - 3 * m1 * var - m1**3) / var**1.5


def sinh_arcsinh_eps(skew: float) -> float:
    """The eps whose sinh-arcsinh (tail weight 1) has this skewness."""
    return optimize.brentq(lambda e: sinh_arcsinh_moments(e)[2] - skew, -3.0, 3.0, xtol=1e-12)


def fitted_model(u: np.ndarray, lam: np.ndarray) -> Model:
    """The truncated Box-Cox normal fitted by maximum likelihood at lam: (mu, sigma) from the
    standardized MLE of each row (truncated_mle; lam < 0 truncates above: the mirror image).
    u: (E, n) centred log x; lam: (E,); fields (E,)."""
    y = box_cox_log(u, lam[:, None])
    mean, sd = y.mean(axis=-1), y.std(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(np.abs(lam) < SMALL, np.inf, (1 + lam * mean) / (np.abs(lam) * sd))
    mu, sigma = truncated_mle(d)
    sign = np.where(lam < 0, -1.0, 1.0)
    return Model(lam=lam, mu=mean + sign * sd * mu, sigma=sd * sigma)


def design_models(t: np.ndarray, lams: Sequence[float], df: float = math.inf) -> list[Model]:
    """Generating models at the design data's moments: per lam, mu and sigma are the mean and
    SD of BoxCox(x / g; lam) of the data (g their geometric mean; t = log x: (n,))."""
    u = t - t.mean()
    found = [(lam, *scale_moments(u, lam)) for lam in lams]
    return [Model(lam=float(lam), mu=float(m), sigma=float(s), df=df) for lam, m, s in found]


# Calibration ---------------------------------------------------------------------------------


def solve_multiplier(
    rate: Callable[[np.ndarray], np.ndarray], shape, iterations: int = 36, target: float = SHARE
):
    """Per element, the multiplier k at which rate(k) (decreasing in k) equals the target (the
    share), by bisection on MULTIPLIER_RANGE (to 1e-9). rate: k (shape) -> mean exceedance."""
    low, high = np.full(shape, MULTIPLIER_RANGE[0]), np.full(shape, MULTIPLIER_RANGE[1])
    for _ in range(iterations):
        k = (low + high) / 2
        above = rate(k) > target
        low, high = np.where(above, k, low), np.where(above, high, k)
    return (low + high) / 2


def calibrate(model: Model, fit: ScaleFit, target: float = SHARE) -> np.ndarray:
    """The multipliers (k_low, k_high) at which the fits' mean exact exceedance under the
    model equals the target (the share); the mean is over the fits' last axis (fields (E,):
    one pair; fields (c, inner) with a model per row, fields (c, 1): (2, c), (B)'s inner step)."""
    shape = np.shape(fit.m)[:-1]

    def rate(side):
        return lambda k: model.exceedance(fit.bound(k[..., None], side), side).mean(axis=-1)

    sides = ("low", "high")
    return np.stack([solve_multiplier(rate(side), shape, target=target) for side in sides])


def calibrate_k(model: Model, grid, ensembles: int, rng, truncated: bool = True, n: int = N_FIT):
    """(C)'s multipliers (k_low, k_high) at one generating model: its mean exact exceedance
    over `ensembles` fits of n, lam refitted on the grid (None: the logit), equals the share."""
    t = model.draw((ensembles, n), rng)
    k = calibrate(model, fixed_fit(t, None) if grid is None else refit(t, grid, truncated))
    return float(k[0]), float(k[1])


# The simulation ------------------------------------------------------------------------------


def design_data(path: Path = V3_FITTING) -> dict[str, np.ndarray]:
    """Each key's design data in t: log(mean - floor) for a window, logit(a) for the
    anti-diagonal (for now v3's fitting data; v4 recalibrates at its own)."""
    table = pd.read_csv(path)
    data = {key: np.log(table[key].dropna().to_numpy(float) - FLOOR) for key in WINDOWS}
    data["antidiagonal"] = golden.logit(table["antidiagonal"].dropna().to_numpy(float))
    return data


def key_models(
    key: str, t: np.ndarray, grid: np.ndarray | None = None
) -> tuple[list[Model], list[Model]]:
    """The key's generating models at the design data's moments: (those that choose, normal;
    the heavier-tailed, reported). A window: truncated Box-Cox normal at every lam of `grid`
    (LAMBDA_GRID's by default); Student-t(DFS) at the data's lam-hat by the plain normal
    likelihood, rounded into the grid (the truncated one can sit in its second mode:
    loss_early's is 15). The anti-diagonal: logit normal and sinh-arcsinh at the data's
    skewness; Student-t(DFS)."""
    if key == "antidiagonal":
        normal = Model(lam=None, mu=float(t.mean()), sigma=float(t.std(ddof=1)))
        skewed = replace(normal, eps=sinh_arcsinh_eps(float(stats.skew(t))))
        return [normal, skewed], [replace(normal, df=df) for df in DFS]
    grid = LAMBDA_GRID[key] if grid is None else grid
    lam = float(refit(t[None, :], FIT_GRID[key], truncated=False).lam[0])
    heavy = float(grid[np.argmin(np.abs(grid - lam))])
    return design_models(t, grid), [design_models(t, [heavy], df)[0] for df in DFS]


def seeded(seed: int, *path: int) -> np.random.Generator:
    """An independent stream per (seed, key, model, purpose)."""
    return np.random.default_rng([seed, *path])


def calibration(key: str, models: list[Model], ensembles: int, seed: int) -> pd.DataFrame:
    """(C)'s multipliers at each normal model, one row per model and likelihood (Cu: lam-hat
    by the untruncated likelihood, a diagnostic), on the same draws."""
    grid, rows = FIT_GRID.get(key), []
    for i, model in enumerate(models):
        for candidate, truncated in (("C", True), ("Cu", False))[: 1 if grid is None else 2]:
            rng = seeded(seed, KEYS.index(key), i, 0)
            k = calibrate_k(model, grid, ensembles, rng, truncated)
            rows.append(
                {
                    "key": key,
                    "model": model.name,
                    "candidate": candidate,
                    "k_low": k[0],
                    "k_high": k[1],
                }
            )
    return pd.DataFrame(rows)


def multipliers(cal: pd.DataFrame, candidate: str = "C") -> tuple[float, float]:
    """The method's constants: per side the largest multiplier over the models."""
    rows = cal[cal["candidate"] == candidate]
    return float(rows["k_low"].max()), float(rows["k_high"].max())


def summary(model: Model, bound: np.ndarray, side: str) -> dict[str, float]:
    """The mean exact exceedance as a ratio to the share, its Monte-Carlo SE and 95 %
    interval; the mean width in the model's SDs (width_sd); the fraction of bounds beyond
    the reach (lower: at the floor; upper: infinite), inert sides."""
    exceed = model.exceedance(bound, side)
    ratio, se = exceed.mean() / SHARE, exceed.std(ddof=1) / math.sqrt(len(exceed)) / SHARE
    return {
        "ratio": ratio,
        "se": se,
        "ratio_low": ratio - 1.96 * se,
        "ratio_high": ratio + 1.96 * se,
        "width_sd": float(model.width_sd(bound, side).mean()),
        "inert": float(np.mean(~np.isfinite(bound))),
    }


def lambda_summary(lam: np.ndarray, key: str, top: float) -> dict[str, float]:
    """lam-hat's spread over the fits, and the fractions above the generating range (its
    largest lam: top) and at the fitting grid's edges."""
    q = np.percentile(lam, [5, 25, 50, 75, 95])
    grid = FIT_GRID[key]
    return {
        **{f"q{p:02d}": v for p, v in zip((5, 25, 50, 75, 95), q, strict=True)},
        "above_range": float(np.mean(lam > top)),
        "at_edge": float(np.mean((lam <= grid[0]) | (lam >= grid[-1]))),
    }


def evaluate(key, models, family, ks, ensembles, inner, candidates, seed):
    """Every candidate on fresh fitting ensembles of each model (common to the candidates):
    one row per (model, candidate, side), and one per (model, likelihood) of lam-hat.
    ks: {candidate: (k_low, k_high)} for C and Cu."""
    grid, rows, lams = FIT_GRID.get(key), [], []
    top = max((m.lam for m in models if m.lam is not None), default=None)
    for i, model in enumerate(models):
        rng = seeded(seed, KEYS.index(key), i, 1 if family == "normal" else 2)
        t = model.draw((ensembles, N_FIT), rng)
        found = {"v3": bounds_v3(t, golden.LAMBDA.get(key))}
        for candidate, truncated in (("C", True), ("Cu", False)):
            if candidate not in candidates or candidate not in ks:
                continue
            fit = fixed_fit(t, None) if grid is None else refit(t, grid, truncated)
            found[candidate] = bounds(fit, *ks[candidate])
            if grid is not None:
                lams.append(
                    {
                        "key": key,
                        "model": model.name,
                        "candidate": candidate,
                        **lambda_summary(fit.lam, key, top),
                    }
                )
        if "B" in candidates and grid is not None:
            found["B"] = bounds_b(t, grid, inner, rng, inner_grid=grid[::2])  # half the cost
        if "U" in candidates and grid is not None:
            found["U"] = bounds_u(t, grid)
        for candidate, pair in found.items():
            for side, bound in zip(("low", "high"), pair, strict=True):
                rows.append(
                    {
                        "key": key,
                        "side": side,
                        "family": family,
                        "model": model.name,
                        "candidate": candidate,
                        **summary(model, bound, side),
                    }
                )
    return pd.DataFrame(rows), pd.DataFrame(lams)


def qualifies(rows: pd.DataFrame) -> bool:
    """Answer 3: every normal model's ratio at most 1.05 on each side, and its Monte-Carlo
    95 % upper end at most 1.10."""
    return bool(((rows["ratio"] <= 1.05) & (rows["ratio_high"] <= 1.10)).all())


def select(table: pd.DataFrame, key: str, choosing: Sequence[str] = ("C", "B")) -> dict:
    """Answer 3's choice for one key: of the candidates that qualify over its normal models,
    per side the narrower mean band (width_sd, averaged over the models); None where none
    qualifies (the design goes back to review)."""
    normal = table[(table["key"] == key) & (table["family"] == "normal")]
    by = normal.groupby("candidate")
    ok = [c for c in choosing if c in by.groups and qualifies(by.get_group(c))]
    chosen = {}
    for side in ("low", "high"):
        rows = normal[normal["candidate"].isin(ok) & (normal["side"] == side)]
        widths = rows.groupby("candidate")["width_sd"].mean()
        chosen[side] = str(widths.idxmin()) if len(widths) else None
    return chosen


def family_rate(rates: Sequence[float]) -> float:
    """The family-wise rate of independent one-sided tests with these rates."""
    return float(1 - np.prod(1 - np.asarray(rates, float)))


@dataclass
class Simulation:
    """The selection simulation's results: table (one row per key, side, family, model,
    candidate), calibration (k per normal model and candidate), lambdas (lam-hat's spread),
    keys (per key: k per side, the chosen candidate per side, CPU seconds)."""

    table: pd.DataFrame
    calibration: pd.DataFrame
    lambdas: pd.DataFrame
    keys: pd.DataFrame


def simulate(
    ensembles: int = ENSEMBLES,
    inner: int = INNER,
    keys: Sequence[str] = KEYS,
    calibration_ensembles: int | None = None,
    candidates: Sequence[str] = ("C", "Cu", "B", "U"),
    seed: int = 4,
    grids: dict[str, np.ndarray] | None = None,
    log: Callable[[str], None] = print,
) -> Simulation:
    """The selection simulation at the design data's moments (v3's fitting data for now):
    per key, (C)'s multipliers calibrated on `calibration_ensembles` fits per normal model
    (default CALIBRATION times `ensembles`), then every candidate on fresh `ensembles` fits of
    every model, then answer 3's choice. grids: generating lambdas other than LAMBDA_GRID's."""
    data, parts = design_data(), []
    calibration_ensembles = calibration_ensembles or CALIBRATION * ensembles
    for key in keys:
        clock = time.process_time()
        normal, heavy = key_models(key, data[key], (grids or {}).get(key))
        cal = calibration(key, normal, calibration_ensembles, seed)
        ks = {c: multipliers(cal, c) for c in set(cal["candidate"])}
        log(f"{key}: k {ks} ({time.process_time() - clock:.0f} CPU s)")
        found, lams = evaluate(key, normal, "normal", ks, ensembles, inner, candidates, seed)
        tails = [c for c in candidates if c in ("C", "Cu")]
        heavy_found, _ = evaluate(key, heavy, "heavy", ks, ensembles, inner, tails, seed)
        table = pd.concat([found, heavy_found], ignore_index=True)
        chosen = select(table, key)
        cpu = time.process_time() - clock
        log(f"{key}: chosen {chosen} ({cpu:.0f} CPU s)")
        row = {
            "key": key,
            "k_low": ks["C"][0],
            "k_high": ks["C"][1],
            "chosen_low": chosen["low"],
            "chosen_high": chosen["high"],
            "ensembles": ensembles,
            "calibration_ensembles": calibration_ensembles,
            "inner": inner,
            "cpu_s": round(cpu),
        }
        parts.append((table, cal, lams, pd.DataFrame([row])))
    return Simulation(*(pd.concat(p, ignore_index=True) for p in zip(*parts, strict=True)))


# The record ----------------------------------------------------------------------------------

FILES = ("windows", "calibration", "lambdas", "keys")  # <name>.csv under the output folder
HEADER = "# written by `python -m tools.golden_v4.windows simulate`; provenance: keys.csv\n"


def merged(out: Path, sim: Simulation) -> Simulation:
    """The record in `out` with the keys just simulated replaced by their new rows."""
    parts = []
    for name, new in zip(FILES, vars(sim).values(), strict=True):
        path = out / f"{name}.csv"
        old = pd.read_csv(path, comment="#") if path.exists() else new.iloc[:0]
        keep = old[~old["key"].isin(set(sim.keys["key"]))] if len(old) else old
        parts.append(pd.concat([keep, new], ignore_index=True) if len(keep) else new)
    return Simulation(*parts)


def worst(table: pd.DataFrame) -> pd.DataFrame:
    """Per key, side and candidate over the normal models: the largest ratio with its MC
    interval and model, whether it qualifies, the mean width and inert fraction."""
    normal = table[table["family"] == "normal"]
    rows = []
    for (key, side, candidate), group in normal.groupby(["key", "side", "candidate"], sort=False):
        top = group.loc[group["ratio"].idxmax()]
        rows.append(
            {
                "key": key,
                "side": side,
                "candidate": candidate,
                "worst_ratio": top["ratio"],
                "mc_low": top["ratio_low"],
                "mc_high": top["ratio_high"],
                "at": top["model"],
                "qualifies": qualifies(group),
                "width_sd": group["width_sd"].mean(),
                "inert": group["inert"].mean(),
            }
        )
    return pd.DataFrame(rows)


def family_rates(sim: Simulation, df: int = 8) -> dict[str, float]:
    """The family-wise FAIL rate under Student-t(df) tails on every continuous key, for the
    chosen candidates (C where none is chosen) and for v3; the misses at their share."""
    table = sim.table
    heavy = table[(table["family"] == "heavy") & table["model"].str.match(f"t{df}( |$)")]
    found = {}
    for label in ("chosen", "v3"):
        rates = [SHARE]  # the misses' upper side
        for _, row in sim.keys.iterrows():
            for side in ("low", "high"):
                candidate = "v3" if label == "v3" else row[f"chosen_{side}"]
                candidate = candidate if isinstance(candidate, str) else "C"
                hit = heavy[
                    (heavy["key"] == row["key"])
                    & (heavy["side"] == side)
                    & (heavy["candidate"] == candidate)
                ]
                rates.extend(hit["ratio"] * SHARE)
        found[label] = family_rate(rates)
    return found


INTRO = f"""# Golden check v4: the continuous keys' selection simulation

Written by `python -m tools.golden_v4.windows simulate` (tools/golden_v4/windows.py) at v3's
fitting data's moments; never typed. Ratio: mean exact exceedance over the fitting ensembles /
the share {SHARE:.6f}; MC: its Monte-Carlo 95 % interval. Width: mean distance of the bound from
the model's centre in its SDs on its scale (the floor at the reach, capped at {WIDTH_CAP:g}).
Inert: the lower bound at the floor, or the upper bound infinite. Cu (lam-hat by the untruncated
likelihood) is a diagnostic, not a candidate of the design."""


def markdown(sim: Simulation) -> str:
    """The record's summary: provenance, the constants and choices, each candidate's worst
    ratio over the normal models, the heavier tails, and lam-hat's spread."""
    fmt = {"floatfmt": ".3g", "index": False}
    keys = sim.keys.copy()
    cu = sim.calibration[sim.calibration["candidate"] == "Cu"].groupby("key")
    for side in ("low", "high"):
        keys[f"Cu_k_{side}"] = keys["key"].map(cu[f"k_{side}"].max())
    keys = keys.fillna({"chosen_low": "none", "chosen_high": "none"})
    heavy = sim.table[sim.table["family"] == "heavy"].copy()
    heavy["df"] = heavy["model"].str.extract(r"^t(\d+)", expand=False).astype(int)
    tails = heavy.pivot_table(
        index=["key", "side", "df", "model"], columns="candidate", values="ratio", sort=False
    ).sort_index(level=["key", "side", "df"], sort_remaining=False)
    lams = sim.lambdas[sim.lambdas["candidate"] == "C"]
    lams = lams[["key", "model", "q05", "q50", "q95", "above_range", "at_edge"]]
    rates = family_rates(sim)
    runs = [
        "key",
        "command",
        "commit",
        "dirty",
        "date",
        "ensembles",
        "calibration_ensembles",
        "inner",
        "cpu_s",
    ]
    constants = ["key", "k_low", "k_high", "chosen_low", "chosen_high", "Cu_k_low", "Cu_k_high"]
    sections = [
        INTRO,
        "## Runs\n\n" + sim.keys[runs].to_markdown(index=False),
        "## Constants and choice (answer 3's rule over C and B)\n\n"
        + keys[constants].to_markdown(**fmt),
        "## Worst ratio over the normal models, per side and candidate\n\n"
        + worst(sim.table).to_markdown(**fmt),
        "## Heavier tails (Student-t on the key's scale): ratio\n\n"
        + tails.reset_index().to_markdown(**fmt),
        "Family-wise FAIL rate under t8 tails on every continuous key (the misses at their "
        f"share, sides independent): chosen {rates['chosen']:.4f}, v3 {rates['v3']:.4f}.",
        "## (C)'s lam-hat over the fits (normal models; Cu's in lambdas.csv)\n\n"
        + lams.to_markdown(**fmt),
    ]
    return "\n\n".join(sections) + "\n"


def write(sim: Simulation, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in zip(FILES, vars(sim).values(), strict=True):
        (out / f"{name}.csv").write_text(HEADER + frame.to_csv(index=False))
    (out / "windows.md").write_text(markdown(sim))


SHIFTS = (1.0, 2.0, 3.0, 4.0)  # fault sizes in the model's SDs on its scale (the power plan's)


def shift_power(
    key: str, lams: Sequence[float], ensembles: int, seed: int, k: float | None = None
) -> pd.DataFrame:
    """Power of one run-side against a shifted key: per normal model (at each lam, the design
    data's moments) and candidate, the mean exact probability that a run drawn from the model
    moved outward by delta SDs on its scale falls beyond the band fitted on 80 correct runs.
    C and Cu take the calibrated multipliers of calibration.csv (per side, the largest); with
    k, also "Cu K": Cu's fit with the one window multiplier k on both sides."""
    cal = pd.read_csv(OUT / "calibration.csv", comment="#")
    cal = cal[cal["key"] == key]
    methods = [("C", True, multipliers(cal, "C")), ("Cu", False, multipliers(cal, "Cu"))]
    methods += [] if k is None else [("Cu K", False, (k, k))]
    rows = []
    for i, model in enumerate(design_models(design_data()[key], lams)):
        t = model.draw((ensembles, N_FIT), seeded(seed, KEYS.index(key), i, 3))
        fits = {truncated: refit(t, FIT_GRID[key], truncated) for truncated in (True, False)}
        for candidate, truncated, ks in methods:
            pair = bounds(fits[truncated], *ks)
            rows += power_rows(key, model, candidate, pair)
    return pd.DataFrame(rows)


def power_rows(key: str, model: Model, candidate: str, pair) -> list[dict]:
    """One row per side and shift: the mean exact probability beyond the (low, high) bounds
    of a run from the model moved outward by shift_sd of its SDs on its scale."""
    rows = []
    for side, bound in zip(("low", "high"), pair, strict=True):
        sign = -1.0 if side == "low" else 1.0
        for delta in SHIFTS:
            moved = replace(model, mu=model.mu + sign * delta * model.sigma)
            rows.append(
                {
                    "key": key,
                    "model": model.name,
                    "candidate": candidate,
                    "side": side,
                    "shift_sd": delta,
                    "power": float(moved.exceedance(bound, side).mean()),
                }
            )
    return rows


def parse_grid(text: str) -> tuple[str, np.ndarray]:
    """KEY=START:STOP:STEP, the stop included."""
    key, spec = text.split("=", 1)
    start, stop, step = (float(v) for v in spec.split(":"))
    return key, np.arange(start, stop + step / 2, step)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.golden_v4.windows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("simulate", help="the selection simulation at v3's moments")
    run.add_argument(
        "--ensembles",
        type=int,
        default=ENSEMBLES,
        help="fitting ensembles per model, the same for every candidate",
    )
    run.add_argument(
        "--calibration-ensembles",
        type=int,
        help=f"(C)'s calibration fits per model (default {CALIBRATION} x ensembles)",
    )
    run.add_argument("--inner", type=int, default=INNER, help="(B)'s bootstrap ensembles per fit")
    run.add_argument(
        "--keys",
        nargs="+",
        default=list(KEYS),
        choices=KEYS,
        help="the keys to (re)simulate; the others' rows in OUT are kept",
    )
    run.add_argument("--candidates", nargs="+", default=["C", "Cu", "B", "U"])
    run.add_argument(
        "--lambda-grid",
        action="append",
        default=[],
        metavar="KEY=START:STOP:STEP",
        help="another generating grid for a window (a wider range, say)",
    )
    run.add_argument("--seed", type=int, default=4)
    run.add_argument("--out", type=Path, default=OUT)
    power = verbs.add_parser("power", help="C against Cu on shifted keys, at v3's moments")
    power.add_argument("--ensembles", type=int, default=2000)
    power.add_argument("--seed", type=int, default=5)
    power.add_argument("--k", type=float, help="also Cu with this one multiplier on every side")
    power.add_argument(
        "--out", type=Path, help="write shift_power.md into this folder (default: print only)"
    )
    args = parser.parse_args(argv)
    if args.verb == "power":
        return power_table(args.ensembles, args.seed, args.k, args.out)
    grids = dict(parse_grid(g) for g in args.lambda_grid)
    sim = simulate(
        ensembles=args.ensembles,
        inner=args.inner,
        keys=args.keys,
        calibration_ensembles=args.calibration_ensembles,
        candidates=args.candidates,
        seed=args.seed,
        grids=grids,
    )
    command = "python -m tools.golden_v4.windows " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    for field, value in golden.provenance(command).items():
        sim.keys[field] = value
    sim = merged(args.out, sim)
    write(sim, args.out)
    print(markdown(sim))
    return 0


POWER_LAMBDAS = {
    "loss_start": (-2.0, 1.0, 6.0),
    "loss_early": (1.0, 3.5, 6.5),
    "loss_late": (1.0, 3.5, 6.5),
}


def power_table(ensembles: int, seed: int, k: float | None = None, out: Path | None = None):
    """The power of one run-side per window, model, side and shift, C against Cu (and Cu at
    the one multiplier k): printed, and written to out/shift_power.md when out is given."""
    command = f"python -m tools.golden_v4.windows power --ensembles {ensembles} --seed {seed}"
    command += "" if k is None else f" --k {k:g}"
    command += "" if out is None else f" --out {out}"
    parts = [shift_power(key, POWER_LAMBDAS[key], ensembles, seed, k) for key in WINDOWS]
    wide = pd.concat(parts).pivot_table(
        index=["key", "model", "side", "shift_sd"], columns="candidate", values="power"
    )
    prov = golden.provenance(command)
    text = (
        "# Golden check v4: power of one run-side, C against Cu\n\n"
        f"Written by `{command}` at commit {prov['commit']} (dirty {prov['dirty']}), "
        f"{prov['date']}; {ensembles} fitting ensembles of {N_FIT} per model at v3's moments. "
        "Power: the mean exact probability that a run from the model shifted outward by "
        "shift_sd of its SDs (on its Box-Cox scale) lands beyond the band. C and Cu: the "
        "multipliers of calibration.csv, per key and side"
        + ("." if k is None else f"; Cu K: Cu's fit with k = {k:g} on every side.")
        + "\n\n"
        + wide.reset_index().to_markdown(index=False, floatfmt=".3g")
        + "\n"
    )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "shift_power.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
