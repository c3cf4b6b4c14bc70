"""The misses' upper bound: held-out strings wrong of n = 1,000, a beta-binomial by maximum
likelihood, its plug-in bound calibrated by a parametric bootstrap.

The model. The misses X of a seed are beta-binomial(n, a, b). It is parametrised by the mean
per string mu = a / (a + b) and the overdispersion phi = 1 / (a + b); the intra-seed
correlation is rho = 1 / (a + b + 1) = phi / (1 + phi), and phi = 0 is the binomial. In the
product form

    P(X = x) = C(n, x) prod_{j<x} (mu + j phi) prod_{j<n-x} (1 - mu + j phi)
                                 / prod_{j<n} (1 + j phi)

the likelihood is finite and smooth up to and at phi = 0: no difference of large log-gamma
values, so the near-binomial edge needs no special numerics.

The fit is maximum likelihood on (logit mu, log phi), by Newton-Raphson with the exact Hessian
and step halving, vectorised over ensembles because the calibration refits thousands of them
(the tests check it against scipy.optimize's Nelder-Mead). rho's profile-likelihood interval
ends are found by scipy.optimize.elementwise.find_root, mu maximised at each rho. Edges:

    not overdispersed   where the score in phi at the binomial fit (mu = mean / n, phi = 0) is
                        not positive, the likelihood's maximum is on the boundary: the fit is
                        that binomial, phi = 0 exactly, and rho's interval starts at 0
    all zero            the likelihood is maximal at mu = 0, whose bound (0) a single miss
                        would FAIL, and flat in phi there. The fit is the binomial at half a
                        count over the ensemble, mu = 1 / (2 m n); rho's interval is not
                        identified (reported [0, nan]) and the heavy-end calibration is the fit's

The bound is the plug-in c(g): the smallest count with P(X > c) <= g under the fit. Its nominal
level g is calibrated by a parametric bootstrap (Beran): ensembles of the same size m drawn
from a generating model, each refitted by maximum likelihood, its c(g) taken and that count's
exact exceedance computed under the generating model; g is the largest level on the grid
SHARE * LEVELS whose mean exceedance is at most SHARE, the share of the golden file's 1 %
among its nine one-sided tests. The calibration runs twice: at the fit, and at the heavy end
of rho's profile-likelihood 95 % interval with mu held at its fit, because m = 80 seeds
place rho only loosely and a heavier rho than the fit's needs a smaller g. The larger of the
two bounds (both plug-ins of the one fit) is used. The grid runs from the share down to 1e-4
of it: the calibration never loosens the nominal level. Where no level on it reaches the
share (a fit whose tail the refits cannot see, e.g. one large count among zeros), the
smallest is used and the shortfall is reported (`Bounds.attained`), not raised.

What is guaranteed is the mean exceedance over fitting ensembles. One committed bound's own
exceedance (the conditional rate) varies from fit to fit; `conditional_rates` simulates its
spread from a generating model. Its record on v3's data (misses_v3data.md, with v3's method of
moments beside it) was written by the report verb this module had at commit 540c0a5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats
from scipy.optimize import elementwise

N = 1000  # held-out strings per seed (the recipe's eval_n)
SHARE = 0.01 / 9  # one one-sided test's share of the golden file's 1 %
LEVELS = np.geomspace(1, 1e-4, 161)  # nominal levels tried, as a fraction of the share
CALIBRATION_DRAWS = 2000  # bootstrap ensembles per calibration
PROFILE_LEVEL = 0.95  # rho's profile-likelihood interval
LOG_PHI_MIN, LOG_PHI_MAX = math.log(1e-12), math.log(1e4)  # phi's search range
NEWTON_STEPS, HALVINGS = 100, 60
CHUNK = 1000  # ensembles fitted at once (memory: a few (CHUNK, n) arrays)


# Counts and the model ------------------------------------------------------------------------


def rho_of(phi):
    """rho = 1 / (a + b + 1) from phi = 1 / (a + b)."""
    return np.asarray(phi, float) / (1 + np.asarray(phi, float))


def phi_of(rho):
    return np.asarray(rho, float) / (1 - np.asarray(rho, float))


def shape_of(mu, phi):
    """(a, b) = (mu / phi, (1 - mu) / phi); infinite at phi = 0 (the binomial)."""
    mu, phi = np.asarray(mu, float), np.asarray(phi, float)
    with np.errstate(divide="ignore"):
        return mu / phi, (1 - mu) / phi


def log_pmf(n: int, mu, phi) -> np.ndarray:
    """log P(X = x) for x = 0..n, one row per (mu, phi), in the product form."""
    mu, phi = np.atleast_1d(mu).astype(float)[:, None], np.atleast_1d(phi).astype(float)[:, None]
    j = np.arange(n)
    w = 1 + j * phi
    with np.errstate(divide="ignore"):
        successes = np.log(mu + j * phi)  # -inf at mu = 0, j = 0: P(X > 0) = 0
    failures = np.log1p(-mu / w)  # log(1 - mu + j phi) - log(1 + j phi)
    zero = np.zeros((len(mu), 1))
    up = np.hstack([zero, np.cumsum(successes, axis=1)])  # sum_{j<x} log(mu + j phi)
    down = np.hstack([zero, np.cumsum(failures, axis=1)])
    scale = np.hstack([zero, np.cumsum(np.log(w), axis=1)])  # sum_{j<i} log(1 + j phi)
    x = np.arange(n + 1)
    choose = special.gammaln(n + 1) - special.gammaln(x + 1) - special.gammaln(n - x + 1)
    # prod_{j<n-x} (1 - mu + j phi) / prod_{j<n} (1 + j phi): the ratio up to n - x, then
    # the scale's remaining factors j = n - x .. n - 1
    return choose + up + down[:, ::-1] - (scale[:, -1:] - scale[:, ::-1])


def survival(n: int, mu, phi) -> np.ndarray:
    """P(X > c) for c = 0..n, one row per (mu, phi): the pmf summed from the top."""
    pmf = np.exp(log_pmf(n, mu, phi))
    above = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]  # P(X >= c)
    return np.hstack([above[:, 1:], np.zeros((len(pmf), 1))])


def draw(n: int, mu, phi, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Counts of shape (G, *size) from G models: p ~ beta(a, b), X ~ binomial(n, p)."""
    mu, phi = np.atleast_1d(mu).astype(float), np.atleast_1d(phi).astype(float)
    full = (len(mu), *size)
    grow = (slice(None),) + (None,) * len(size)
    a, b = shape_of(mu, np.where(phi > 0, phi, 1.0))
    p = rng.beta(np.broadcast_to(a[grow], full), np.broadcast_to(b[grow], full))
    p = np.where((phi > 0)[grow], p, mu[grow])
    return rng.binomial(n, p)


