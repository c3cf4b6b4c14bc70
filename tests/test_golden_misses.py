"""The misses' bound (tools/golden/misses.py): the maximum-likelihood fit is
the likelihood's maximum and recovers a known model, and the calibrated bound keeps its mean
exceedance at the share where the plain plug-in does not, at v3's fit and at a heavier
overdispersion."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, special, stats

from conftest import ROOT
from tools.golden import misses as method

N = method.N
FITTING = pd.read_csv(ROOT / "config/golden/v3/fitting.csv")
V3_80 = FITTING.loc[FITTING["seed"] >= 64, "misses"].to_numpy(int)
V3_144 = FITTING["misses"].to_numpy(int)
# v3's 80 seeds, fitted by maximum likelihood (misses_v3data.md), and the heavy end of rho's
# profile-likelihood 95 % interval there
MU_80, RHO_80, RHO_80_HEAVY = 0.001875, 0.0011518, 0.00222


# The model and its fit ------------------------------------------------------------------------


def test_the_product_form_is_scipys_beta_binomial_and_binomial():
    mu, phi = np.array([0.002, 0.3, 0.002]), np.array([0.003, 2.0, 0.0])
    found = np.exp(method.log_pmf(N, mu, phi))
    a, b = method.shape_of(mu[:2], phi[:2])
    x = np.arange(N + 1)
    expected = [stats.betabinom.pmf(x, N, a[i], b[i]) for i in range(2)]
    expected.append(stats.binom.pmf(x, N, mu[2]))
    np.testing.assert_allclose(found, expected, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(
        method.survival(N, mu, phi)[:, 5], [1 - e[:6].sum() for e in expected]
    )


def test_maximum_likelihood_recovers_a_known_model_and_beats_moments():
    a, b = method.shape_of(MU_80, method.phi_of(RHO_80))
    x = stats.betabinom.rvs(N, a, b, size=20_000, random_state=np.random.default_rng(1))
    fit = method.fit_ml(x[None, :])
    a_hat, b_hat = method.shape_of(fit.mu[0], fit.phi[0])
    assert a_hat == pytest.approx(a, rel=0.08) and b_hat == pytest.approx(b, rel=0.08)
    low, high = method.rho_interval(x[None, :], fit=fit)
    assert low[0] < RHO_80 < high[0]
    for sample in (x, V3_80, V3_144):
        ml = method.fit_ml(sample[None, :])
        ml_lik = method.full_log_likelihood(sample, N, ml.mu[0], ml.phi[0])
        moments = (m[0] for m in method.moments_start(sample[None, :], N))
        assert ml_lik >= method.full_log_likelihood(sample, N, *moments)


def test_the_fit_is_the_maximum_scipy_finds():
    """Newton's fit against Nelder-Mead from several starts, on small ensembles."""
    x = method.draw(N, MU_80, method.phi_of(RHO_80), (12, 40), np.random.default_rng(2))[0]
    fit = method.fit_ml(x)
    for row, mu, phi in zip(x, fit.mu, fit.phi, strict=True):

        def minus(theta, row=row):
            return -method.full_log_likelihood(row, N, special.expit(theta[0]), np.exp(theta[1]))

        best = max(
            -optimize.minimize(minus, [special.logit(row.mean() / N), s], method="Nelder-Mead",
                               options={"xatol": 1e-9, "fatol": 1e-12}).fun
            for s in (-9.0, -6.0, -3.0)
        )  # fmt: skip
        assert method.full_log_likelihood(row, N, mu, phi) >= best - 1e-7


# The bound, simulated from known models -------------------------------------------------------


@pytest.mark.parametrize("rho", [RHO_80, RHO_80_HEAVY], ids=["v3_fit", "heavier"])
def test_the_calibrated_bound_keeps_its_mean_exceedance_at_the_share(rho):
    """Fitting ensembles of 80 from a known beta-binomial, each bound calibrated in the loop
    (at its fit and its rho's heavy end): the mean exact exceedance is at most the share
    within Monte-Carlo error; the plug-in at the share, uncalibrated, exceeds it."""
    rates = method.conditional_rates(MU_80, method.phi_of(rho), 80, fits=100, draws=100, seed=5)
    used, plain = method.spread(rates["exceed_used"]), method.spread(rates["exceed_nominal"])
    assert used["mean"] - 2 * used["se"] <= 1, used
    assert plain["mean"] - 2 * plain["se"] > 1, plain  # the check can fail


# Edges -----------------------------------------------------------------------------------------


def test_an_all_zero_ensemble_is_the_binomial_at_half_a_count():
    found = method.misses_bound(np.zeros(80, int), draws=100)
    assert found["mu"] == pytest.approx(0.5 / (80 * N)) and found["rho"] == 0
    assert found["rho_interval"][0] == 0 and np.isnan(found["rho_interval"][1])
    assert found["high"] == 1 and found["attained"]  # one miss passes, two FAIL


def test_an_ensemble_that_is_not_overdispersed_is_the_binomial():
    fit = method.fit_ml(np.full((1, 80), 2))
    assert fit.phi[0] == 0 and fit.mu[0] == pytest.approx(0.002)
    assert method.rho_interval(np.full((1, 80), 2), fit=fit)[0][0] == 0


def test_a_single_large_count_gives_a_finite_fit_and_a_flagged_bound():
    """One seed of 40 among 79 zeros: heavy overdispersion, whose tail no refit sees; the
    bound covers the count and the calibration's shortfall is reported, not raised."""
    x = np.r_[np.zeros(79, int), 40]
    found = method.misses_bound(x, draws=100)
    low, high = found["rho_interval"]
    assert 0 < low < found["rho"] < high < 1
    assert 40 <= found["high"] <= N
    assert found["attained"] == (max(found["exceed_fit"], found["exceed_heavy"]) <= method.SHARE)
    alone = method.misses_bound(np.array([40]), draws=100)  # one seed: the binomial
    assert alone["rho"] == 0 and alone["high"] >= 40
