"""The generating laws of the continuous keys, and the calibration of a multiplier by exact
exceedance under one of them.

A loss window's excess over the floor, x = mean - floor > 0, is a truncated Box-Cox normal:
y = BoxCox(x; lam) ~ Normal(mu, sigma) restricted to the scale's reach (x > 0: y > -1/lam for
lam > 0, y < -1/lam for lam < 0). The anti-diagonal a is normal on logit(a), or sinh-arcsinh
skewed there. Heavier tails: Student-t on the same scale, scaled to the same SD, truncated
the same way.

A band is judged by its exact exceedance: the generating law's probability beyond each fitted
bound, averaged over simulated fitting ensembles (the marginal rate the guarantee is about).
A multiplier is calibrated by solving for the k at which that mean equals a target.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special

from tools.golden.scale import ScaleFit, box_cox_inverse_log, box_cox_log, scale_moments

MULTIPLIER_RANGE = (0.5, 12.0)  # bracket of every calibrated multiplier


@dataclass(frozen=True)
class Model:
    """A key's law: y = mu + sigma e on the scale of lam (BoxCox of x relative to a reference;
    lam None: logit(a) itself), e standardized (mean 0, SD 1 before truncation): normal,
    Student-t(df) scaled to SD 1, or sinh-arcsinh skewed by eps (tail weight 1), truncated to
    the scale's reach."""

    lam: float | None
    mu: float
    sigma: float
    df: float = math.inf
    eps: float = 0.0

    @property
    def name(self) -> str:
        if self.eps:
            family = f"sinh-arcsinh skew {sinh_arcsinh_moments(self.eps)[2]:+.2f}"
        else:
            family = "normal" if self.df == math.inf else f"t{self.df:g}"
        return family if self.lam is None else f"{family} lam={self.lam:g}"

    # the standardized law e, in logs: a truncation can lie far out ---------------------------

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

    def quantile(self, z: np.ndarray) -> np.ndarray:
        """t at the standard normal deviate z (increasing in z): the truncated law's quantile,
        from the far side of a finite edge (no cancellation); kept finite at the reach."""
        low, high = (float(v) for v in self.reach())
        if np.isfinite(low):
            e = self.isf_log(special.log_ndtr(-z) + self.logsf(low))
        else:
            e = self.ppf_log(special.log_ndtr(z) + self.logcdf(high))
        y = self.mu + self.sigma * e
        t = y if self.lam is None else box_cox_inverse_log(y, self.lam)
        return np.clip(t, -700, 700)

    def draw(self, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Draws of t (log x, or logit a) of shape `size`."""
        low, high = self.reach()
        log_p = np.log(rng.uniform(size=size))
        e = np.where(  # above a finite lower edge, from the upper tail: no cancellation
            np.isfinite(low),
            self.isf_log(log_p + self.logsf(low)),
            self.ppf_log(log_p + self.logcdf(high)),
        )
        y = self.mu + self.sigma * e
        if self.lam is None:
            return y
        return np.clip(box_cox_inverse_log(y, np.asarray(self.lam, float)), -700, 700)

    def exceedance(self, bound: np.ndarray, side: str) -> np.ndarray:
        """The law's probability beyond `bound` (in t) on `side` ('low': below it), as a
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

    def moved(self, sds: float) -> Model:
        """The law moved by `sds` of its SDs on its scale (a fault)."""
        return Model(self.lam, self.mu + sds * self.sigma, self.sigma, self.df, self.eps)


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


def moment_models(t: np.ndarray, lams: Sequence[float], df: float = math.inf) -> list[Model]:
    """Laws at the data's moments: per lam, mu and sigma are the mean and SD (ddof 1) of
    BoxCox(x / g; lam) of the data (g their geometric mean; t = log x: (n,))."""
    u = t - t.mean()
    found = [(lam, *scale_moments(u, lam)) for lam in lams]
    return [Model(lam=float(lam), mu=float(m), sigma=float(s), df=df) for lam, m, s in found]


# Calibration ---------------------------------------------------------------------------------


def solve_multiplier(rate: Callable[[np.ndarray], np.ndarray], shape, target: float):
    """Per element, the multiplier k at which rate(k) (decreasing in k) equals the target, by
    bisection on MULTIPLIER_RANGE (36 halvings, to 1e-9). rate: k (shape) -> mean exceedance."""
    low, high = np.full(shape, MULTIPLIER_RANGE[0]), np.full(shape, MULTIPLIER_RANGE[1])
    for _ in range(36):
        k = (low + high) / 2
        above = rate(k) > target
        low, high = np.where(above, k, low), np.where(above, high, k)
    return (low + high) / 2


def calibrate(model: Model, fit: ScaleFit, target: float) -> np.ndarray:
    """The multipliers (k_low, k_high) at which the fits' mean exact exceedance under the
    model equals the target."""

    def rate(side):
        return lambda k: model.exceedance(fit.bound(k[..., None], side), side).mean(axis=-1)

    return np.stack([solve_multiplier(rate(side), (), target) for side in ("low", "high")])


def multiplier_sd(model: Model, fit: ScaleFit, k: float, side: str, step: float = 0.01) -> float:
    """The Monte-Carlo SD of a calibrated multiplier (delta method): the SE of the mean
    exceedance at k over the slope of the mean exceedance in k."""

    def exceed(k: float) -> np.ndarray:
        return model.exceedance(fit.bound(k, side), side)

    slope = (exceed(k + step).mean() - exceed(k - step).mean()) / (2 * step)
    return float(exceed(k).std(ddof=1) / math.sqrt(len(fit.m)) / -slope)


def summary(model: Model, bound: np.ndarray, side: str, share: float) -> dict[str, float]:
    """The mean exact exceedance as a ratio to the share, its Monte-Carlo SE and 95 %
    interval; the fraction of bounds beyond the reach (lower: at the floor; upper: infinite),
    inert sides."""
    exceed = model.exceedance(bound, side)
    ratio, se = exceed.mean() / share, exceed.std(ddof=1) / math.sqrt(len(exceed)) / share
    return {
        "ratio": ratio,
        "se": se,
        "ratio_low": ratio - 1.96 * se,
        "ratio_high": ratio + 1.96 * se,
        "inert": float(np.mean(~np.isfinite(bound))),
    }


def seeded(seed: int, *path: int) -> np.random.Generator:
    """An independent stream per (seed, what, which...)."""
    return np.random.default_rng([seed, *path])


def family_rate(rates: Sequence[float]) -> float:
    """The family-wise rate of independent one-sided tests with these rates."""
    return float(1 - np.prod(1 - np.asarray(rates, float)))
