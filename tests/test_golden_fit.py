"""`python -m tools.golden fit` (tools/golden/fit.py): on v3's fitting data it writes a bands
file the pipeline's golden file reader takes, whose window bands come from the untruncated
likelihood on the relative grid; from an ensemble folder it commits the statistics the bands
are recomputed from; and v4's committed bands, once fitted, are what their data give."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import optimize, stats

from tcrformer.core import golden_file
from tcrformer.training import judged

from conftest import ROOT
from tools.golden import fit, method, records, scale

V3 = ROOT / "config/golden/v3"
FLOOR = 0.611088


def v3_fitting() -> pd.DataFrame:
    """v3's 80 fitting seeds with curves (64..143): every key of one seed from one run."""
    table = pd.read_csv(V3 / "fitting.csv")
    return table[table["seed"] >= 64].drop(columns="source").reset_index(drop=True)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """v3's 80 seeds fitted (the anti-diagonal's and the misses' calibrations cut down)."""
    folder = tmp_path_factory.mktemp("v4")
    source = folder / "statistics.csv"
    v3_fitting().to_csv(source, index=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(method, "SKEW_ENSEMBLES", 10_000)
        patch.setattr(method, "MISSES_DRAWS", 200)
        path = fit.fit_command(source, folder)
    return folder, yaml.safe_load(path.read_text())


def test_the_bands_file_is_one_the_golden_file_reads(fitted, monkeypatch):
    """A golden file naming the new bands loads, every trained key an ensemble band, once
    golden_file.METHOD_VERSION is the method's; the pipeline's version refuses it, so the
    golden file keeps judging v3's until the switch is made on purpose."""
    folder, record = fitted
    golden = yaml.safe_load((ROOT / "config/golden/explainer_values.yaml").read_text())
    golden["bands"] = "bands.yaml"
    (folder / "golden.yaml").write_text(yaml.safe_dump(golden, sort_keys=False))
    with pytest.raises(golden_file.GoldenFileError, match="method version 4"):
        golden_file.load_golden(folder / "golden.yaml")
    monkeypatch.setattr(golden_file, "METHOD_VERSION", method.VERSION)
    entries, _ = golden_file.load_golden(folder / "golden.yaml")
    bands = {e.key: e.tolerance.band for e in entries if e.tolerance.kind == "ensemble"}
    assert set(bands) == {records.band_key(key) for key in judged.KEYS}
    assert all(band.n == 80 for band in bands.values())
    assert bands["reversal.curve.misses"].low is None and bands["reversal.curve.misses"].high > 0
    places = [e for e in entries if e.tolerance.kind == "percentile"]
    assert places and all(e.tolerance.reference.n >= 79 for e in places)
    found = golden_file.read_method(folder / "golden.yaml")
    assert found["budget"] == 0.01 and found["tests"] == 9 and found["version"] == 4
    assert record["provenance"]["command"].startswith("python -m tools.golden fit")
    assert {"commit", "dirty", "date"} <= set(record["provenance"])
    assert record["method"]["window_k"] == method.WINDOW_K


def exact_profile(x: np.ndarray, lam: float) -> float:
    """The Box-Cox normal log-likelihood maximised over (mu, sigma), Jacobian included:
    -n/2 log var((x^lam - 1) / lam) + (lam - 1) sum log x, the variance taken of (x / g)^lam
    (g the geometric mean), where x^lam itself would underflow."""
    log_g = np.log(x).mean()
    if lam == 0:
        log_var = math.log(np.log(x).var())
    else:
        log_var = math.log(((x / math.exp(log_g)) ** lam).var()) + 2 * (
            lam * log_g - math.log(abs(lam))
        )
    return -len(x) / 2 * log_var + (lam - 1) * np.log(x).sum()


@pytest.mark.parametrize("key", list(judged.WINDOWS))
def test_a_window_band_is_the_untruncated_fit_on_the_relative_grid(fitted, key):
    """lam-hat is the untruncated likelihood's maximum (an optimiser on the exact profile
    finds it; the truncated one puts loss_early's at 15), its interval that likelihood's
    drop of chi2(0.95) / 2, the band K s either side of m on that scale; and the fit of the
    same seeds in other units (x -> 3 x^2) is the same band mapped, which a grid in lam
    would not give."""
    _, record = fitted
    band = record["bands"][records.band_key(key)]
    x = v3_fitting()[key].to_numpy(float) - FLOOR
    best = optimize.minimize_scalar(lambda lam: -exact_profile(x, lam), bounds=(-20, 30),
                                    method="bounded", options={"xatol": 1e-9})  # fmt: skip
    assert band["lambda"] == pytest.approx(best.x, abs=2e-3)
    cut = -best.fun - stats.chi2.ppf(0.95, 1) / 2
    for end, start in zip(band["lambda_interval"], (-60, 60), strict=True):
        root = optimize.brentq(lambda lam: exact_profile(x, lam) - cut, start, best.x)
        assert end == pytest.approx(root, abs=0.02), (end, root)
    y = scale.box_cox_log(np.log(x) - np.log(x).mean(), band["lambda"])
    half = method.WINDOW_K["committed"] * y.std(ddof=1) * math.sqrt(1 + 1 / len(x))
    g = math.exp(np.log(x).mean())
    for side, sign in (("low", -1), ("high", 1)):
        t = scale.box_cox_inverse_log(y.mean() + sign * half, band["lambda"])
        assert band[side] == pytest.approx(FLOOR + g * math.exp(t), abs=2e-6)  # 6 places
    found = method.window_fit(x + FLOOR, FLOOR)
    image = method.window_fit(FLOOR + 3 * x**2, FLOOR)
    assert found["lambda"] == pytest.approx(band["lambda"], abs=1e-6)
    assert image["lambda"] == pytest.approx(found["lambda"] / 2, rel=1e-9)
    assert image["shape_c"] == pytest.approx(found["shape_c"], rel=1e-9)


def test_the_report_states_each_windows_fit_and_every_band(fitted):
    folder, record = fitted
    text = (folder / "fit.md").read_text()
    for key in judged.KEYS:
        assert key in text
    for heading in ("## Loss windows", "## The anti-diagonal", "## The misses", "## The bands"):
        assert heading in text
    assert "excess kurtosis" in text and "-0.79" in text  # loss_early's, as v3 reported
    assert "0.7353 .. 6.359" in text  # loss_early's profile interval (v3's: 0.74..6.35)
    assert len(re.findall(r"^\| committed +\| 0.00111111 \|", text, re.M)) == len(judged.KEYS)
    assert record["bands"]["reversal.curve.antidiagonal"]["k_low"] > method.WINDOW_K["family"]


def ensemble_folder(tmp_path, table: pd.DataFrame):
    """An ensemble folder as `snakemake ensemble` writes it, from v3's committed curves."""
    folder = tmp_path / "ensemble"
    curves = [pd.read_csv(p).set_index("step") for p in sorted((V3 / "curves").glob("*.csv"))]
    curves = pd.concat(curves, axis=1)[[f"seed{s}" for s in table["seed"]]]
    folder.mkdir()
    curves.reset_index().to_csv(folder / "curves.csv", index=False)
    for row in table.to_dict("records"):
        values = {"reversal.heldout_exact": 1000 - int(row["misses"]),
                  "reversal.cdr3_correct": int(row["cdr3_correct"]),
                  "reversal.cross_attention_antidiagonal_mean": row["antidiagonal"]}  # fmt: skip
        (folder / f"seed{row['seed']}").mkdir()
        (folder / f"seed{row['seed']}/values.json").write_text(json.dumps(values))
    return folder


def test_a_fit_from_an_ensemble_folder_commits_its_statistics(tmp_path, monkeypatch):
    """The folder's statistics are the committed table's (windows from the curves), written
    to fitting.csv with the curves beside it; a second fit from that fitting.csv gives the
    same bands file but its provenance: the committed bands are recomputed from it."""
    monkeypatch.setattr(method, "SKEW_ENSEMBLES", 4000)
    monkeypatch.setattr(method, "MISSES_DRAWS", 100)
    table = v3_fitting()
    out = tmp_path / "v4"
    fit.fit_command(ensemble_folder(tmp_path, table), out)
    again = pd.read_csv(out / "fitting.csv")
    assert (out / "curves/fit.csv").exists() and list(again["seed"]) == list(table["seed"])
    for column in (*judged.KEYS, "cdr3_correct", "loss_step500", "loss_step3000"):
        np.testing.assert_allclose(again[column], table[column], atol=1e-6, err_msg=column)
    first = yaml.safe_load((out / "bands.yaml").read_text())
    shutil.copy(out / "fitting.csv", tmp_path / "committed.csv")
    fit.fit_command(out / "fitting.csv", out)
    second = yaml.safe_load((out / "bands.yaml").read_text())
    first.pop("provenance"), second.pop("provenance")
    assert first == second
    pd.testing.assert_frame_equal(pd.read_csv(out / "fitting.csv"), pd.read_csv(
        tmp_path / "committed.csv"))  # fmt: skip


def test_a_fit_refuses_a_window_at_the_floor(tmp_path):
    table = v3_fitting()
    table.loc[3, "loss_late"] = FLOOR
    table.to_csv(tmp_path / "statistics.csv", index=False)
    with pytest.raises(ValueError, match="at or below the floor"):
        fit.fit_command(tmp_path / "statistics.csv", tmp_path / "out")


V4 = ROOT / "config/golden/v4"


@pytest.mark.skipif(not (V4 / "bands.yaml").exists(), reason="v4's bands are not fitted yet")
def test_the_committed_bands_are_what_the_committed_fitting_data_give():
    """v4's bands.yaml is what the method makes of v4's fitting.csv, and fitting.csv's
    windows are what its committed curves give."""
    committed = yaml.safe_load((V4 / "bands.yaml").read_text())
    fitting = pd.read_csv(V4 / "fitting.csv")
    budget, floor, _ = records.recipe_inputs()
    again = method.fit_bands(fitting, floor, budget, bands=("committed",))["committed"]
    assert committed["version"] == method.VERSION and committed["method"]["budget"] == budget
    for key in judged.KEYS:
        band = committed["bands"][records.band_key(key)]
        for side in ("low", "high"):
            assert (side in band) == (again[key].get(side) is not None), key
            if side in band:
                assert band[side] == pytest.approx(again[key][side], rel=1e-5), key
    assert committed["reference"] == records.rounded(records.reference(fitting))
    curves = pd.read_csv(V4 / "curves/fit.csv").set_index("step")
    for row in fitting.to_dict("records"):
        found = judged.run_statistics(curves[f"seed{row['seed']}"].to_numpy(float), 0, 0, None)
        for key in judged.WINDOWS:
            assert row[key] == pytest.approx(found[key], abs=1e-9), (row["seed"], key)