# The likelihood, on tallies -------------------------------------------------------------------


@dataclass(frozen=True)
class Tallies:
    """Sufficient statistics of ensembles (rows) of counts out of n, for the product form:
    above[e, k] = #{i: x_i > k} for k < K (K the largest count), and
    tail[e, j] = #{i: x_i >= n - k} for k = n - K + j (zero for every smaller k)."""

    n: int
    m: int
    above: np.ndarray
    tail: np.ndarray

    @classmethod
    def of(cls, x, n: int) -> Tallies:
        x = np.atleast_2d(np.asarray(x, int))
        rows, m = x.shape
        if x.min(initial=0) < 0 or x.max(initial=0) > n:
            raise ValueError(f"counts outside 0..{n}")
        top = min(max(int(x.max(initial=0)), 1), n)
        offset = (n + 1) * np.arange(rows)[:, None]
        counts = np.bincount((x + offset).ravel(), minlength=rows * (n + 1))
        at_most = np.cumsum(counts.reshape(rows, n + 1), axis=1)  # #{x_i <= c}
        above = m - at_most[:, :top]
        tail = (m - at_most[:, :top][:, ::-1]).astype(float)  # k = n - top + j: x >= top - j
        return cls(n, m, above.astype(float), tail)

    def rows(self, index) -> Tallies:
        return Tallies(self.n, self.m, self.above[index], self.tail[index])

    @property
    def k_above(self) -> np.ndarray:
        return np.arange(self.above.shape[1])

    @property
    def k_tail(self) -> np.ndarray:
        return np.arange(self.n - self.tail.shape[1], self.n)


def log_likelihood(t: Tallies, mu, phi) -> np.ndarray:
    """Per ensemble, sum_i log P(x_i) less sum_i log C(n, x_i):
    sum_k above_k log(mu + k phi) + m sum_{k<n} log(1 - mu / (1 + k phi))
    - sum_k tail_k log(1 - mu + k phi)."""
    mu, phi = np.asarray(mu, float)[:, None], np.asarray(phi, float)[:, None]
    k = np.arange(t.n)
    with np.errstate(divide="ignore", invalid="ignore"):
        hits = special.xlogy(t.above, mu + t.k_above * phi).sum(1)
        body = t.m * np.log1p(-mu / (1 + k * phi)).sum(1)
        tail = special.xlogy(t.tail, 1 - mu + t.k_tail * phi).sum(1)
    return hits + body - tail


