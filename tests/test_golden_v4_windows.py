"""Golden check v4's continuous keys (tools/golden_v4/windows.py): candidate (C) keeps each
side's exact exceedance at most its share wherever lam lies in the simulated range, v3's
fixed-lam method does not, and the pieces under them (the truncated likelihood, the Box-Cox
scale's reach, the generating models) are what they claim. CI-sized: every draw is seeded."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, special

from conftest import ROOT
from tools import golden
from tools.golden_v4 import shape, windows

RECORD = ROOT / "config/golden/v4/simulation"
ENSEMBLES = 1500  # fitting ensembles per model in CI (the record used 8,000)
Z = 3.0  # one-sided Monte-Carlo margin: a ratio above 1 + Z SE is an excess


def committed_k() -> dict[str, tuple[float, float]]:
    """(C)'s multipliers per key, as the committed simulation calibrated them."""
    keys = pd.read_csv(RECORD / "keys.csv", comment="#").set_index("key")
    return {key: (row["k_low"], row["k_high"]) for key, row in keys.iterrows()}


def design_model(key: str, lam: float, df: float = math.inf) -> windows.Model:
    return windows.design_models(windows.design_data()[key], [lam], df)[0]


def ratios(model: windows.Model, low: np.ndarray, high: np.ndarray) -> dict[str, tuple]:
    """Per side, the mean exact exceedance over the fits / the share, and its MC SE."""
    found = {}
    for side, bound in (("low", low), ("high", high)):
        exceed = model.exceedance(bound, side) / windows.SHARE
        found[side] = (exceed.mean(), exceed.std(ddof=1) / math.sqrt(len(exceed)))
    return found


def draws(model: windows.Model, seed: int, ensembles: int = ENSEMBLES) -> np.ndarray:
    return model.draw((ensembles, windows.N_FIT), np.random.default_rng(seed))


# The coverage test ------------------------------------------------------------------------------

COVERAGE = [
    (key, lam)
    for key, lams in {
        "loss_start": (-7, 0, 4, 10, 16),
        "loss_early": (0, 1, 3.5, 6, 8),
        "loss_late": (0, 1, 3.5, 6, 8),
    }.items()
    for lam in lams
]


@pytest.mark.parametrize(("key", "lam"), COVERAGE)
def test_candidate_c_keeps_each_side_at_most_its_share_across_the_lambda_range(key, lam):
    """At v3's moments and n = 80, (C) with the committed multipliers (lam refitted by the
    truncated likelihood) is exceeded, on average over fitting ensembles, with probability at
    most the share on each side, within Monte-Carlo error."""
    model = design_model(key, lam)
    t = draws(model, seed=int(10 * lam) + 1000)
    low, high = windows.bounds_c(t, committed_k()[key], windows.FIT_GRID[key])
    for side, (ratio, se) in ratios(model, low, high).items():
        assert ratio - Z * se <= 1, (key, lam, side, ratio, se)


@pytest.mark.parametrize("model", ["normal", "skewed"])
def test_candidate_c_keeps_the_antidiagonal_at_most_its_share(model):
    normal, skewed = windows.key_models("antidiagonal", windows.design_data()["antidiagonal"])[0]
    model = normal if model == "normal" else skewed
    t = draws(model, seed=7)
    low, high = windows.bounds_c(t, committed_k()["antidiagonal"], None)
    for side, (ratio, se) in ratios(model, low, high).items():
        assert ratio - Z * se <= 1, (model.name, side, ratio, se)


def test_the_committed_heavier_tail_rates_are_what_the_code_gives():
    """Student-t(8) on the scale, (C): CI's estimate agrees with the committed record."""
    table = pd.read_csv(RECORD / "windows.csv", comment="#")
    for key in windows.WINDOWS:
        heavy = windows.key_models(key, windows.design_data()[key])[1]
        model = next(m for m in heavy if m.df == 8)
        low, high = windows.bounds_c(draws(model, 8), committed_k()[key], windows.FIT_GRID[key])
        for side, (ratio, se) in ratios(model, low, high).items():
            row = table[
                (table["key"] == key)
                & (table["side"] == side)
                & (table["model"] == model.name)
                & (table["candidate"] == "C")
            ].iloc[0]
            assert abs(ratio - row["ratio"]) <= 4 * math.hypot(se, row["se"]), (key, side)


