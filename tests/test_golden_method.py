"""Golden check v3's method (tools/golden.py, training/judged.py): the guarantee it states is
what a simulation of it from a known model measures, and the committed bands are what the
committed fitting seeds give."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from tcrformer.core import golden_file
from tcrformer.training import judged

from conftest import ROOT
from tools import golden as method

LEVEL = 0.01 / method.TESTS  # one one-sided test's share of the 1 % budget
FITTING = pd.read_csv(ROOT / "config/golden/v3/fitting.csv")
FLOOR = 0.611088


# What a run is judged on -----------------------------------------------------------------------


def test_a_window_mean_is_the_mean_over_its_steps():
    curve = np.arange(1, 3001, dtype=float)
    assert judged.window_mean(curve, (101, 300)) == np.mean(np.arange(101, 301))
    found = judged.run_statistics(curve, 990, 1000, 0.9)
    assert found == {"loss_start": 200.5, "loss_early": 500.5, "loss_late": 2000.5,
                     "misses": 10.0, "antidiagonal": 0.9}  # fmt: skip


def test_a_short_run_or_a_wrong_cdr3_lacks_what_it_cannot_have():
    found = judged.run_statistics(np.ones(500), 1000, 1000, None)
    assert found == {"loss_start": 1.0, "misses": 0.0}


def test_the_judge_fails_outside_either_side_and_what_is_not_finite():
    bands = method.read_bands()
    inside = {key: float(FITTING[key].median()) for key in judged.KEYS}
    assert method.judge(bands, inside) == []
    for key in judged.WINDOWS:
        band = bands[f"reversal.curve.{key}"]
        assert method.judge(bands, {**inside, key: band.low - 1e-6}) == [key]
        assert method.judge(bands, {**inside, key: band.high + 1e-6}) == [key]
        assert method.judge(bands, {**inside, key: math.inf}) == [key]
    high = bands["reversal.curve.misses"].high
    assert method.judge(bands, {**inside, "misses": high}) == []
    assert method.judge(bands, {**inside, "misses": high + 1}) == ["misses"]
    assert method.judge(bands, {**inside, "antidiagonal": math.nan}) == []  # a wrong CDR3


# The guarantee, simulated from known models --------------------------------------------------


def mean_exceedance(bounds: np.ndarray, sf) -> tuple[float, float]:
    """The mean over simulated fits of each bound's exact exceedance, and its standard error."""
    exceed = sf(np.asarray(bounds))
    return float(exceed.mean()), float(exceed.std(ddof=1) / math.sqrt(len(exceed)))


@pytest.mark.parametrize("n", [80, 143])
def test_the_t_bounds_are_exceeded_at_their_level_under_the_normal_model(n):
    """Each side of a continuous key's band is exceeded by a fresh correct run with
    probability LEVEL, over the fitting ensemble and the run; a plug-in normal quantile (no t,
    no sqrt(1 + 1/n)) is not, so this test can tell."""
    rng = np.random.default_rng(n)
    samples = rng.normal(size=(4000, n))
    bounds = np.array([method.t_bounds(y, LEVEL) for y in samples])
    for side, sf in ((0, stats.norm.cdf), (1, stats.norm.sf)):
        rate, se = mean_exceedance(bounds[:, side], sf)
        assert abs(rate - LEVEL) < 4 * se, (side, rate / LEVEL)
    m, s = samples.mean(axis=1), samples.std(axis=1, ddof=1)
    plug_in, se = mean_exceedance(m + stats.norm.ppf(1 - LEVEL) * s, stats.norm.sf)
    assert plug_in - LEVEL > 4 * se


@pytest.mark.parametrize("lam", [-2.0, -0.5, 0.0, 1.0, 3.5])
def test_box_cox_inverse_undoes_the_scale_and_maps_its_edge_to_the_right_end(lam):
    """Inside the scale's reach the inverse undoes box_cox; past -1/lam it is the end the
    scale cannot pass: the floor (0) for lam > 0, +infinity for lam < 0 (whose scale is
    bounded above), so an upper bound there never becomes the floor."""
    x = np.array([0.01, 0.3, 1.0, 2.5])
    back = [method.box_cox_inverse(y, lam) for y in method.box_cox(x, lam)]
    np.testing.assert_allclose(back, x, rtol=1e-6)  # (x^lam - 1) / lam cancels near 0
    if lam != 0:
        beyond = -1 / lam + (1.0 if lam < 0 else -1.0)
        assert method.box_cox_inverse(beyond, lam) == (math.inf if lam < 0 else 0.0)