def derivatives(t: Tallies, mu, phi):
    """The log-likelihood, its gradient (E, 2) and Hessian (E, 2, 2) in (mu, phi), with the
    m-weighted sums written to avoid cancelling large terms (1 - mu + k phi = w - mu)."""
    mu, phi = np.asarray(mu, float)[:, None], np.asarray(phi, float)[:, None]
    k, ka, kt = np.arange(t.n), t.k_above, t.k_tail
    u = mu + ka * phi  # successes' factors
    w = 1 + k * phi
    v = w - mu  # failures' factors
    vt = 1 - mu + kt * phi
    a_u, a_u2, d_v, d_v2 = t.above / u, t.above / u**2, t.tail / vt, t.tail / vt**2
    inv_v, inv_w = 1 / v, 1 / w
    m = t.m
    log_lik = log_likelihood(t, mu[:, 0], phi[:, 0])
    g_mu = a_u.sum(1) - m * inv_v.sum(1) + d_v.sum(1)
    g_phi = (ka * a_u).sum(1) + m * mu[:, 0] * (k * inv_v * inv_w).sum(1) - (kt * d_v).sum(1)
    h_mm = -a_u2.sum(1) - m * (inv_v**2).sum(1) + d_v2.sum(1)
    h_mp = -(ka * a_u2).sum(1) + m * (k * inv_v**2).sum(1) - (kt * d_v2).sum(1)
    h_pp = (
        -(ka**2 * a_u2).sum(1)
        - m * mu[:, 0] * (k**2 * (inv_v + inv_w) * inv_v * inv_w).sum(1)
        + (kt**2 * d_v2).sum(1)
    )
    gradient = np.stack([g_mu, g_phi], axis=1)
    hessian = np.stack([np.stack([h_mm, h_mp], 1), np.stack([h_mp, h_pp], 1)], 1)
    return log_lik, gradient, hessian


def _natural(theta):
    """(mu, phi) from theta = (logit mu, log phi)."""
    return special.expit(theta[:, 0]), np.exp(theta[:, 1])


def _theta_derivatives(t: Tallies, theta):
    """Log-likelihood, gradient and Hessian in theta = (logit mu, log phi) (chain rule)."""
    mu, phi = _natural(theta)
    log_lik, g, h = derivatives(t, mu, phi)
    dmu, dphi = mu * (1 - mu), phi
    gradient = np.stack([g[:, 0] * dmu, g[:, 1] * dphi], 1)
    hessian = h * np.stack([dmu, dphi], 1)[:, :, None] * np.stack([dmu, dphi], 1)[:, None, :]
    hessian[:, 0, 0] += g[:, 0] * dmu * (1 - 2 * mu)
    hessian[:, 1, 1] += g[:, 1] * dphi
    return log_lik, gradient, hessian


def _ascent_direction(gradient, hessian):
    """The Newton step, the Hessian shifted where needed to be negative definite
    (Levenberg), so that the step always climbs."""
    trace = hessian[:, 0, 0] + hessian[:, 1, 1]
    det = hessian[:, 0, 0] * hessian[:, 1, 1] - hessian[:, 0, 1] ** 2
    top = trace / 2 + np.sqrt(np.maximum(trace**2 / 4 - det, 0))  # largest eigenvalue
    shift = np.where(top < 0, 0.0, top + 1e-6 * (1 + np.abs(trace)))
    shifted = hessian - shift[:, None, None] * np.eye(2)
    return -np.linalg.solve(shifted, gradient[:, :, None])[:, :, 0]


def _climb(t: Tallies, theta, free_phi: bool = True):
    """Maximise the log-likelihood from theta by Newton-Raphson with step halving; phi
    held fixed unless free_phi, log phi kept within [LOG_PHI_MIN, LOG_PHI_MAX]."""
    theta = np.array(theta, float)
    active = np.arange(len(theta))
    for _ in range(NEWTON_STEPS):
        if not len(active):
            break
        part = t.rows(active)
        log_lik, gradient, hessian = _theta_derivatives(part, theta[active])
        if not free_phi:
            gradient[:, 1], hessian[:, 0, 1], hessian[:, 1, 0], hessian[:, 1, 1] = 0, 0, 0, -1
        step = _ascent_direction(gradient, hessian)
        moved = _halve_until_higher(part, theta[active], step, log_lik)
        done = np.abs(moved - theta[active]).max(1) < 1e-10
        theta[active] = moved
        active = active[~done]
    return theta