# What the coverage test fixes ---------------------------------------------------------------


@pytest.mark.parametrize("key", ["loss_early", "loss_late"])
def test_v3s_fixed_lambda_fails_when_the_data_come_from_lambda_one(key):
    """v3's t bound on Box-Cox(x; 3.5), its lam held fixed, is exceeded on the upper side
    well above its share when the data are Box-Cox normal at lam = 1: the failure that
    refitting lam (C) fixes."""
    model = design_model(key, 1.0)
    t = draws(model, seed=1)
    ratio, se = ratios(model, *windows.bounds_v3(t, golden.LAMBDA[key]))["high"]
    assert golden.LAMBDA[key] == 3.5
    assert ratio - Z * se > 2, (ratio, se)


@pytest.mark.parametrize("key", ["loss_early", "loss_late"])
def test_the_coverage_test_fails_for_c_with_its_lambda_held_fixed(key):
    """(C)'s multipliers without its refit (lam held at v3's 3.5) exceed the share on some
    side at some lam of the coverage test's range: the test can tell."""
    k = committed_k()[key]
    excess = []
    for lam in (0, 1, 6, 8):
        model = design_model(key, lam)
        t = draws(model, seed=int(10 * lam) + 1000)
        fixed = windows.bounds(windows.fixed_fit(t, golden.LAMBDA[key]), *k)
        excess += [(lam, side) for side, (r, se) in ratios(model, *fixed).items() if r - Z * se > 1]
    assert excess


# The truncated likelihood -------------------------------------------------------------------


@pytest.mark.parametrize("d", [1.2, 1.5, 2.0, 3.0])
def test_the_truncated_normal_table_is_its_maximum_likelihood(d):
    """h(d) and (mu', sigma') against a direct optimisation of the truncated normal's mean
    log-likelihood on data of mean 0, ML variance 1, truncated below at -d."""

    def minus_loglik(p):
        mu, sigma = p[0], math.exp(p[1])
        return -(
            -math.log(sigma)
            - (mu**2 + 1) / (2 * sigma**2)
            - special.log_ndtr((mu + d) / sigma)
            - 0.5 * math.log(2 * math.pi)
        )

    best = optimize.minimize(
        minus_loglik,
        [0.0, 0.0],
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 4000},
    )
    mu, sigma = windows.truncated_mle(np.array(d))
    assert windows.truncated_h(np.array(d)) == pytest.approx(-best.fun, abs=1e-6)
    assert (mu, sigma) == pytest.approx((best.x[0], math.exp(best.x[1])), abs=1e-4)


def test_the_profile_is_the_full_likelihood_maximised():
    """The profile log-likelihood differs from the truncated Box-Cox normal's log-likelihood
    (Jacobian included), maximised over (mu, sigma) numerically, by one constant over lam."""
    x = np.exp(windows.design_data()["loss_early"])
    u = windows.centred(np.log(x)[None, :])
    gaps = []
    for lam in (1.0, 3.5, 8.0):
        y, edge = (x**lam - 1) / lam, -1 / lam

        def minus_loglik(p, y=y, edge=edge):
            mu, sigma = p[0], math.exp(p[1])
            z = (y - mu) / sigma
            tail = special.log_ndtr((mu - edge) / sigma)
            return -(np.sum(-0.5 * z**2 - math.log(sigma)) - len(y) * tail)

        start = [y.mean(), math.log(y.std())]
        best = optimize.minimize(
            minus_loglik,
            start,
            method="Nelder-Mead",
            options={"xatol": 1e-12, "fatol": 1e-10, "maxiter": 8000},
        )
        full = -best.fun + (lam - 1) * np.log(x).sum()
        gaps.append(full - windows.profile_loglik(u, lam)[0])
    assert np.ptp(gaps) < 1e-4