@pytest.mark.parametrize("key", list(judged.WINDOWS))
def test_a_loss_band_is_exceeded_at_its_level_under_its_model(key):
    """The loss window's band, mapped back to loss units, under a Box-Cox-normal model at the
    method's lambda with the fitting seeds' moments: each side exceeded with rate LEVEL."""
    lam = method.LAMBDA[key]
    y = method.box_cox(FITTING[key].dropna().to_numpy(float) - FLOOR, lam)
    mu, sd, n = float(y.mean()), float(y.std(ddof=1)), len(y)
    rng = np.random.default_rng(7)
    draws = [np.array([method.box_cox_inverse(v, lam) for v in rng.normal(mu, sd, n)])
             for _ in range(2000)]  # fmt: skip
    bands = [method.loss_band(FLOOR + x, FLOOR, lam, LEVEL) for x in draws]

    def z(loss):
        return (method.box_cox(np.maximum(np.asarray(loss) - FLOOR, 1e-300), lam) - mu) / sd

    low, se_low = mean_exceedance([b["low"] for b in bands], lambda b: stats.norm.cdf(z(b)))
    high, se_high = mean_exceedance([b["high"] for b in bands], lambda b: stats.norm.sf(z(b)))
    assert abs(low - LEVEL) < 4 * se_low and abs(high - LEVEL) < 4 * se_high, (low, high)


@pytest.mark.parametrize("a_scale", [1.0, 0.82 / 0.988])
def test_the_misses_bound_is_calibrated_to_its_level(a_scale):
    """Fitting ensembles of 144 drawn from a known beta-binomial (the fit, and a heavier tail:
    a at the lower end of its profile interval), each bound calibrated in the loop: the mean
    exceedance stays near LEVEL, where the plain plug-in bound exceeds it."""
    a0, b0 = method.fit_beta_binomial(FITTING["misses"].to_numpy(float), 1000)
    a0 *= a_scale
    truth = method.beta_binomial_cdf(1000, np.array([a0]), np.array([b0]))[0]
    rng = np.random.default_rng(3)
    calibrated, plug_in = [], []
    for _ in range(60):
        misses = stats.betabinom.rvs(1000, a0, b0, size=144, random_state=rng)
        band = method.misses_band(misses, 1000, LEVEL, draws=300)
        calibrated.append(1 - truth[band["high"]])
        cdf = method.beta_binomial_cdf(1000, np.array([band["a"]]), np.array([band["b"]]))
        plug_in.append(1 - truth[method.plug_in_bound(cdf, LEVEL)[0]])
    rate = float(np.mean(calibrated))
    se = float(np.std(calibrated, ddof=1) / math.sqrt(len(calibrated)))
    assert rate < LEVEL * 1.35 + 3 * se, rate / LEVEL  # 1.2x measured at the heavier tail
    assert rate < float(np.mean(plug_in))


# The committed record ------------------------------------------------------------------------


def test_the_fitting_table_holds_what_the_committed_curves_give():
    files = sorted((ROOT / "config/golden/v3/curves").glob("*.csv"))
    curves = pd.concat([pd.read_csv(p).set_index("step") for p in files], axis=1)
    table = FITTING.set_index("seed")
    assert len(curves.columns) == 80
    for column in curves.columns:
        curve, row = curves[column].to_numpy(float), table.loc[int(column[4:])]
        found = judged.run_statistics(curve, 1000, 1000, None)
        for key in judged.WINDOWS:
            assert row[key] == pytest.approx(found[key], abs=1e-6), (column, key)
        for step in method.PRINTED_STEPS:
            assert row[f"loss_step{step}"] == pytest.approx(curve[step - 1], abs=1e-9)


def test_the_committed_bands_are_what_the_fitting_table_gives():
    committed = yaml.safe_load((ROOT / "config/golden/v3/bands.yaml").read_text())
    again = method.bands_record(FITTING)
    assert committed["version"] == golden_file.METHOD_VERSION == again["version"]
    for key, band in committed["bands"].items():
        for field in ("low", "high"):
            if field in band:
                assert band[field] == pytest.approx(again["bands"][key][field], abs=2e-6), key
    assert committed["reference"] == again["reference"]
    assert committed["method"]["tests"] == method.TESTS == 9


