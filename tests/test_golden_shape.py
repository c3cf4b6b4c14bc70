"""The window multipliers by shape (tools/golden/shape.py): the fit's law depends on the shape c
alone, mirrored c swaps the sides, the calibration writes its record, and the method's
constants are the committed calibration's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from tools.golden import laws, method, scale, shape

RECORD = ROOT / "config/golden/v4/simulation"


def shape_k(model: laws.Model, seed: int, ensembles: int = 400) -> np.ndarray:
    """The committed band's calibrated (k_low, k_high) at the law, on seeded draws."""
    t = model.draw((ensembles, method.N_FIT), np.random.default_rng(seed))
    return laws.calibrate(model, scale.refit_relative(t), method.MARGIN * shape.SHARE)


def test_the_fit_depends_on_the_shape_alone():
    """The same c from the shape model and from loss_early's law at v3's moments (another
    lam, mean and spread of log x), on common draws: the same k to rounding."""
    c = 0.27
    small, design = shape.shape_model(c), shape.design_model_at("loss_early", c)
    assert design.lam == pytest.approx(3.75, abs=0.01) and design.mu != 0
    assert shape.shape_of(design) == pytest.approx(c, abs=1e-9)
    assert shape_k(design, seed=21) == pytest.approx(shape_k(small, seed=21), abs=1e-6)


def test_the_mirror_image_swaps_the_sides():
    """c and -c on common draws: log x mirrored, so k_low and k_high trade places."""
    found = shape_k(shape.shape_model(0.27), seed=22)
    mirror = shape_k(shape.shape_model(-0.27), seed=22)
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
    assert t.std() == pytest.approx(np.std(shape.design_data()["loss_late"], ddof=1), rel=0.01)


def test_a_bands_multiplier_is_the_largest_k_over_sides_and_shapes():
    table = pd.DataFrame(
        {"c": [-0.3, 0.0, 0.3], "k_low": [3.2, 3.4, 3.5], "k_high": [3.6, 3.4, 3.2]}
        | {f"k_{s}_sd": [0.01, 0.02, 0.03] for s in ("low", "high")}
        | {
            f"k_{s}_{b}{e}": [1.0, 2.0, 1.5]
            for s in ("low", "high")
            for b in ("family", "per_side")
            for e in ("", "_sd")
        }  # fmt: skip
    )
    assert shape.window_multiplier(table) == 3.6
    table.loc[2, "k_low"] = 3.7
    assert shape.window_multiplier(table) == 3.7
    top = shape.multipliers_table(table).set_index("band").loc["committed"]
    assert (top["k"], top["side"], top["c"], top["mc_sd"]) == (3.7, "low", 0.3, 0.03)


def test_the_confirmation_passes_only_if_every_upper_end_is_at_most_1_10():
    table = pd.DataFrame({"ratio": [0.9, 1.0], "ratio_high": [1.0, 1.1]})
    assert shape.passes(table)
    table.loc[0, "ratio_high"] = 1.1001
    assert not shape.passes(table)


def test_the_methods_multipliers_are_the_committed_calibrations():
    """method.WINDOW_K is multipliers.csv's table rounded to four decimals (K = 3.5751 as
    registered), each with a Monte-Carlo SD of at most 0.01, at 0.95 of its share."""
    table = shape.read_csv(RECORD / "multipliers.csv").set_index("band")
    runs = shape.read_csv(RECORD / shape.RUNS).set_index("verb")
    assert not runs.loc["calibrate", "dirty"]
    for band in method.BANDS:
        row = table.loc[band]
        assert method.WINDOW_K[band] == round(row["k"], 4), band
        assert row["mc_sd"] <= 0.01 and row["target"] == pytest.approx(0.95 * row["share"])
    assert method.WINDOW_K["committed"] == 3.5751 == round(runs.loc["calibrate", "K"], 4)


def test_the_calibration_and_confirmation_run_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setattr(method, "SKEW_ENSEMBLES", 4000)
    monkeypatch.setattr(shape, "antidiagonal_k", shape.antidiagonal_k.__wrapped__)
    shapes = (-0.27, 0.0, 0.27, math.inf)
    k = shape.calibrate_command(150, 1, tmp_path, shapes, log=lambda _: None)
    table = shape.read_csv(tmp_path / "shape.csv")
    assert k == shape.window_multiplier(table) and list(table["c"]) == list(shapes)
    assert set(shape.read_csv(tmp_path / "multipliers.csv")["band"]) == set(method.BANDS)
    shape.confirm_command(100, 100, 2, tmp_path, shapes, log=lambda _: None)
    confirm = shape.read_csv(tmp_path / "confirm.csv")
    assert set(confirm["fit"]) == {"relative", *shape.WINDOWS} and len(confirm) == 32
    runs = shape.read_csv(tmp_path / shape.RUNS)
    assert list(runs["verb"]) == ["calibrate", "confirm"] and (runs["K"] == k).all()
    text = (tmp_path / "shape.md").read_text()
    assert "**Rule, written before the run:**" in text and "## The multipliers" in text