def test_the_truncated_likelihood_recovers_a_known_lambda():
    """A large sample (n = 20,000) of a Box-Cox normal at lam = 2, truncated 1.5 SD below its
    mean: lam-hat is within 4 SE of 2 and lam's profile interval holds it; the plain normal
    likelihood, blind to the truncation, is not."""
    model = windows.Model(lam=2.0, mu=0.0, sigma=1 / 3)
    t = model.draw((1, 20_000), np.random.default_rng(0))
    grid = np.arange(-4.0, 8.0, 0.05)
    lam, profile = windows.fit_lambda(windows.centred(t), grid)
    inside = grid[windows.profile_interval(profile)[:, 0]]
    plain = windows.refit(t, grid, truncated=False).lam[0]
    assert abs(lam[0] - 2) < 0.3
    assert inside.min() - 0.05 <= 2 <= inside.max() + 0.05
    assert abs(plain - 2) > 0.5


# The Box-Cox scale's reach ------------------------------------------------------------------


@pytest.mark.parametrize("lam", [-3.0, -0.5, 0.0, 1.0, 3.5])
def test_box_cox_round_trip_and_its_reach_match_tools_golden(lam):
    """x -> golden.box_cox -> golden.box_cox_inverse is x for every sign of lam, and the
    vectorised inverse the simulation uses agrees with it, beyond the reach included
    (lam < 0: +infinity; lam > 0: the floor)."""
    x = np.array([0.01, 0.3, 1.0, 2.0, 10.0])
    y = golden.box_cox(x, lam)
    back = np.array([golden.box_cox_inverse(v, lam) for v in y])
    assert back == pytest.approx(x, rel=1e-8)  # x^3.5 of 0.01 is 1e-7 beside 1: digits lost
    assert windows.box_cox_inverse_array(y, lam) == pytest.approx(back, rel=1e-12)
    if lam != 0:
        beyond = np.array([-1 / lam + 0.1 * np.sign(-lam), -1 / lam])
        expected = [golden.box_cox_inverse(v, lam) for v in beyond]
        assert list(windows.box_cox_inverse_array(beyond, lam)) == expected
        assert expected == [math.inf if lam < 0 else 0.0] * 2


def test_a_fitted_band_with_a_negative_lambda_reaches_infinity_through_tools_golden():
    """The fit-time band (golden.box_cox_inverse) is the simulation's (C) band, also when
    lam-hat < 0 puts the upper bound beyond the scale's reach: infinity, not the floor."""
    model = windows.Model(lam=-3.0, mu=0.0, sigma=0.11)  # its upper reach 3 SD out
    t = draws(model, seed=3, ensembles=200)
    grid, k = windows.FIT_GRID["loss_early"], (3.5, 3.5)
    fit = windows.refit(t, grid)
    low, high = windows.bounds_c(t, k, grid)
    floor = windows.FLOOR
    assert (fit.lam < 0).mean() > 0.5 and np.isinf(high).any() and np.isfinite(high).any()
    for i in [int(np.argmax(np.isinf(high))), int(np.argmax(np.isfinite(high) & (fit.lam < 0)))]:
        band = windows.window_band(floor + np.exp(t[i]), floor, k, grid)
        assert band["lambda"] == pytest.approx(fit.lam[i], abs=1e-9)
        assert band["low"] == pytest.approx(floor + np.exp(low[i]), rel=1e-9)
        assert band["high"] == pytest.approx(floor + np.exp(high[i]), rel=1e-9)


# The generating models ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        windows.Model(lam=2.0, mu=-0.3, sigma=0.3),  # truncated 0.67 SD below the mean
        windows.Model(lam=-3.0, mu=0.1, sigma=0.1),  # truncated above
        windows.Model(lam=5.0, mu=-3.0, sigma=0.2),  # truncated 7 SD out: the exponential limit
        windows.Model(lam=2.0, mu=0.0, sigma=0.3, df=5),
        windows.Model(lam=None, mu=3.0, sigma=0.3, eps=-0.29),
    ],
)
def test_a_models_exceedance_is_the_frequency_of_its_draws(model):
    t = model.draw((200_000,), np.random.default_rng(0))
    for q in (0.001, 0.05, 0.5, 0.95):
        bound = np.quantile(t, q)
        low, high = model.exceedance(bound, "low"), model.exceedance(bound, "high")
        assert low == pytest.approx(q, abs=4 * math.sqrt(q * (1 - q) / len(t)))
        assert low + high == pytest.approx(1, abs=1e-9)