def test_the_power_table_judges_each_faulty_run(tmp_path):
    """A faulty run's folder (as `snakemake power` writes it) is judged key by key."""
    bands = method.read_bands()
    steps = np.arange(1, 3001)
    good = FITTING.dropna().iloc[0]
    for fault, shift in (("slow", 0.5), ("none", 0.0)):
        folder = tmp_path / fault / "seed1"
        folder.mkdir(parents=True)
        loss = np.where(steps <= 300, good["loss_start"] + shift, good["loss_late"])
        loss[400:600] = good["loss_early"]
        pd.DataFrame({"step": steps, "loss": loss}).to_csv(folder / "losses.csv", index=False)
        values = {"reversal.heldout_exact": 999, "reversal.cdr3_output": "FYQEYSSRISSAC",
                  "reversal.cross_attention_antidiagonal_mean": good["antidiagonal"]}  # fmt: skip
        (folder / "values.json").write_text(json.dumps(values))
    table = method.power_table(tmp_path, bands).set_index("fault")
    assert table.loc["slow", "failed"] == "loss_start"
    assert table.loc["none", "failed"] == ""
    summary = method.power_summary(method.power_table(tmp_path, bands)).set_index("fault")
    assert summary.loc["slow", "caught"] == 1 and summary.loc["none", "caught"] == 0
    for fault, model in (("slow", "CPU A"), ("none", "CPU B")):
        numerics = {"cpu": {"model": model}, "mode": "portable"}
        (tmp_path / fault / "seed1/numerics.json").write_text(json.dumps(numerics))
    record = method.power_record(tmp_path, "the command")
    assert record["provenance"]["command"] == "the command" and record["runs"] == 2
    assert record["machines"] == {"CPU A": 1, "CPU B": 1} and record["numerics"] == {"portable": 2}


def test_power_is_judged_only_when_every_registered_run_is_done(tmp_path, capsys, monkeypatch):
    """Power is judged once, on all of the faults and seeds registered in the plan
    (config/golden/v4/faults.yaml): an unfinished run stops it with one line, and nothing is
    written."""
    faults, seeds = method.registered_faults()
    assert len(faults) >= 5 and len(seeds) >= 8  # the floor
    for fault in faults:
        for seed in seeds:
            (tmp_path / fault / f"seed{seed}").mkdir(parents=True)
    last = tmp_path / faults[-1] / f"seed{seeds[-1]}"
    assert len(method.missing_runs(tmp_path, faults, seeds)) == len(faults) * len(seeds)
    for folder in tmp_path.glob("*/seed*"):
        if folder != last:
            (folder / "values.json").write_text("{}")
    assert method.missing_runs(tmp_path, faults, seeds) == [f"{faults[-1]}/seed{seeds[-1]}"]
    monkeypatch.setattr(method, "FOLDER", tmp_path / "v3")  # where power.csv would go
    assert method.main(["power", str(tmp_path)]) == 1
    assert f"{faults[-1]}/seed{seeds[-1]}" in capsys.readouterr().err
    (last / "values.json").write_text("{}")  # every run done, but the plan is not v3's
    assert method.main(["power", str(tmp_path)]) == 1
    assert "nothing judged" in capsys.readouterr().err
    assert not (tmp_path / "v3").exists()


def test_validation_counts_fails_with_an_exact_interval_and_writes_its_record(tmp_path):
    """A held-out ensemble folder (as the ensemble target writes it) judged by the bands: a
    seed pushed out of one band FAILs on that key alone; the record says so."""
    import shutil

    folder = tmp_path / "v3"
    folder.mkdir()
    for name in ("bands.yaml", "fitting.csv"):
        shutil.copy(ROOT / "config/golden/v3" / name, folder / name)
    curves = pd.read_csv(ROOT / "config/golden/v3/curves/fit.csv")[["step", "seed64", "seed65"]]
    curves["seed65"] = curves["seed65"] + 0.5  # a slow and high curve: every window out
    ensemble = tmp_path / "ensemble"
    for seed in (64, 65):
        (ensemble / f"seed{seed}").mkdir(parents=True)
        values = {"reversal.heldout_exact": 999, "reversal.cdr3_correct": 1,
                  "reversal.cross_attention_antidiagonal_mean": 0.95}  # fmt: skip
        (ensemble / f"seed{seed}/values.json").write_text(json.dumps(values))
    curves.to_csv(ensemble / "curves.csv", index=False)
    record = yaml.safe_load(method.validate_command({"toy": ensemble}, folder).read_text())
    found = record["ensembles"]["toy"]
    assert (found["seeds"], found["fail"]) == (2, 1)
    assert found["failed"] == {65: "loss_start loss_early loss_late"}
    assert found["interval"][0] > 0.01 and found["interval"][1] > 0.98
    assert set(record["pit"]) == set(judged.KEYS)
    assert (folder / "heldout/toy_statistics.csv").exists()