def _halve_until_higher(t: Tallies, theta, step, log_lik):
    scale = np.ones(len(theta))
    tolerance = 1e-12 * (1 + np.abs(log_lik))
    for _ in range(HALVINGS):
        trial = theta + scale[:, None] * step
        trial[:, 1] = np.clip(trial[:, 1], LOG_PHI_MIN, LOG_PHI_MAX)
        worse = ~(log_likelihood(t, *_natural(trial)) >= log_lik - tolerance)
        if not worse.any():
            return trial
        scale[worse] /= 2
    trial = theta + scale[:, None] * step
    trial[worse] = theta[worse]
    trial[:, 1] = np.clip(trial[:, 1], LOG_PHI_MIN, LOG_PHI_MAX)
    return trial


# Maximum likelihood ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """Maximum-likelihood fits of ensembles: per row mu, phi (0: the binomial), the
    log-likelihood (without sum log C(n, x_i)), whether the ensemble was all zero."""

    mu: np.ndarray
    phi: np.ndarray
    log_lik: np.ndarray
    all_zero: np.ndarray

    @property
    def rho(self) -> np.ndarray:
        return rho_of(self.phi)


def moments_start(x, n: int):
    """(mu, phi) by the method of moments, phi kept in [1e-6, 1]: Newton's start."""
    x = np.atleast_2d(np.asarray(x, float))
    mu = x.mean(1) / n
    binomial = np.maximum(n * mu * (1 - mu), 1e-300)
    rho = (x.var(1, ddof=1) / binomial - 1) / (n - 1) if x.shape[1] > 1 else 0 * mu
    return mu, np.clip(phi_of(np.clip(rho, 0, 0.5)), 1e-6, 1)


def fit_ml(x, n: int = N) -> Fit:
    """Maximum-likelihood beta-binomial fits, one per row of x (ensembles of equal size m);
    the edges as in the module's docstring."""
    x = np.atleast_2d(np.asarray(x, int))
    parts = [_fit_rows(x[i : i + CHUNK], n) for i in range(0, len(x), CHUNK)]
    return Fit(*(np.concatenate([getattr(p, f) for p in parts]) for f in Fit.__annotations__))


def _fit_rows(x, n: int) -> Fit:
    t = Tallies.of(x, n)
    mean, phi_start = moments_start(x, n)
    all_zero = mean == 0
    mu = np.where(all_zero, 0.5 / (x.shape[1] * n), mean)
    phi = np.zeros(len(x))
    binomial = log_likelihood(t, mu, phi)
    _, score, _ = derivatives(t, mu, phi)
    over = np.flatnonzero((score[:, 1] > 0) & ~all_zero)
    if len(over):
        start = np.stack([special.logit(mu[over]), np.log(phi_start[over])], 1)
        theta = _climb(t.rows(over), start)
        found_mu, found_phi = _natural(theta)
        found = log_likelihood(t.rows(over), found_mu, found_phi)
        better = found > binomial[over]
        mu[over[better]], phi[over[better]] = found_mu[better], found_phi[better]
    log_lik = np.where(all_zero, 0.0, log_likelihood(t, mu, phi))
    return Fit(mu, phi, log_lik, all_zero)


def profile_log_likelihood(t: Tallies, phi, mu_start):
    """max over mu of the log-likelihood at phi (per row), and the maximising mu."""
    phi = np.asarray(phi, float)
    theta = np.stack([special.logit(mu_start), np.log(np.maximum(phi, 1e-300))], 1)
    mu = _natural(_climb(t, theta, free_phi=False))[0]
    return log_likelihood(t, mu, phi), mu


