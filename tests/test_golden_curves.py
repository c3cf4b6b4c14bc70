"""Golden check v2's method (tcrformer.chapters.ensemble.curves), on draws whose truth is
known: the tolerance bounds cover what they say, the floor fails what no correct run can
reach, the beta-binomial bound and the calibration see their models, and two ensembles are
pooled only when they agree."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tcrformer.chapters.ensemble import curves


def test_a_window_mean_is_the_mean_over_its_steps():
    curve = np.arange(1, 3001, dtype=float)  # the loss at step t is t
    assert curves.window_mean(curve, (1001, 3000)) == pytest.approx(2000.5)
    assert curves.window_mean(curve, (401, 600)) == pytest.approx(500.5)
    with pytest.raises(ValueError, match="no window"):
        curves.window_mean(curve[:2000], curves.WINDOW)


@pytest.mark.parametrize("n", [16, 32])
def test_the_normal_tolerance_bound_covers_what_it_says(n):
    """Over many fitting ensembles of n normal draws, the bound m + k s lies above the true
    (1 - alpha) quantile in 95 % of them: the stated confidence, not more, not less."""
    alpha, rng = 0.0025, np.random.default_rng(0)
    samples = rng.normal(size=(4000, n))
    k = curves.normal_tolerance_factor(n, alpha)
    bounds = samples.mean(1) + k * samples.std(1, ddof=1)
    covered = np.mean(bounds >= stats.norm.ppf(1 - alpha))
    assert covered == pytest.approx(curves.CONFIDENCE, abs=0.012)
    naive = samples.mean(1) + stats.norm.ppf(1 - alpha) * samples.std(1, ddof=1)
    assert np.mean(naive >= stats.norm.ppf(1 - alpha)) < 0.6  # a plug-in bound would not


def test_a_band_fails_above_its_bound_below_the_floor_and_when_not_finite():
    band = curves.ToleranceBand("loss_window", "upper", 0.66, floor=0.611)
    assert not band.fails(0.64)
    assert band.fails(0.67) and band.fails(0.05) and band.fails(math.nan)  # dropped smoothing
    lower = curves.ToleranceBand("antidiagonal", "lower", 0.87)
    assert lower.fails(0.6) and not lower.fails(0.95)


def test_the_beta_binomial_fit_and_its_bound():
    rng = np.random.default_rng(1)
    misses = stats.betabinom.rvs(1000, 0.8, 600, size=400, random_state=rng)
    a, b = curves.fit_beta_binomial(misses, 1000)
    assert a / (a + b) == pytest.approx(0.8 / 600.8, rel=0.15)
    few = misses[:32]
    strict = curves.beta_binomial_bound(few, 1000, 0.0025, seed=0)
    loose = curves.beta_binomial_bound(few, 1000, 0.05, seed=0)
    assert strict >= loose >= np.median(few)
    assert strict >= stats.betabinom.ppf(1 - 0.0025, 1000, 0.8, 600) * 0.8


def test_the_pit_is_uniform_under_the_model_and_not_when_shifted():
    rng = np.random.default_rng(2)
    fitting, held = rng.normal(0.64, 0.003, 32), rng.normal(0.64, 0.003, 400)
    good = curves.pit("loss_window", fitting, held, 0.611, 1000)
    assert curves.pit_calibration({"loss_window": good})["loss_window"]["p"] > 0.01
    shifted = curves.pit("loss_window", fitting, held + 0.004, 0.611, 1000)
    assert curves.pit_calibration({"loss_window": shifted})["loss_window"]["p"] < 1e-6


def frame(rng, n, shift=0.0, spread=1.0):
    return pd.DataFrame({
        "loss_window": rng.normal(0.64 + shift * 0.003, 0.003 * spread, n),
        "loss_early": 0.611 + np.exp(rng.normal(math.log(0.4), 0.1, n)),
        "misses": rng.poisson(2, n).astype(float),
        "antidiagonal": 1 / (1 + np.exp(-rng.normal(3.0, 0.3, n))),
    })  # fmt: skip


def test_two_ensembles_are_pooled_only_when_they_agree():
    rng = np.random.default_rng(3)
    reference = frame(rng, 32)
    assert curves.compare_ensembles(reference, frame(rng, 16), 0.611)["pool"]
    moved = curves.compare_ensembles(reference, frame(rng, 16, shift=2.0), 0.611)
    assert not moved["pool"] and moved["keys"][0]["location_differs"]
    wider = curves.compare_ensembles(reference, frame(rng, 16, spread=4.0), 0.611)
    assert not wider["pool"] and wider["keys"][0]["spread_differs"]


def test_the_fitted_bands_judge_one_sided_and_a_fault_that_trains_fails(monkeypatch):
    """A doubled learning rate moved the window mean by about +0.017 in the review of v1,
    5 to 8 seed-to-seed standard deviations of the window mean: the v2 band sees it."""
    monkeypatch.setattr(curves, "BOOTSTRAP", 200)
    rng = np.random.default_rng(4)
    seeds = frame(rng, 32)
    bands = curves.fit(seeds, 0.01, 0.611, 1000)
    typical = seeds.median().to_dict()
    assert curves.judge(bands, typical) == []
    assert curves.judge(bands, {**typical, "loss_window": typical["loss_window"] + 0.017}) == [
        "loss_window"
    ]
    assert curves.judge(bands, {**typical, "loss_window": typical["loss_window"] - 0.017}) == []
    assert curves.judge(bands, {**typical, "antidiagonal": 0.5}) == ["antidiagonal"]
    assert curves.failure_interval(1, 32) == pytest.approx((0.00079, 0.1622), abs=1e-4)


def test_the_ensemble_commits_every_curve_and_each_seeds_statistics():
    steps = np.arange(1, 3001)
    losses = pd.concat([pd.DataFrame({"seed": s, "step": steps, "loss": 0.6 + s + 1 / steps})
                        for s in (3, 5)])  # fmt: skip
    wide = curves.curves_table(losses)
    assert list(wide.columns) == ["step", "seed3", "seed5"] and len(wide) == 3000
    per_seed = {s: {"r.cdr3_correct": s == 3, "r.heldout_exact": 990 + s,
                    "r.cross_attention_antidiagonal_mean": 0.9} for s in (3, 5)}  # fmt: skip
    table = curves.statistics_table(wide, per_seed, "r", 1000).set_index("seed")
    assert table.loc[3, "loss_window"] == pytest.approx(3.6 + np.mean(1 / steps[1000:]))
    assert table.loc[5, "misses"] == 5 and math.isnan(table.loc[5, "antidiagonal"])
    short = curves.seed_statistics(np.ones(500), 999, 1000, 0.9)
    assert math.isnan(short["loss_window"]) and math.isnan(short["loss_early"])