def test_the_skewed_antidiagonal_model_has_the_datas_skewness():
    skew = -0.47
    eps = windows.sinh_arcsinh_eps(skew)
    mean, sd, found = windows.sinh_arcsinh_moments(eps)
    assert found == pytest.approx(skew, abs=1e-8)
    t = windows.Model(lam=None, mu=0.0, sigma=1.0, eps=eps).draw(
        (400_000,), np.random.default_rng(1)
    )
    assert (t.mean(), t.std()) == pytest.approx((0.0, 1.0), abs=0.01)


# The rule and the record --------------------------------------------------------------------


def test_the_rule_qualifies_on_the_point_and_the_upper_end_then_picks_the_narrower():
    rows = []
    for candidate, ratio, high, width in [
        ("C", 1.0, 1.08, 3.5),
        ("B", 1.0, 1.08, 3.2),
        ("C", 0.9, 0.95, 3.5),
        ("B", 1.06, 1.09, 3.2),
    ]:
        for side in ("low", "high"):
            rows.append(
                {
                    "key": "k",
                    "side": side,
                    "family": "normal",
                    "model": str(ratio),
                    "candidate": candidate,
                    "ratio": ratio,
                    "ratio_high": high,
                    "width_sd": width,
                }
            )
    table = pd.DataFrame(rows)
    assert windows.select(table, "k") == {"low": "C", "high": "C"}  # B's point 1.06 > 1.05
    table.loc[table["ratio"] == 1.06, "ratio"] = 1.04
    assert windows.select(table, "k") == {"low": "B", "high": "B"}  # now B, the narrower
    table["ratio_high"] = 1.11
    assert windows.select(table, "k") == {"low": None, "high": None}


def test_the_simulation_runs_end_to_end_and_writes_its_record(tmp_path):
    argv = [
        "simulate",
        "--keys",
        "loss_late",
        "antidiagonal",
        "--ensembles",
        "40",
        "--inner",
        "4",
        "--lambda-grid",
        "loss_late=1:5:2",
        "--out",
        str(tmp_path),
    ]
    windows.main(argv)
    table = pd.read_csv(tmp_path / "windows.csv", comment="#")
    assert set(table["candidate"]) == {"v3", "C", "Cu", "B", "U"}
    assert set(table[table["family"] == "normal"]["model"]) == {
        "normal lam=1",
        "normal lam=3",
        "normal lam=5",
        "normal",
        windows.key_models("antidiagonal", windows.design_data()["antidiagonal"])[0][1].name,
    }
    keys = pd.read_csv(tmp_path / "keys.csv", comment="#")
    assert list(keys["key"]) == ["loss_late", "antidiagonal"] and keys["commit"].notna().all()
    assert "## Constants and choice" in (tmp_path / "windows.md").read_text()


# Cu's one window multiplier, by shape (tools/golden_v4/shape.py) ----------------------------


def shape_k(model: windows.Model, fit, seed: int, ensembles: int = 400) -> np.ndarray:
    """Cu's calibrated (k_low, k_high) at the model, on seeded draws, with the fit given."""
    t = draws(model, seed, ensembles)
    return windows.calibrate(model, fit(t), shape.TARGET)


def test_cu_depends_on_the_shape_alone():
    """The same c from the shape model and from loss_early's design model at v3's moments
    (another lam, mean and spread of log x), on common draws: the relative fit gives the same
    k to rounding, the method's own FIT_GRID to its step."""
    c = 0.27
    small, design = shape.shape_model(c), shape.design_model_at("loss_early", c)
    assert design.lam == pytest.approx(3.75, abs=0.01) and design.mu != 0
    assert shape.shape_of(design) == pytest.approx(c, abs=1e-9)
    base = shape_k(small, shape.refit_relative, seed=21)
    assert shape_k(design, shape.refit_relative, seed=21) == pytest.approx(base, abs=1e-6)
    assert shape_k(design, shape.refit_key("loss_early"), seed=21) == pytest.approx(base, abs=3e-3)