def rho_interval(x, n: int = N, fit: Fit | None = None, level: float = PROFILE_LEVEL):
    """rho's profile-likelihood interval per row, (low, high): the rho whose profile
    log-likelihood is within chi2_1(level) / 2 of the maximum. low is 0 where the binomial
    is inside; high is rho at LOG_PHI_MAX where the interval reaches it; an all-zero row
    gives (0, nan)."""
    x = np.atleast_2d(np.asarray(x, int))
    fit = fit or fit_ml(x, n)
    t, cut = Tallies.of(x, n), stats.chi2.ppf(level, 1) / 2
    log_phi_hat = np.log(np.maximum(fit.phi, math.exp(LOG_PHI_MIN)))
    low = _profile_end(t, fit, cut, np.full(len(x), LOG_PHI_MIN), log_phi_hat)
    high = _profile_end(t, fit, cut, np.full(len(x), LOG_PHI_MAX), log_phi_hat)
    low, high = rho_of(np.exp(low)), rho_of(np.exp(high))
    low[(fit.phi == 0) | (low <= rho_of(math.exp(LOG_PHI_MIN)))] = 0.0
    low[fit.all_zero], high[fit.all_zero] = 0.0, np.nan
    return low, high


def _profile_end(t: Tallies, fit: Fit, cut: float, edge, log_phi_hat):
    """log phi where the profile log-likelihood has dropped by `cut`, between the fit and
    `edge` (scipy's bracketed elementwise root finder); `edge` where it never drops so far."""

    def drop(log_phi, rows):
        rows = rows.astype(int)
        found, _ = profile_log_likelihood(t.rows(rows), np.exp(log_phi), fit.mu[rows])
        return fit.log_lik[rows] - found - cut

    rows = np.arange(len(edge))
    end = edge.astype(float).copy()
    inside = ~fit.all_zero & (drop(edge, rows) > 0) & (edge != log_phi_hat)
    if inside.any():
        ends = np.sort(np.stack([log_phi_hat[inside], edge[inside]]), axis=0)
        root = elementwise.find_root(
            drop,
            (ends[0], ends[1]),
            args=(rows[inside].astype(float),),
            tolerances={"xatol": 1e-6},
        )
        end[inside] = root.x
    return end


# The calibrated bound ------------------------------------------------------------------------


def plug_in_bound(tail: np.ndarray, g) -> np.ndarray:
    """Per row of tail = P(X > c), the smallest c with P(X > c) <= g, for each level g:
    (rows, levels). tail is non-increasing, so c counts the c's above g."""
    g = np.atleast_1d(np.asarray(g, float))
    reach = int(np.flatnonzero((tail > g.min()).any(0)).max(initial=-1)) + 1
    return (tail[:, :reach, None] > g[None, None, :]).sum(1)


def plug_in_bound_each(tail: np.ndarray, g) -> np.ndarray:
    """plug_in_bound with one level per row."""
    return (tail > np.asarray(g, float)[:, None]).sum(1)


def calibrate(n: int, mu0, phi0, m: int, draws: int, rng, share: float = SHARE):
    """The nominal level g per generating model (mu0, phi0): the largest of share * LEVELS
    whose plug-in bound, from `draws` ensembles of m drawn from the model and refitted by
    maximum likelihood, has mean exact exceedance at most share under the model. Returns
    (g, the mean exceedance at g). Where no level on the grid reaches the share (a model whose
    tail the refits cannot see, e.g. most ensembles all zero and a rare large count), g is the
    grid's smallest and the mean exceedance returned shows the shortfall."""
    mu0, phi0 = np.atleast_1d(mu0).astype(float), np.atleast_1d(phi0).astype(float)
    g = share * LEVELS
    x = draw(n, mu0, phi0, (draws, m), rng).reshape(-1, m)
    fit = fit_ml(x, n)
    c = plug_in_bound(survival(n, fit.mu, fit.phi), g).reshape(len(mu0), -1)
    truth = survival(n, mu0, phi0)
    exceed = np.take_along_axis(truth, c, axis=1).reshape(len(mu0), draws, len(g)).mean(1)
    meets = exceed <= share
    first = np.where(meets.any(1), meets.argmax(1), len(g) - 1)  # LEVELS run largest first
    return g[first], exceed[np.arange(len(mu0)), first]


@dataclass(frozen=True)
class Bounds:
    """The procedure's result per fitting ensemble: the fit, rho's interval, the level, the
    bootstrap's mean exceedance at it and the bound of each calibration, the plain plug-in at
    the share, and the bound used."""

    fit: Fit
    rho_low: np.ndarray
    rho_high: np.ndarray
    g_fit: np.ndarray
    g_heavy: np.ndarray
    exceed_fit: np.ndarray
    exceed_heavy: np.ndarray
    c_fit: np.ndarray
    c_heavy: np.ndarray
    c_nominal: np.ndarray
    share: float

    @property
    def c(self) -> np.ndarray:
        return np.maximum(self.c_fit, self.c_heavy)

    @property
    def attained(self) -> np.ndarray:
        """Whether both calibrations reached the share (see calibrate)."""
        return np.maximum(self.exceed_fit, self.exceed_heavy) <= self.share


