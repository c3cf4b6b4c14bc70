"""Golden check, version 2: the method, committed before the seeds that will test it run.

Version 1 (bands.py) judges six single-minibatch losses, and most of a single step's spread
over seeds is that minibatch's noise, so faults that still train (a doubled learning rate,
a dropped residual) pass it. Version 2 judges what a seed's training is, its loss curve, by
window means, and held-out exact as the count it is. Per seed:

    loss_window   the mean loss over steps WINDOW (1,001..3,000), raw scale
    loss_early    the mean loss over steps EARLY (401..600), on log(loss - floor)
    misses        eval_n - held-out exact, a count of strings (beta-binomial over seeds)
    antidiagonal  the cross-attention anti-diagonal mean, on logit(a) (a right CDR3 only)

Each is judged one-sided, on the side a broken run moves it: the losses and the misses up,
the anti-diagonal down. No correct run's loss can go below the label-smoothing floor, so a
loss window below it FAILs deterministically (dropped smoothing lands there). The family-wise
budget is split over the judged keys (Bonferroni), alpha = budget / K each.

The rate is stated as what it is. A band is an upper (or lower) **tolerance bound**: with
confidence CONFIDENCE over the fitting ensemble, it covers at least 1 - alpha of correct
draws. For a normal scale that is m + k s with k from the noncentral t,

    k = t'_{n-1, z_{1-alpha} sqrt(n)}(CONFIDENCE) / sqrt(n),

exact for a normal sample. For the misses, a parametric bootstrap of the beta-binomial fit
(refit on each resampled ensemble) gives the CONFIDENCE quantile of the (1 - alpha) quantile.
So the guarantee on the committed bands is: with 95 % confidence, the family-wise
false-alarm rate is at most the budget, if each key's model holds. Held-out seeds test the
models: their probability integral transforms (PIT) under each key's predictive distribution
should be uniform (`pit_calibration`), and their failures are counted with an exact interval.

Ensembles at other numerics (two ranks, native mode, a GPU) are compared with the fitting
ensemble key by key before they are pooled (`compare_ensembles`): location (Welch's t) and spread
(Brown-Forsythe), Holm over the keys at 5 %; pooled if none differs, else the bands are
stratified by numerics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

WINDOW = (1001, 3000)  # steps, inclusive
EARLY = (401, 600)
CONFIDENCE = 0.95  # of the tolerance bounds
BOOTSTRAP = 2000  # resampled ensembles of the misses' tolerance bound
KEYS = ("loss_window", "loss_early", "misses", "antidiagonal")
SIDE = {"loss_window": "upper", "loss_early": "upper", "misses": "upper", "antidiagonal": "lower"}


# Per seed ---------------------------------------------------------------------------------------


def window_mean(curve: np.ndarray, window: tuple[int, int]) -> float:
    """The mean of a loss curve (step 1 at index 0) over the steps of `window`."""
    first, last = window
    if len(curve) < last:
        raise ValueError(f"a curve of {len(curve)} steps has no window {first}..{last}")
    return float(np.mean(curve[first - 1 : last]))


def seed_statistics(
    curve: np.ndarray, heldout_exact: int, eval_n: int, antidiagonal: float
) -> dict[str, float]:
    """The four judged numbers of one seed (a window the run is too short for: NaN)."""

    def mean_over(window):
        return window_mean(curve, window) if len(curve) >= window[1] else math.nan

    return {
        "loss_window": mean_over(WINDOW),
        "loss_early": mean_over(EARLY),
        "misses": float(eval_n - heldout_exact),
        "antidiagonal": float(antidiagonal),
    }


def curves_table(losses: pd.DataFrame) -> pd.DataFrame:
    """Every seed's full loss curve, one column a seed (`seed<s>`), one row a step: what an
    ensemble commits, so that any window can be judged later. losses: long, seed/step/loss."""
    wide = losses.pivot(index="step", columns="seed", values="loss").sort_index()
    wide.columns = [f"seed{int(s)}" for s in wide.columns]
    return wide.reset_index()


def statistics_table(
    curves: pd.DataFrame, per_seed: Mapping[int, Mapping[str, Any]], prefix: str, eval_n: int
) -> pd.DataFrame:
    """The four judged numbers of every seed (KEYS), from its curve and its evaluation; the
    anti-diagonal only where the seed's CDR3 came back right (NaN otherwise)."""
    rows = []
    for seed, values in sorted(per_seed.items()):
        right = bool(values[f"{prefix}.cdr3_correct"])
        rows.append({"seed": int(seed), **seed_statistics(
            curves[f"seed{seed}"].to_numpy(float), values[f"{prefix}.heldout_exact"], eval_n,
            values[f"{prefix}.cross_attention_antidiagonal_mean"] if right else math.nan,
        )})  # fmt: skip
    return pd.DataFrame(rows)


