"""The held-out validation: counts beyond bands, judged against a parametric bootstrap of the
whole procedure.

    python -m tools.golden validate HELDOUT [--replicates B] [--seed S] [--out FOLDER]

HELDOUT: the held-out ensemble's folder (results/<run>/ensemble) or its statistics table. The
fitting seeds' statistics and the committed bands are FOLDER's fitting.csv and bands.yaml
(config/golden/v4/, written by `fit`); the record goes to FOLDER/validation.yaml, the held-out
statistics to FOLDER/heldout/.

The held-out seeds, registered with the design (config/golden/v4/design.md), are judged once,
after the method is frozen. Three bands of the frozen method are made on the 80 fitting seeds,
at a per-side share each: the committed band (the golden file's budget over the 9 one-sided
tests), the 5 %-family band (0.05 / 9) and the 5 % per-side band (the body of each model),
as frozen.fit_bands makes them.

Why a bootstrap. A band is one draw of a random band: its rate given the fit varies from fit
to fit (the guarantee is marginal over fitting ensembles), so the count of 100 held-out seeds
beyond it is overdispersed against Binomial(100, share). Tested against that binomial, a
correct method is rejected far more often than the level (validation_null.md). Each null
distribution here is instead that of the whole procedure under a fitted model:

    the model   every key's law fitted on the fitting seeds, as the method's guarantee states
                it: a loss window a truncated Box-Cox normal at lam-hat by the untruncated
                likelihood on the relative grid (the method's own lam), mean and SD on that
                scale; the
                anti-diagonal normal on logit(a); the misses beta-binomial by maximum
                likelihood. The keys are drawn jointly through a Gaussian copula whose
                correlation is that of the fitting seeds' normal scores (ranks, so a
                monotone scale leaves it alone; pairwise, made positive definite): keys move
                together within a seed (loss_early with loss_late, for one), and the pooled
                count's null must have that variance, not an independent sum's.
    a replicate draw 80 fitting seeds from the model, make the three bands exactly as the
                method does (lam refitted on the same grid, the same multipliers; the
                misses refitted; the anti-diagonal's multipliers and the misses' calibrated
                levels held at the fitting data's: their nested calibrations cost seconds a
                band and replicate), draw 100 held-out seeds, count per side the seeds
                beyond each band.

REPLICATES of them at validation (a few seconds: the refits are vectorised). A p-value is the
bootstrap's upper tail with the +1 correction, (1 + #{null >= observed}) / (1 + B).

What decides, fixed before any held-out seed is read; the validation FAILs if either rejects,
each test at PRIMARY_LEVEL = 2.5 %, so the two together at most 5 % (Bonferroni; they are
positively dependent, and the simulation's joint rate is in validation_null.md):

    (i)  pooled: the count over the 9 sides beyond the 5 %-family bands, its bootstrap p;
         the critical count (the smallest that rejects) is reported;
    (ii) per side: the count beyond the 5 % per-side band, a bootstrap p per side, Holm over
         the 9 sides (tcrformer.stats.holm).

Everything else is descriptive: each count's exact binomial p against its nominal share (the
reading that ignores the fitting ensemble's variation), each side's count beyond the committed
band with its bootstrap p, and the family-wise FAILs with the exact one-sided upper bound on
their rate ("consistent with up to x %") and their bootstrap null.

Held-out values: NaN is a key not judged for that seed (never beyond; the bootstrap leaves the
same seeds out), a window mean at or below the floor lies beyond its lower side.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import linalg, special, stats

from tcrformer.stats.binary import exact_binomial_interval
from tcrformer.stats.holm import holm, holm_levels
from tcrformer.training import judged

from tools.golden import laws, misses, records, scale
from tools.golden import method as frozen

KEYS = (*judged.WINDOWS, "antidiagonal", "misses")


def sides_of(keys) -> list[tuple[str, str]]:
    """The judged one-sided tests of these keys, (key, 'low' | 'high'), in order."""
    sides = {"both": ("low", "high"), "upper": ("high",)}
    return [(key, side) for key in keys for side in sides[judged.SIDES[key]]]


SIDES = sides_of(KEYS)
TESTS = len(SIDES)  # 9, the golden file's budget's split
LEVEL = frozen.LEVEL  # the 5 %-family and 5 % per-side bands' level
PRIMARY_LEVEL = 0.025  # each primary test's: the validation's false FAIL at most 5 %
BINOMIAL_LEVEL = 0.05  # the binomial readings' (descriptive)
REPLICATES = 9999  # bootstrap replicates at validation
BANDS = frozen.BANDS
FITTING_SEEDS, HELDOUT_SEEDS = frozen.N_FIT, 100


def default_multipliers() -> dict[str, dict[str, tuple[float, float]]]:
    """Per band and key, (k_low, k_high): the windows' method.WINDOW_K; the anti-diagonal's
    t at the margin on both sides (validate replaces it with the fitting data's, whose lower
    side is calibrated at their skewness)."""
    found = {}
    for band in BANDS:
        k = frozen.WINDOW_K[band]
        t = float(stats.t.ppf(1 - frozen.MARGIN * frozen.share(band), FITTING_SEEDS - 1))
        found[band] = {**{key: (k, k) for key in judged.WINDOWS}, "antidiagonal": (t, t)}
    return found


@dataclass(frozen=True)
class Method:
    """The frozen method as the bootstrap reruns it: the multipliers per band and key, the
    relative grid lam sd(log x) is sought on, the golden file's budget, the misses'
    calibration draws; the keys judged (all of KEYS; fewer only in tests, the shares still
    the 9 sides')."""

    multipliers: Mapping[str, Mapping[str, tuple[float, float]]] = field(
        default_factory=default_multipliers
    )
    grid: np.ndarray = field(default_factory=lambda: scale.RELATIVE_GRID)
    budget: float = frozen.BUDGET
    misses_draws: int = field(default_factory=lambda: frozen.MISSES_DRAWS)
    keys: tuple[str, ...] = KEYS

    def share(self, band: str) -> float:
        """A band's per-side share."""
        return frozen.share(band, self.budget)


# The keys' scales -----------------------------------------------------------------------------


def to_scale(key: str, values, floor: float) -> np.ndarray:
    """A key's statistics on the scale its bands are made on: log(mean - floor) for a window
    (-inf at or below the floor), logit(a) for the anti-diagonal, the count for the misses."""
    x = np.asarray(values, float)
    if key == "antidiagonal":
        return scale.logit(x)
    if key == "misses":
        return x
    t = np.where(np.isnan(x), np.nan, -np.inf)
    above = x > floor
    t[above] = np.log(x[above] - floor)
    return t


def from_scale(key: str, t, floor: float) -> np.ndarray:
    """to_scale's inverse: a key's values in its units from its scale."""
    t = np.asarray(t, float)
    if key == "antidiagonal":
        return special.expit(t)
    return t if key == "misses" else floor + np.exp(t)


def columns_on_scale(table: pd.DataFrame, floor: float, keys=KEYS) -> dict[str, np.ndarray]:
    """A statistics table's keys on their scales (key -> (seeds,))."""
    return {key: to_scale(key, table[key].to_numpy(float), floor) for key in keys}


def beyond(values: np.ndarray, bound: np.ndarray, side: str) -> np.ndarray:
    """Which values lie beyond one side's bound (NaN: not judged, never beyond; -inf, a window
    at the floor, beyond every lower side)."""
    with np.errstate(invalid="ignore"):
        if side == "low":
            return (values < bound) | (values == -np.inf)
        return values > bound


# The bands, vectorised over fitting ensembles -------------------------------------------------


def misses_levels(x: np.ndarray, method: Method, seed: int = 0) -> dict[str, float]:
    """The misses' calibrated nominal level per band on one fitting ensemble: the smaller of
    the fit's and the heavy end's (misses.misses_bounds uses the larger bound, the plug-in at
    the smaller level)."""
    levels = {}
    for band in BANDS:
        share, draws = method.share(band), method.misses_draws
        found = misses.misses_bounds(x[None, :], misses.N, share, draws, seed)
        levels[band] = float(min(found.g_fit[0], found.g_heavy[0]))
    return levels


def misses_tail(x: np.ndarray, chunk: int = 2000) -> np.ndarray:
    """P(X > c), c = 0..n, under each row's maximum-likelihood fit: (E, n + 1)."""
    fit = misses.fit_ml(x.astype(int), misses.N)
    parts = [
        misses.survival(misses.N, fit.mu[i : i + chunk], fit.phi[i : i + chunk])
        for i in range(0, len(x), chunk)
    ]
    return np.concatenate(parts)


def key_bands(key: str, t: np.ndarray, method: Method, levels: Mapping[str, float]) -> dict:
    """One key's three bands on its scale per fitting ensemble: band -> (low (E,), high (E,)).
    t: (E, n). A window: lam-hat by the untruncated likelihood on the relative grid, then
    m -+ k s sqrt(1 + 1/n) (scale.ScaleFit.bounds); the anti-diagonal the same on logit(a); the
    misses the plug-in at each band's level on the refit."""
    if key == "misses":
        tail = misses_tail(t)
        no_low, each = np.full(len(t), -np.inf), np.ones(len(t))
        return {
            band: (no_low, misses.plug_in_bound_each(tail, levels[band] * each)) for band in BANDS
        }
    if key == "antidiagonal":
        fit = scale.fixed_fit(t, None)
    else:
        fit = scale.refit_relative(t, method.grid)
    return {band: fit.bounds(*method.multipliers[band][key]) for band in BANDS}


def side_counts(bands: dict, heldout: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per ensemble and side, the held-out seeds beyond it: (E, 9). bands: key -> (low, high);
    heldout: key -> (E, seeds)."""
    found = []
    for key, side in sides_of(bands):
        bound = bands[key][0 if side == "low" else 1]
        found.append(beyond(heldout[key], np.asarray(bound, float)[:, None], side).sum(axis=1))
    return np.stack(found, axis=1)


def failed_seeds(bands: dict, heldout: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per ensemble, the held-out seeds beyond any side (a FAIL): (E,)."""
    failed = 0
    for key, side in sides_of(bands):
        bound = np.asarray(bands[key][0 if side == "low" else 1], float)[:, None]
        failed = failed | beyond(heldout[key], bound, side)
    return np.sum(failed, axis=1)


def tally(fitting, heldout, method: Method, levels) -> dict[str, np.ndarray]:
    """The bands of every fitting ensemble and what the held-out seeds do with them: per band
    the side counts (E, 9), and 'fails', the seeds beyond any committed side (E,)."""
    bands = {key: key_bands(key, fitting[key], method, levels) for key in method.keys}
    by_band = {band: {key: bands[key][band] for key in method.keys} for band in BANDS}
    found = {band: side_counts(by_band[band], heldout) for band in BANDS}
    return {**found, "fails": failed_seeds(by_band["committed"], heldout)}


# The generating model -------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """A continuous key's law: laws.Model on its scale, t = shift + the model's t."""

    model: laws.Model
    shift: float = 0.0

    def quantile(self, z: np.ndarray) -> np.ndarray:
        """t at the normal deviate z (increasing in z): the truncated law's quantile."""
        return self.shift + self.model.quantile(z)

    def moved(self, sds: float) -> Scale:
        """The law moved by `sds` of its SDs on its scale (a fault)."""
        return replace(self, model=self.model.moved(sds))

    def in_sds(self, t: np.ndarray) -> np.ndarray:
        """Values in t on the law's scale, in its SDs from its centre mu."""
        return self.model.to_e(np.asarray(t, float) - self.shift)

    def describe(self) -> dict:
        m = self.model
        return {"lambda": m.lam, "mu": m.mu, "sigma": m.sigma, "shift": self.shift}


@dataclass(frozen=True)
class Count:
    """The misses' law: beta-binomial(n, mu, phi)."""

    mu: float
    phi: float
    n: int = misses.N

    def quantile(self, z: np.ndarray) -> np.ndarray:
        """The count at the normal deviate z: the smallest c with P(X > c) <= P(Z > z)."""
        tail = misses.survival(self.n, self.mu, self.phi)[0]
        return np.searchsorted(-tail, -special.ndtr(-z), side="left").astype(float)

    @property
    def sd(self) -> float:
        n, mu, rho = self.n, self.mu, float(misses.rho_of(self.phi))
        return math.sqrt(n * mu * (1 - mu) * (1 + (n - 1) * rho))

    def moved(self, sds: float) -> Count:
        """mu moved so that the mean count moves by `sds` of its SDs (kept in (0, 1))."""
        mu = self.mu + sds * self.sd / self.n
        return replace(self, mu=min(max(mu, 1e-12), 1 - 1e-12))

    def in_sds(self, x: np.ndarray) -> np.ndarray:
        """Counts in the law's SDs from its mean."""
        return (np.asarray(x, float) - self.n * self.mu) / self.sd

    def describe(self) -> dict:
        return {"mu": self.mu, "phi": self.phi, "rho": float(misses.rho_of(self.phi))}


@dataclass(frozen=True)
class Generating:
    """Every key's fitted law and the keys' copula correlation (in the laws' order)."""

    laws: Mapping[str, Scale | Count]
    correlation: np.ndarray

    def draw(self, seeds: int, size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`size` ensembles of `seeds` seeds, the keys jointly: key -> (size, seeds)."""
        root = linalg.cholesky(self.correlation, lower=True)
        z = rng.standard_normal((size, seeds, len(self.laws))) @ root.T
        return {key: law.quantile(z[..., i]) for i, (key, law) in enumerate(self.laws.items())}

    def moved(self, key: str, sds: float) -> Generating:
        return replace(self, laws={**self.laws, key: self.laws[key].moved(sds)})


def normal_scores(x: np.ndarray) -> np.ndarray:
    """Each finite value's normal score, Phi^-1((rank - 1/2) / n) (ties averaged); NaN kept."""
    scores, ok = np.full(len(x), np.nan), np.isfinite(x)
    scores[ok] = stats.norm.ppf((stats.rankdata(x[ok]) - 0.5) / ok.sum())
    return scores


def score_correlation(data: Mapping[str, np.ndarray], keys) -> np.ndarray:
    """The keys' correlation of normal scores, pairwise over the seeds where both are finite
    (0 where a key does not vary), made positive definite (eigenvalues clipped, unit diagonal)."""
    scores = [normal_scores(np.asarray(data[key], float)) for key in keys]
    r = np.eye(len(keys))
    for i in range(len(keys)):
        for j in range(i):
            a, b = scores[i], scores[j]
            both = np.isfinite(a) & np.isfinite(b)
            ok = both.sum() > 2 and a[both].std() > 0 and b[both].std() > 0
            r[i, j] = r[j, i] = np.corrcoef(a[both], b[both])[0, 1] if ok else 0.0
    values, vectors = np.linalg.eigh(r)
    r = (vectors * np.maximum(values, 1e-6)) @ vectors.T
    d = np.sqrt(np.diag(r))
    return r / np.outer(d, d)


def fit_law(key: str, t: np.ndarray, method: Method) -> Scale | Count:
    """One key's law, fitted on its finite fitting values on its scale."""
    t = t[np.isfinite(t)]
    if key == "misses":
        fit = misses.fit_ml(t.astype(int)[None, :], misses.N)
        return Count(float(fit.mu[0]), float(fit.phi[0]))
    if key == "antidiagonal":
        return Scale(laws.Model(lam=None, mu=float(t.mean()), sigma=float(t.std(ddof=1))))
    lam = float(scale.refit_relative(t[None, :], method.grid).lam[0])
    return Scale(laws.moment_models(t, [lam])[0], float(t.mean()))


def fit_generating(fitting: Mapping[str, np.ndarray], method: Method) -> Generating:
    """The bootstrap's model, fitted on the fitting seeds (key -> values on its scale)."""
    laws = {key: fit_law(key, np.asarray(fitting[key], float), method) for key in method.keys}
    return Generating(laws, score_correlation(fitting, method.keys))


# The bootstrap --------------------------------------------------------------------------------


def masked(draws: Mapping[str, np.ndarray], keep: Mapping[str, np.ndarray]) -> dict:
    """Each key's draws at the seeds the observed data judge (key -> (E, judged))."""
    return {key: values[:, keep[key]] for key, values in draws.items()}


def null_tallies(
    model: Generating, method: Method, levels, keep, replicates: int, rng, chunk: int = 500
) -> dict[str, np.ndarray]:
    """`replicates` runs of the whole procedure under the model: 80 fitting seeds drawn, the
    three bands made as the method makes them, 100 held-out seeds drawn and counted (tally).
    keep: ('fitting' | 'heldout') -> key -> which seeds the observed data judge."""
    parts = []
    for start in range(0, replicates, chunk):
        size = min(chunk, replicates - start)
        fitting = masked(model.draw(seeds_of(keep["fitting"]), size, rng), keep["fitting"])
        heldout = masked(model.draw(seeds_of(keep["heldout"]), size, rng), keep["heldout"])
        parts.append(tally(fitting, heldout, method, levels))
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def seeds_of(keep: Mapping[str, np.ndarray]) -> int:
    """The seeds of an ensemble (the length of its keys' masks): the bootstrap draws as many
    as were observed."""
    return len(next(iter(keep.values())))


def upper_p(observed, null: np.ndarray) -> np.ndarray:
    """The bootstrap's p of an excess, (1 + #{null >= observed}) / (1 + B), per column."""
    null = np.asarray(null)
    return (1 + np.sum(null >= np.asarray(observed), axis=0)) / (1 + len(null))


def critical_count(null: np.ndarray, level: float) -> int:
    """The smallest count whose bootstrap p is at most `level`."""
    c = int(np.max(null)) + 1
    while c > 0 and upper_p(c - 1, null) <= level:
        c -= 1
    return c


# The tests ------------------------------------------------------------------------------------


def excess_p(count, trials, share) -> np.ndarray:
    """P(X >= count) for X ~ Binomial(trials, share): the exact p of an excess."""
    return stats.binom.sf(np.asarray(count) - 1, trials, share)


def binomial_critical(trials: int, share: float, level: float = BINOMIAL_LEVEL) -> int:
    """The smallest count whose exact binomial p of an excess is at most `level`."""
    c = int(stats.binom.isf(level, trials, share)) + 1
    while excess_p(c - 1, trials, share) <= level:
        c -= 1
    return c


def pooled_test(observed: np.ndarray, null: np.ndarray, seeds: int, share: float) -> dict:
    """(i): the count over every side beyond the 5 %-family bands, against the bootstrap's
    null of that sum; the binomial reading beside it. observed (9,), null (B, 9)."""
    k, sums = int(np.sum(observed)), np.sum(null, axis=1)
    p = float(upper_p(k, sums))
    return {
        "beyond": k,
        "null_mean": float(sums.mean()),
        "critical": critical_count(sums, PRIMARY_LEVEL),
        "p": p,
        "level": PRIMARY_LEVEL,
        "rejects": p <= PRIMARY_LEVEL,
        "binomial_p": float(excess_p(k, seeds, share)),
        "binomial_critical": binomial_critical(seeds, share),
    }


def per_side_test(observed, null: np.ndarray, seeds, share: float, sides=SIDES) -> list[dict]:
    """(ii): each side's count beyond its 5 % per-side band, its bootstrap p, Holm over the
    sides; the exact binomial p beside it. observed (9,), null (B, 9), seeds (9,)."""
    p = [float(v) for v in upper_p(observed, null)]
    levels, rejects = holm_levels(p, PRIMARY_LEVEL), holm(p, PRIMARY_LEVEL)
    rows = []
    for i, (key, side) in enumerate(sides):
        k, n = int(observed[i]), int(seeds[i])
        rows.append(
            {
                "key": key,
                "side": side,
                "beyond": k,
                "seeds": n,
                "share": share,
                "null_mean": float(null[:, i].mean()),
                "p": p[i],
                "holm_level": levels[i],
                "rejects": rejects[i],
                "binomial_p": float(excess_p(k, n, share)),
            }
        )
    return rows


def binomial_readings(record: dict) -> dict:
    """The two tests as they read with each count Binomial(seeds, share), the share taken as
    exact, at 5 % each (descriptive: they ignore the fitting ensemble's variation, and
    over-reject a correct method)."""
    p = [row["binomial_p"] for row in record["per_side"]]
    return {
        "level": BINOMIAL_LEVEL,
        "pooled_rejects": record["pooled"]["binomial_p"] <= BINOMIAL_LEVEL,
        "per_side_rejects": any(holm(p, BINOMIAL_LEVEL)),
    }


def committed_counts(observed, null: np.ndarray, seeds, share: float, sides=SIDES) -> list[dict]:
    """Each side's count beyond the committed band, its bootstrap and binomial p."""
    p = upper_p(observed, null)
    return [
        {
            "key": key,
            "side": side,
            "beyond": int(observed[i]),
            "seeds": int(seeds[i]),
            "share": share,
            "p": float(p[i]),
            "binomial_p": float(excess_p(observed[i], seeds[i], share)),
        }
        for i, (key, side) in enumerate(sides)
    ]


def family_wise(fail: int, seeds: int, confidence: float = 0.95) -> dict[str, float]:
    """FAILs of n seeds and the exact one-sided upper confidence bound on the rate: the
    upper end of the two-sided Clopper-Pearson interval at 1 - 2 (1 - confidence)."""
    upper = exact_binomial_interval(int(fail), seeds, 1 - 2 * (1 - confidence))[1]
    return {"fail": int(fail), "seeds": seeds, "rate": fail / seeds, "upper": upper}


def observed_tally(fitting, heldout, keep, method: Method, levels) -> dict[str, np.ndarray]:
    """tally of the observed seeds: one fitting ensemble and its held-out seeds."""
    fitting = masked({key: v[None, :] for key, v in fitting.items()}, keep["fitting"])
    heldout = masked({key: v[None, :] for key, v in heldout.items()}, keep["heldout"])
    return tally(fitting, heldout, method, levels)


def judge(fitting, heldout, method: Method, levels, replicates: int, rng) -> dict:
    """The record from data on the keys' scales (key -> fitting (80,), held-out (100,)) and
    the misses' levels; `replicates` bootstrap replicates drawn with rng."""
    fitting = {key: np.asarray(fitting[key], float) for key in method.keys}
    heldout = {key: np.asarray(heldout[key], float) for key in method.keys}
    keep = {
        "fitting": {key: np.isfinite(v) for key, v in fitting.items()},
        "heldout": {key: ~np.isnan(v) for key, v in heldout.items()},
    }
    seen = observed_tally(fitting, heldout, keep, method, levels)
    model = fit_generating(fitting, method)
    null = null_tallies(model, method, levels, keep, replicates, rng)
    sides = sides_of(method.keys)
    seeds = np.array([keep["heldout"][key].sum() for key, _ in sides])
    share = method.share
    fails = int(seen["fails"][0])
    record = {
        "pooled": pooled_test(seen["family"][0], null["family"], seeds.sum(), share("family")),
        "per_side": per_side_test(
            seen["per_side"][0], null["per_side"], seeds, share("per_side"), sides
        ),
        "committed": committed_counts(
            seen["committed"][0], null["committed"], seeds, share("committed"), sides
        ),
        "family_wise": {
            **family_wise(fails, seeds_of(keep["heldout"])),
            "null_mean": float(null["fails"].mean()),
            "p": float(upper_p(fails, null["fails"])),
        },
        "replicates": replicates,
        "generating": {
            "laws": {key: law.describe() for key, law in model.laws.items()},
            "correlation": model.correlation.round(4).tolist(),
            "misses_levels": dict(levels),
        },
    }
    record["fails"] = record["pooled"]["rejects"] or any(r["rejects"] for r in record["per_side"])
    record["binomial"] = binomial_readings(record)
    return record


def validate(
    fitting: Mapping[str, np.ndarray],
    heldout: Mapping[str, np.ndarray],
    floor: float,
    method: Method | None = None,
    replicates: int = REPLICATES,
    seed: int = 0,
) -> dict:
    """The whole record. fitting, heldout: key -> the seeds' statistics as judged (window
    means in loss units, the anti-diagonal, the misses count; one array per key, seeds
    aligned, NaN where a key is not judged). The anti-diagonal's multipliers and the misses'
    levels are calibrated on the fitting seeds as the method calibrates them."""
    method = method or Method()
    if "antidiagonal" in method.keys:
        anti = np.asarray(fitting["antidiagonal"], float)
        anti = anti[np.isfinite(anti)]
        table = {band: dict(keys) for band, keys in method.multipliers.items()}
        for band in BANDS:
            ks = frozen.antidiagonal_multipliers(anti, band, method.budget)
            table[band]["antidiagonal"] = (ks["k_low"], ks["k_high"])
        method = replace(method, multipliers=table)
    fitting = {key: to_scale(key, fitting[key], floor) for key in method.keys}
    heldout = {key: to_scale(key, heldout[key], floor) for key in method.keys}
    x = fitting["misses"]
    levels = misses_levels(x[np.isfinite(x)].astype(int), method, seed)
    record = judge(fitting, heldout, method, levels, replicates, np.random.default_rng(seed))
    record["multipliers"] = {band: {k: list(v) for k, v in keys.items()}
                             for band, keys in method.multipliers.items()}  # fmt: skip
    return record


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


# The command ----------------------------------------------------------------------------------


def committed_agrees(bands_path: Path, fitting: pd.DataFrame, floor: float) -> list[str]:
    """The keys whose committed band is not what the method makes of the fitting seeds now
    (the bands file was edited, or the method changed since the fit): none, or the
    validation would judge bands that are not the method's."""
    committed = records.read_bands(bands_path)
    again = frozen.fit_bands(fitting, floor, bands=("committed",))["committed"]
    differ = []
    for key in judged.KEYS:
        for side in ("low", "high"):
            a, b = getattr(committed[key], side), again[key].get(side)
            same = a is b or (None not in (a, b) and math.isclose(a, b, rel_tol=1e-5))
            if not same:
                differ.append(f"{key} {side}")
    return differ


def columns(table: pd.DataFrame) -> dict[str, np.ndarray]:
    return {key: table[key].to_numpy(float) for key in KEYS}


def validate_command(
    heldout: Path, folder: Path = records.FOLDER, replicates: int = REPLICATES, seed: int = 0
) -> dict:
    """Judge the held-out ensemble once: the primary tests, the committed bands' FAILs per
    seed, the location tests; the record goes to folder/validation.yaml."""
    _, floor, _ = records.recipe_inputs()
    fitting = pd.read_csv(folder / "fitting.csv")
    differ = committed_agrees(folder / "bands.yaml", fitting, floor)
    if differ:
        raise ValueError(f"{folder / 'bands.yaml'}: not the method's bands of fitting.csv "
                         f"({', '.join(differ)}): fit again before validating")  # fmt: skip
    statistics = records.read_statistics(heldout)
    (folder / "heldout").mkdir(parents=True, exist_ok=True)
    statistics.to_csv(folder / "heldout/statistics.csv", index=False)
    if Path(heldout).is_dir():
        pd.read_csv(Path(heldout) / "curves.csv").to_csv(folder / "heldout/curves.csv", index=False)
    record = validate(columns(fitting), columns(statistics), floor, Method(), replicates, seed)
    bands = records.read_bands(folder / "bands.yaml")
    fails = {int(r["seed"]): records.judge(bands, r) for r in statistics.to_dict("records")}
    failed = {seed: " ".join(keys) for seed, keys in fails.items() if keys}
    command = f"python -m tools.golden validate {heldout} --replicates {replicates} --seed {seed}"
    full = {
        "provenance": records.provenance(command),
        "decision": "FAIL" if record["fails"] else "PASS",
        "committed_fails": {**family_wise(len(failed), len(fails)), "seeds_failed": failed},
        **record,
        "location": location_tests(columns(fitting), columns(statistics)),
    }
    records.write_yaml(folder / "validation.yaml", full)
    return full


def main(argv: Sequence[str] | None = None) -> int:
    parser = records.command_parser("validate", __doc__)
    parser.add_argument("heldout", type=Path, help="the held-out ensemble folder or table")
    parser.add_argument("--replicates", type=int, default=REPLICATES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=records.FOLDER, help="bands.yaml's folder")
    args = parser.parse_args(argv)
    record = validate_command(args.heldout, args.out, args.replicates, args.seed)
    pooled, sides = record["pooled"], record["per_side"]
    print(f"pooled: {pooled['beyond']} beyond the 5 %-family bands, p {pooled['p']:.4f}")
    for row in sides:
        print(f"{row['key']} {row['side']}: {row['beyond']} beyond 5 %, p {row['p']:.4f}")
    print(f"committed bands: {record['committed_fails']['fail']} FAIL of "
          f"{record['committed_fails']['seeds']}; validation {record['decision']}")  # fmt: skip
    return 0 if record["decision"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