def misses_bounds(
    x, n: int = N, share: float = SHARE, draws: int = CALIBRATION_DRAWS, seed: int = 0
) -> Bounds:
    """The calibrated upper bound for each fitting ensemble (row of x)."""
    x = np.atleast_2d(np.asarray(x, int))
    rng = np.random.default_rng(seed)
    fit = fit_ml(x, n)
    rho_low, rho_high = rho_interval(x, n, fit)
    phi_heavy = np.where(fit.all_zero, fit.phi, phi_of(np.nan_to_num(rho_high)))
    g, exceed = np.empty((len(x), 2)), np.empty((len(x), 2))
    for i in range(len(x)):  # one generating model pair per ensemble, their draws together
        pair = [fit.phi[i], phi_heavy[i]]
        g[i], exceed[i] = calibrate(n, [fit.mu[i]] * 2, pair, x.shape[1], draws, rng, share)
    tail = survival(n, fit.mu, fit.phi)
    return Bounds(
        fit,
        rho_low,
        rho_high,
        *g.T,
        *exceed.T,
        plug_in_bound_each(tail, g[:, 0]),
        plug_in_bound_each(tail, g[:, 1]),
        plug_in_bound(tail, share)[:, 0],
        share,
    )


def misses_bound(x, n: int = N, share: float = SHARE, draws: int = CALIBRATION_DRAWS, seed=0):
    """One fitting ensemble's bound and its parts, as a dict."""
    b = misses_bounds(np.asarray(x)[None, :], n, share, draws, seed)
    a, b_shape = shape_of(b.fit.mu[0], b.fit.phi[0])
    return {
        "high": int(b.c[0]),
        "mu": float(b.fit.mu[0]),
        "rho": float(b.fit.rho[0]),
        "a": float(a),
        "b": float(b_shape),
        "log_lik": float(b.fit.log_lik[0]),
        "rho_interval": (float(b.rho_low[0]), float(b.rho_high[0])),
        "g_fit": float(b.g_fit[0]),
        "g_heavy": float(b.g_heavy[0]),
        "exceed_fit": float(b.exceed_fit[0]),
        "exceed_heavy": float(b.exceed_heavy[0]),
        "attained": bool(b.attained[0]),
        "c_fit": int(b.c_fit[0]),
        "c_heavy": int(b.c_heavy[0]),
        "c_nominal": int(b.c_nominal[0]),
    }


# The procedure simulated ----------------------------------------------------------------------


def conditional_rates(
    mu0: float,
    phi0: float,
    m: int,
    fits: int,
    draws: int,
    n: int = N,
    share: float = SHARE,
    seed: int = 0,
) -> pd.DataFrame:
    """`fits` fitting ensembles of m drawn from (mu0, phi0), each put through the procedure
    (calibrations of `draws` ensembles): per fit the bounds and each one's exact exceedance
    under (mu0, phi0), the conditional rate."""
    rng = np.random.default_rng(seed)
    x = draw(n, mu0, phi0, (fits, m), rng)[0]
    found = misses_bounds(x, n, share, draws, seed=int(rng.integers(2**31)))
    truth = survival(n, mu0, phi0)[0]
    table = pd.DataFrame(
        {
            "mu": found.fit.mu,
            "rho": found.fit.rho,
            "rho_high": found.rho_high,
            "g_fit": found.g_fit,
            "g_heavy": found.g_heavy,
        }
    )
    for name in ("c", "c_fit", "c_heavy", "c_nominal"):
        c = getattr(found, name)
        table[name], table[f"exceed_{name[2:] or 'used'}"] = c, truth[c]
    return table


def spread(exceed, share: float = SHARE) -> dict[str, float]:
    """The conditional rate over fits, as ratios to the share: mean with its Monte-Carlo
    standard error, 50th and 95th percentiles, and the share of fits above 3x."""
    r = np.asarray(exceed, float) / share
    return {
        "mean": float(r.mean()),
        "se": float(r.std(ddof=1) / math.sqrt(len(r))),
        "p50": float(np.percentile(r, 50)),
        "p95": float(np.percentile(r, 95)),
        "above_3x": float((r > 3).mean()),
    }


def full_log_likelihood(x, n: int, mu: float, phi: float) -> float:
    """sum_i log P(x_i), the binomial coefficients included."""
    return float(log_pmf(n, mu, phi)[0][np.asarray(x, int)].sum())
