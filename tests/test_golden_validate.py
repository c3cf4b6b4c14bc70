"""The held-out validation (tools/golden/validate.py): its bootstrap null redraws the whole
procedure, so a correct method is rejected at most at each test's level, where the binomial
reading over-rejects it; a shifted key is rejected; the bands it redraws are the method's, and
its draws have the fitted laws and copula; the command judges an ensemble against the
committed bands and refuses bands that are not the method's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import special

from conftest import ROOT
from tools.golden import fit, method, misses, records, scale, validate
from tools.golden import validation_null as simulation

# The coverage simulation: three correlated keys (two windows, lambda refitted, and the
# anti-diagonal; six sides), at v3's moments with a copula correlation of 0.6 between every
# pair; lam sd(log x) fitted on a coarser grid than the method's to keep it fast.
KEYS = ("loss_early", "loss_late", "antidiagonal")
COARSE = np.linspace(-4.0, 4.0, 81)
FLOOR = 0.611088
CORRELATION = 0.6
OUTER, REPLICATES = 300, 250  # 250: the smallest Holm level over six, 0.025 / 6, is reachable
FAULT = ("loss_late", 1.5)


def equicorrelated(size: int, r: float) -> np.ndarray:
    return np.full((size, size), r) + (1 - r) * np.eye(size)


@pytest.fixture(scope="module")
def setup():
    method = validate.Method(grid=COARSE, keys=KEYS)
    fitted = validate.fit_generating(simulation.design_fitting(), method)
    truth = replace(fitted, correlation=equicorrelated(len(KEYS), CORRELATION))
    return simulation.Setup(truth, method, fits=2000, seed=5)


@pytest.fixture(scope="module")
def null(setup):
    return simulation.simulate(setup, OUTER, REPLICATES, seed=11)


def upper_mc(level: float, runs: int = OUTER) -> float:
    """A rate's upper Monte-Carlo end at `level`: level + 3 SE."""
    return level + 3 * np.sqrt(level * (1 - level) / runs)


# The tests' level, and the fault -----------------------------------------------------------


def test_a_correct_method_is_rejected_at_most_at_each_tests_level(null):
    """Validations from the truth, the bands calibrated at it: each bootstrap test rejects at
    most at its level, and the two together at most at their sum, within Monte-Carlo error."""
    rates = null.mean()
    level = validate.PRIMARY_LEVEL
    assert rates["bootstrap_pooled"] <= upper_mc(level), rates
    assert rates["bootstrap_per_side"] <= upper_mc(level), rates
    assert rates["bootstrap_either"] <= upper_mc(2 * level), rates


def test_the_binomial_reading_over_rejects_the_same_correct_method(null):
    """On the same validations, the per-side test with each count Binomial(100, 5 %) rejects
    far above its 5 %: the band's rate given its fit varies, and the binomial ignores it."""
    rates = null.mean()
    assert rates["binomial_per_side"] > upper_mc(validate.BINOMIAL_LEVEL), rates
    assert rates["binomial_either"] > 2 * rates["bootstrap_either"], rates


def test_a_shifted_key_is_rejected(setup):
    """The held-out seeds' loss_late moved up by 1.5 SD on its scale (its 5 % band then
    exceeded by about 40 % of the seeds): nearly every validation FAILs."""
    rates = simulation.simulate(setup, 30, REPLICATES, seed=12, fault=FAULT).mean()
    assert rates["bootstrap_per_side"] >= 0.9 and rates["bootstrap_either"] >= 0.9, rates


# The bootstrap's parts -------------------------------------------------------------------------


def test_the_copula_draws_the_keys_with_the_fitted_correlation(setup):
    draws = setup.truth.draw(200, 50, np.random.default_rng(1))
    flat = {key: values.ravel() for key, values in draws.items()}
    found = validate.score_correlation(flat, KEYS)
    np.testing.assert_allclose(found, setup.truth.correlation, atol=0.03)


def test_the_correlated_keys_widen_the_pooled_null(setup):
    """The pooled count over the sides is more variable when the keys move together: the
    null the bootstrap draws with the copula, against the same laws drawn independently."""
    independent = replace(setup.truth, correlation=np.eye(len(KEYS)))
    keep = {
        name: {key: np.ones(n, bool) for key in KEYS}
        for name, n in (("fitting", validate.FITTING_SEEDS), ("heldout", validate.HELDOUT_SEEDS))
    }
    spread = []
    for model in (setup.truth, independent):
        rng = np.random.default_rng(2)
        null = validate.null_tallies(model, setup.method, {}, keep, 1500, rng)
        spread.append(null["per_side"].sum(axis=1).var())
    assert spread[0] > 1.5 * spread[1], spread


def test_a_scale_quantile_is_its_truncated_law(setup):
    """At a normal deviate z the quantile leaves P(Z > z) above it under the truncated law."""
    z = np.linspace(-4, 4, 33)
    for key in KEYS:
        law = setup.truth.laws[key]
        t = law.quantile(z)
        above = law.model.exceedance(t - law.shift, "high")
        np.testing.assert_allclose(above, special.ndtr(-z), rtol=1e-7, err_msg=key)