def test_the_mirror_image_swaps_the_sides():
    """c and -c on common draws: log x mirrored, so k_low and k_high trade places."""
    found = shape_k(shape.shape_model(0.27), shape.refit_relative, seed=22)
    mirror = shape_k(shape.shape_model(-0.27), shape.refit_relative, seed=22)
    assert mirror[::-1] == pytest.approx(found, abs=1e-6)


@pytest.mark.parametrize("c", [0.27, 5.0, math.inf])
def test_the_shape_models_spread_in_log_x_is_its_draws(c):
    t = shape.shape_model(c).draw((200_000,), np.random.default_rng(23))
    assert shape.log_sd(c) == pytest.approx(t.std(), rel=0.01)
    assert shape.spread(-c) == -shape.spread(c)


def test_a_keys_model_of_a_shape_has_that_shape_and_the_keys_spread():
    model = shape.key_model("loss_late", -0.5)
    t = model.draw((200_000,), np.random.default_rng(24))
    assert shape.shape_of(model) == pytest.approx(-0.5, abs=1e-12)
    assert t.std() == pytest.approx(np.std(windows.design_data()["loss_late"], ddof=1), rel=0.01)


def test_a_calibrated_multiplier_hits_its_target_and_its_sd_is_the_spread_over_replicates():
    """k makes the mean exceedance 0.95 x the share; the delta method's MC SD of k agrees
    with the SD of k over independent calibrations (within their sampling error)."""
    model, found, sds = shape.shape_model(0.0), [], []
    for seed in range(24):
        t = draws(model, seed=100 + seed, ensembles=600)
        fit = shape.refit_relative(t)
        row = shape.calibrated(model, t, fit)
        found.append(row["k_high"])
        sds.append(row["k_high_sd"])
    exceed = model.exceedance(fit.bound(row["k_high"], "high"), "high").mean()
    assert exceed == pytest.approx(0.95 * windows.SHARE, rel=1e-6)
    assert np.std(found, ddof=1) == pytest.approx(np.mean(sds), rel=0.4)


def test_the_window_multiplier_is_the_largest_k_over_sides_and_shapes():
    table = pd.DataFrame(
        {"c": [-0.3, 0.0, 0.3], "k_low": [3.2, 3.4, 3.5], "k_high": [3.6, 3.4, 3.2]}
    )
    assert shape.window_multiplier(table) == 3.6
    table.loc[2, "k_low"] = 3.7
    assert shape.window_multiplier(table) == 3.7


def test_the_confirmation_passes_only_if_every_upper_end_is_at_most_1_10():
    table = pd.DataFrame({"ratio": [0.9, 1.0], "ratio_high": [1.0, 1.1]})
    assert shape.passes(table)
    table.loc[0, "ratio_high"] = 1.1001
    assert not shape.passes(table)


def test_the_shape_calibration_and_confirmation_run_end_to_end(tmp_path):
    shapes = (-0.27, 0.0, 0.27, math.inf)
    k = shape.calibrate_command(300, 1, tmp_path, shapes, log=lambda _: None)
    table = shape.read_csv(tmp_path / "shape.csv")
    assert k == shape.window_multiplier(table) and list(table["c"]) == list(shapes)
    shape.confirm_command(200, 200, 2, tmp_path, shapes, log=lambda _: None)
    confirm = pd.read_csv(tmp_path / "confirm.csv", comment="#")
    assert set(confirm["fit"]) == {"relative", *windows.WINDOWS} and len(confirm) == 32
    runs = shape.read_csv(tmp_path / shape.RUNS)
    assert list(runs["verb"]) == ["calibrate", "confirm"] and (runs["K"] == k).all()
    assert "**Rule, written before the run:**" in (tmp_path / "shape.md").read_text()


def test_the_power_table_writes_only_where_it_is_told(tmp_path, monkeypatch):
    """Without --out it prints; with it, shift_power.md goes into that folder."""
    monkeypatch.setattr(windows, "POWER_LAMBDAS", {key: (1.0,) for key in windows.WINDOWS})
    written = []
    monkeypatch.setattr(type(tmp_path), "write_text", lambda p, text: written.append(p))
    windows.power_table(20, 5, k=3.6)
    assert written == []
    windows.power_table(20, 5, k=3.6, out=tmp_path)
    assert written == [tmp_path / "shift_power.md"]