# Scales -----------------------------------------------------------------------------------------


def to_scale(key: str, x: np.ndarray, floor: float) -> np.ndarray:
    x = np.asarray(x, float)
    if key == "loss_early":
        return np.log(np.maximum(x - floor, 1e-7))
    if key == "antidiagonal":
        x = np.clip(x, 5e-5, 1 - 5e-5)
        return np.log(x / (1 - x))
    return x  # loss_window: raw


def from_scale(key: str, y: float, floor: float) -> float:
    if key == "loss_early":
        return floor + math.exp(y)
    if key == "antidiagonal":
        return 1 / (1 + math.exp(-y))
    return y


# Tolerance bounds -------------------------------------------------------------------------------


def normal_tolerance_factor(n: int, alpha: float, confidence: float = CONFIDENCE) -> float:
    """k of the one-sided normal tolerance bound m + k s covering 1 - alpha of draws with
    `confidence` (noncentral t, exact for a normal sample of n)."""
    z = stats.norm.ppf(1 - alpha)
    return float(stats.nct.ppf(confidence, df=n - 1, nc=z * math.sqrt(n)) / math.sqrt(n))


def normal_bound(y: np.ndarray, alpha: float, side: str, confidence: float = CONFIDENCE) -> float:
    k = normal_tolerance_factor(len(y), alpha, confidence)
    m, s = float(np.mean(y)), float(np.std(y, ddof=1))
    return m + k * s if side == "upper" else m - k * s


def fit_beta_binomial(misses: np.ndarray, n: int) -> tuple[float, float]:
    """(a, b) of a beta-binomial for counts out of n, by the method of moments: the mean
    fixes a / (a + b), the overdispersion rho = 1 / (a + b + 1) the rest. An ensemble no more
    spread than a binomial gets rho = 1e-6 (a binomial, nearly); an all-zero one keeps a
    mean of half a count over the seeds, never a rate of exactly 0."""
    x = np.asarray(misses, float)
    k = len(x)
    mean = max(x.mean(), 0.5 / k) / n
    variance = x.var(ddof=1) if k > 1 else 0.0
    binomial = n * mean * (1 - mean)
    rho = (variance / binomial - 1) / (n - 1) if binomial > 0 else 0.0
    rho = min(max(rho, 1e-6), 0.999)
    total = 1 / rho - 1
    return float(mean * total), float((1 - mean) * total)


def _quantile(n: int, a: float, b: float, level: float) -> int:
    """The smallest count c with P(X <= c) >= level under the beta-binomial (n, a, b)."""
    k = np.arange(n + 1)
    log_pmf = (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
               + special.betaln(k + a, n - k + b) - special.betaln(a, b))  # fmt: skip
    cdf = np.cumsum(np.exp(log_pmf))
    return int(np.searchsorted(cdf, level - 1e-12))


def beta_binomial_bound(
    misses: np.ndarray, n: int, alpha: float, confidence: float = CONFIDENCE, seed: int = 0
) -> int:
    """The largest count of misses a correct run may have: the CONFIDENCE quantile, over
    ensembles resampled from the fit and refitted, of their (1 - alpha) quantile."""
    a, b = fit_beta_binomial(misses, n)
    rng = np.random.default_rng(seed)
    again = stats.betabinom.rvs(n, a, b, size=(BOOTSTRAP, len(misses)), random_state=rng)
    quantiles = [_quantile(n, *fit_beta_binomial(row, n), 1 - alpha) for row in again]
    return int(np.quantile(quantiles, confidence))