def test_a_count_quantile_is_the_beta_binomial():
    law = validate.Count(mu=0.002, phi=0.0015)
    tail = misses.survival(misses.N, law.mu, law.phi)[0]
    z = np.linspace(-3, 4, 50)
    c, q = law.quantile(z).astype(int), special.ndtr(-z)
    assert np.all(tail[c] <= q) and np.all((c == 0) | (tail[np.maximum(c - 1, 0)] > q))


def test_a_moved_count_moves_its_mean_by_that_many_sds():
    law = validate.Count(mu=0.002, phi=0.0015)
    pmf = -np.diff(np.concatenate([[1.0], misses.survival(misses.N, law.mu, law.phi)[0]]))
    x = np.arange(misses.N + 1)
    sd = np.sqrt(pmf @ x**2 - (pmf @ x) ** 2)
    assert (law.moved(2.0).mu - law.mu) * misses.N == pytest.approx(2 * sd, rel=1e-6)


def test_the_windows_and_antidiagonal_bands_are_the_methods(setup):
    rng = np.random.default_rng(3)
    t = setup.truth.draw(validate.FITTING_SEEDS, 4, rng)
    for i in range(4):  # at the method's grid: method.window_band's
        x = FLOOR + np.exp(t["loss_late"][i])
        band = method.window_band(method.window_fit(x, FLOOR), FLOOR, 2.5)
        full = replace(setup.method, grid=scale.RELATIVE_GRID, multipliers=ALL_K)
        found = validate.key_bands("loss_late", t["loss_late"][i : i + 1], full, {})
        low, high = found["committed"]
        assert (FLOOR + np.exp(low[0]), FLOOR + np.exp(high[0])) == pytest.approx(
            (band["low"], band["high"]), rel=1e-9)  # fmt: skip
    for key in KEYS:
        found = validate.key_bands(key, t[key], setup.method, {})
        for band in validate.BANDS:
            k = setup.method.multipliers[band][key]
            if key == "antidiagonal":
                low, high = found[band]
                for i in range(4):
                    expected = method.antidiagonal_band(special.expit(t[key][i]), *k)
                    assert special.expit(low[i]) == pytest.approx(expected["low"])
                    assert special.expit(high[i]) == pytest.approx(expected["high"])
            else:
                fit = scale.refit_relative(t[key], COARSE)
                np.testing.assert_array_equal(found[band], fit.bounds(*k))


ALL_K = {band: {key: (2.5, 2.5) for key in KEYS} for band in validate.BANDS}


def test_the_misses_band_is_the_methods_calibrated_bound():
    """The plug-in at misses_levels' level is misses.misses_bounds' bound at each share."""
    method = validate.Method(misses_draws=60)
    x = misses.draw(
        misses.N, 0.0019, 0.0012, (1, validate.FITTING_SEEDS), np.random.default_rng(4)
    )[0][0]
    levels = validate.misses_levels(x, method, seed=7)
    found = validate.key_bands("misses", x[None, :].astype(float), method, levels)
    for band in validate.BANDS:
        bound = misses.misses_bounds(x[None, :], misses.N, method.share(band), 60, 7).c
        assert found[band][1][0] == bound[0], band


def test_the_bootstrap_p_counts_ties_and_adds_one():
    null = np.array([[0, 3], [2, 3], [5, 1], [2, 0]])
    np.testing.assert_allclose(validate.upper_p([2, 4], null), [4 / 5, 1 / 5])
    assert validate.critical_count(np.arange(100), 0.05) == 96  # p(96) = 5 / 101, p(95) = 6 / 101
    assert validate.upper_p(96, np.arange(100)) <= 0.05 < validate.upper_p(95, np.arange(100))


# The record -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """A folder as `fit` leaves it, from v3's 80 fitting seeds (the calibrations cut down)."""
    folder = tmp_path_factory.mktemp("v4")
    table = pd.read_csv(ROOT / "config/golden/v3/fitting.csv")
    table = table[table["seed"] >= 64].drop(columns="source")
    table.to_csv(folder / "statistics.csv", index=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(method, "SKEW_ENSEMBLES", 4000)
        patch.setattr(method, "MISSES_DRAWS", 60)
        fit.fit_command(folder / "statistics.csv", folder)
    return folder


def heldout_table(folder, seed: int = 5) -> pd.DataFrame:
    """100 held-out seeds drawn from the model fitted on the folder's fitting seeds, in the
    statistics' units."""
    fitting = pd.read_csv(folder / "fitting.csv")
    model = validate.fit_generating(validate.columns_on_scale(fitting, FLOOR), validate.Method())
    drawn = model.draw(validate.HELDOUT_SEEDS, 1, np.random.default_rng(seed))
    table = {key: validate.from_scale(key, drawn[key][0], FLOOR) for key in validate.KEYS}
    return pd.DataFrame({"seed": np.arange(8100, 8200), **table})


def test_the_command_judges_the_held_out_seeds_and_writes_its_record(committed, monkeypatch):
    """Held-out seeds from the fitted model, one of them at the floor: a record of the 9
    sides, that seed beyond loss_late's lower side and a FAIL of the committed bands, the
    decision, the location tests and the provenance; the statistics are kept."""
    monkeypatch.setattr(method, "SKEW_ENSEMBLES", 4000)
    monkeypatch.setattr(method, "MISSES_DRAWS", 60)
    table = heldout_table(committed)
    table.loc[0, "loss_late"] = FLOOR - 0.01
    table.to_csv(committed / "heldout.csv", index=False)
    record = validate.validate_command(committed / "heldout.csv", committed, replicates=200)
    assert [(r["key"], r["side"]) for r in record["per_side"]] == validate.SIDES
    assert len(validate.SIDES) == validate.TESTS == 9
    late_low = [r for r in record["committed"] if r["key"] == "loss_late" and r["side"] == "low"]
    assert late_low[0]["beyond"] >= 1 and record["family_wise"]["fail"] >= 1
    assert "loss_late" in record["committed_fails"]["seeds_failed"][8100]
    assert record["pooled"]["critical"] > record["pooled"]["null_mean"]
    assert record["fails"] == (
        record["pooled"]["rejects"] or any(r["rejects"] for r in record["per_side"])
    )
    assert record["decision"] == ("FAIL" if record["fails"] else "PASS")
    assert set(record["location"]) == set(validate.KEYS)
    saved = yaml.safe_load((committed / "validation.yaml").read_text())
    assert saved["provenance"]["command"].startswith("python -m tools.golden validate")
    assert len(pd.read_csv(committed / "heldout/statistics.csv")) == 100


def test_the_command_refuses_bands_that_are_not_the_methods(committed, tmp_path, monkeypatch):
    monkeypatch.setattr(method, "SKEW_ENSEMBLES", 4000)
    monkeypatch.setattr(method, "MISSES_DRAWS", 60)
    folder = tmp_path / "edited"
    folder.mkdir()
    for name in ("fitting.csv", "bands.yaml"):
        (folder / name).write_text((committed / name).read_text())
    bands = yaml.safe_load((folder / "bands.yaml").read_text())
    bands["bands"][records.band_key("loss_early")]["high"] *= 1.01
    (folder / "bands.yaml").write_text(yaml.safe_dump(bands))
    heldout_table(committed).to_csv(tmp_path / "heldout.csv", index=False)
    with pytest.raises(ValueError, match="loss_early high"):
        validate.validate_command(tmp_path / "heldout.csv", folder, replicates=50)
    assert not (folder / "validation.yaml").exists()


def test_the_binomial_critical_count_is_the_smallest_with_an_exact_p_of_5_percent():
    c = validate.binomial_critical(900, 0.05 / 9)
    assert c == 10  # 900 draws at 0.556 %: P(X >= 10) = 0.03, P(X >= 9) = 0.07
    assert validate.excess_p(c, 900, 0.05 / 9) <= 0.05 < validate.excess_p(c - 1, 900, 0.05 / 9)


def test_zero_fails_of_100_support_a_rate_up_to_2_95_percent():
    record = validate.family_wise(0, 100)
    assert record["fail"] == 0 and record["upper"] == pytest.approx(0.0295, abs=5e-5)


def test_the_judged_sides_are_both_of_each_but_the_misses_upper():
    assert validate.SIDES == [
        ("loss_start", "low"), ("loss_start", "high"), ("loss_early", "low"),
        ("loss_early", "high"), ("loss_late", "low"), ("loss_late", "high"),
        ("antidiagonal", "low"), ("antidiagonal", "high"), ("misses", "high"),
    ]  # fmt: skip


def test_the_committed_bands_count_fails_per_seed_not_per_side():
    bands = {"loss_early": ([-1.0], [1.0]), "misses": ([-np.inf], [2.0])}
    heldout = {
        "loss_early": np.array([[5.0, -5.0, 0.0, 0.0]]),
        "misses": np.array([[3.0, 0.0, 0.0, 0.0]]),
    }
    assert validate.failed_seeds(bands, heldout)[0] == 2  # seed 0 twice, seed 1 once
    np.testing.assert_array_equal(validate.side_counts(bands, heldout)[0], [1, 1, 1])


def test_a_shift_between_fitting_and_held_out_seeds_is_reported():
    rng = np.random.default_rng(3)
    fitting = {"a": rng.standard_normal(80)}
    same = validate.location_tests(fitting, {"a": rng.standard_normal(100)})
    moved = validate.location_tests(fitting, {"a": rng.standard_normal(100) + 1.0})
    assert same["a"]["p"] > 0.01 and moved["a"]["p"] < 1e-6
    assert moved["a"]["shift_sd"] == pytest.approx(1.0, abs=0.35)