# The bands --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToleranceBand:
    key: str
    side: str  # upper | lower
    bound: float  # in the key's units
    floor: float | None = None  # loss_window: no correct run goes below

    def fails(self, value: float) -> bool:
        if value is None or not math.isfinite(value):
            return True
        if self.floor is not None and value < self.floor:
            return True
        return value > self.bound if self.side == "upper" else value < self.bound


def fit(
    seeds: pd.DataFrame, budget: float, floor: float, eval_n: int, seed: int = 0
) -> dict[str, ToleranceBand]:
    """{key: Band} from a fitting ensemble (one row per seed, the columns of KEYS; the
    anti-diagonal of seeds whose CDR3 came back right)."""
    alpha = budget / len(KEYS)
    found = {}
    for key in KEYS:
        x = seeds[key].dropna().to_numpy(float)
        if key == "misses":
            bound = float(beta_binomial_bound(x, eval_n, alpha, seed=seed))
        else:
            y = normal_bound(to_scale(key, x, floor), alpha, SIDE[key])
            bound = from_scale(key, y, floor)
        found[key] = ToleranceBand(key, SIDE[key], bound, floor if key == "loss_window" else None)
    return found


def judge(bands: Mapping[str, ToleranceBand], values: Mapping[str, float]) -> list[str]:
    """The keys a run's statistics FAIL."""
    return [key for key, band in bands.items() if band.fails(values.get(key))]


# Calibration and comparison ---------------------------------------------------------------------


def pit(key: str, fitting: np.ndarray, new: np.ndarray, floor: float, eval_n: int):
    """Each new seed's probability integral transform under the key's predictive
    distribution from the fitting seeds: Student's t on the key's scale, or the fitted
    beta-binomial (randomised at the count, seed 0). Uniform on [0, 1] when the model holds."""
    if key == "misses":
        a, b = fit_beta_binomial(fitting, eval_n)
        u = np.random.default_rng(0).uniform(size=len(new))
        below = stats.betabinom.cdf(np.asarray(new) - 1, eval_n, a, b)
        return below + u * stats.betabinom.pmf(np.asarray(new), eval_n, a, b)
    y, z = to_scale(key, fitting, floor), to_scale(key, new, floor)
    n, m, s = len(y), float(np.mean(y)), float(np.std(y, ddof=1))
    return stats.t.cdf((z - m) / (s * math.sqrt(1 + 1 / n)), df=n - 1)


def pit_calibration(pits: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    """Per key: the Kolmogorov-Smirnov distance of the PITs from uniform, and its p-value."""
    out = {}
    for key, values in pits.items():
        found = stats.kstest(np.asarray(values, float), "uniform")
        out[key] = {"ks": float(found.statistic), "p": float(found.pvalue), "n": len(values)}
    return out


def compare_ensembles(
    reference: pd.DataFrame, other: pd.DataFrame, floor: float, alpha: float = 0.05
) -> dict[str, Any]:
    """Location (Welch's t) and spread (Brown-Forsythe) of each key on its scale, Holm over
    all the tests at alpha: `pool` when none is rejected."""
    rows, p_values = [], []
    for key in KEYS:
        a = to_scale(key, reference[key].dropna().to_numpy(float), floor)
        b = to_scale(key, other[key].dropna().to_numpy(float), floor)
        location = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
        spread = float(stats.levene(a, b, center="median").pvalue)
        shift = (np.mean(b) - np.mean(a)) / np.std(a, ddof=1)
        rows.append({"key": key, "shift_sd": float(shift), "p_location": location,
                     "p_spread": spread})  # fmt: skip
        p_values += [location, spread]
    order = np.argsort(p_values)
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    for i, row in enumerate(rows):
        row["location_differs"], row["spread_differs"] = rejected[2 * i], rejected[2 * i + 1]
    return {"keys": rows, "pool": not any(rejected), "alpha": alpha}


def failure_interval(failures: int, draws: int) -> tuple[float, float]:
    """The exact 95 % interval of a false-alarm rate from held-out draws."""
    ci = stats.binomtest(failures, draws).proportion_ci(0.95, method="exact")
    return float(ci.low), float(ci.high)
