"""The golden bands of the trained values: measured, with a stated and checked false-alarm rate.

config/golden/ensemble_seeds.csv is the committed 32-seed ensemble of the paper's recipe the
bands are fitted on; ensemble_holdout.csv a second ensemble they were not fitted on;
power.yaml and power.csv what the golden check did with runs whose training code was broken.
These tests check that nobody typed a band (the bands are what the code fits from the
committed ensemble), that the budget is kept where it can be seen (leave one out, and out of
sample, at a stated confidence), and that the recorded power is what the golden logic gives.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from tcrformer.chapters.ensemble import bands as ensemble_bands
from tcrformer.chapters.ensemble import refit, validate
from tcrformer.core import golden

from conftest import ROOT, default_config

FOLDER = ROOT / "config" / "golden"
GOLDEN = FOLDER / "seed_values.yaml"
SEEDS = pd.read_csv(FOLDER / "ensemble_seeds.csv")
BANDS = yaml.safe_load((FOLDER / "ensemble_bands.yaml").read_text())
BUDGET = yaml.safe_load(GOLDEN.read_text())["error_budget"]
ENTRIES, INPUTS = golden.load_golden(GOLDEN)
TRAINED = [e for e in ENTRIES if e.tolerance.kind == golden.ENSEMBLE]
BY_KEY = {e.key: e for e in ENTRIES}


# Made by code, from the committed ensemble -----------------------------------------------------


def test_the_ensemble_has_at_least_32_seeds_and_its_provenance():
    provenance = BANDS["provenance"]
    assert len(SEEDS) >= 32 and provenance["n"] == len(SEEDS)
    assert sorted(provenance["seeds"]) == sorted(SEEDS["seed"])
    for field in ("command", "numerics", "date", "config_sha256"):
        assert provenance[field], field
    assert provenance["numerics"].startswith("portable")


def test_the_bands_are_what_the_code_fits_from_the_committed_ensemble():
    derived = refit.refit(FOLDER, default_config())
    assert derived["method"] == BANDS["method"] and derived["fit"] == BANDS["fit"]
    assert derived["bands"].keys() == BANDS["bands"].keys()
    for key, band in derived["bands"].items():
        for field, value in band.items():
            committed = BANDS["bands"][key][field]
            assert committed == (pytest.approx(value) if isinstance(value, float) else value), (
                key,
                field,
            )


def test_the_budget_is_the_golden_files_and_split_over_every_trained_key():
    method = BANDS["method"]
    assert method["budget"] == BUDGET == 0.01
    assert method["keys"] == len(TRAINED) == len(BANDS["bands"])
    rates = [band["false_alarm"] for band in BANDS["bands"].values()]
    assert sum(rates) == pytest.approx(BUDGET)


def test_bands_made_for_another_budget_are_refused(tmp_path):
    (tmp_path / "ensemble_bands.yaml").write_text(
        yaml.safe_dump({**BANDS, "method": {**BANDS["method"], "budget": 0.05}})
    )
    text = GOLDEN.read_text()
    (tmp_path / "seed_values.yaml").write_text(text)
    with pytest.raises(golden.GoldenFileError, match="made for error_budget 0.05"):
        golden.load_golden(tmp_path / "seed_values.yaml")


def test_every_trained_value_of_the_golden_file_takes_its_band_from_the_ensemble():
    keys = {e.key for e in TRAINED}
    losses = {e.key for e in ENTRIES if e.key.startswith("reversal.loss_step")}
    assert losses and losses <= keys
    assert {
        "reversal.heldout_exact",
        "reversal.cross_attention_antidiagonal_mean",
        "reversal.cdr3_output",
    } <= keys
    for entry in TRAINED:
        band = BANDS["bands"][entry.key]
        assert entry.tolerance.band == golden.parse_band("", entry.key, band)
        assert entry.placement  # where the seed's own printed value falls among ours


def test_every_recipe_key_is_an_input_and_a_draw_is_not():
    published = set(INPUTS["reversal"])
    for key in ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "warmup", "norm",
                "label_smoothing", "grad_clip", "init", "min_len", "max_len", "steps",
                "batch_size", "schedule", "adam.beta2", "positions", "score_scale", "lr_scale",
                "train_set", "stress_step", "stress_scale"):  # fmt: skip
        assert f"reversal.{key}" in published, key
    for draw in ("seed", "device", "impl", "compile", "eval_seed"):
        assert f"reversal.{draw}" not in published, draw
    config = default_config()
    changed = {**config, "reversal": {**config["reversal"], "warmup": 200}}
    rows, _ = golden.check({"reversal.heldout_exact": 999}, ENTRIES, INPUTS, changed)
    row = next(r for r in rows if r.key == "reversal.heldout_exact")
    assert row.status == golden.SKIPPED and "reversal.warmup = 200" in row.reason
    reseeded = {**config, "reversal": {**config["reversal"], "seed": 77}}
    rows, _ = golden.check({"reversal.heldout_exact": 999}, ENTRIES, INPUTS, reseeded)
    assert next(r for r in rows if r.key == "reversal.heldout_exact").status == golden.PASS


# What a band decides ----------------------------------------------------------------------------


def numeric_entry():
    return next(e for e in TRAINED if e.tolerance.band.low is not None)


def test_a_value_outside_the_band_fails_and_inside_passes():
    entry = numeric_entry()
    band = entry.tolerance.band
    assert golden.compare(band.low, entry.value, entry.tolerance)[0] == golden.PASS
    assert golden.compare(band.high, entry.value, entry.tolerance)[0] == golden.PASS
    below = band.low - max(abs(band.low) * 1e-6, 1e-9)
    assert golden.compare(below, entry.value, entry.tolerance)[0] == golden.FAIL


def test_a_wrong_cdr3_is_reported_not_failed_and_its_anti_diagonal_not_judged():
    cdr3 = BY_KEY["reversal.cdr3_output"]
    assert not cdr3.tolerance.band.judged  # 32 seeds cannot show a rate below 1/900
    values = {
        "reversal.cdr3_output": "FYQEYSSRISSAA",
        "reversal.cross_attention_antidiagonal_mean": 0.1,
    }
    rows = {r.key: r for r in golden.check(values, TRAINED)[0]}
    assert rows["reversal.cdr3_output"].status == golden.REPORT
    antidiagonal = rows["reversal.cross_attention_antidiagonal_mean"]
    assert antidiagonal.status == golden.REPORT and "not judged" in antidiagonal.reason
    values["reversal.cdr3_output"] = cdr3.value  # a right CDR3: the anti-diagonal is judged
    rows = {r.key: r for r in golden.check(values, TRAINED)[0]}
    assert rows["reversal.cdr3_output"].status == golden.PASS
    assert rows["reversal.cross_attention_antidiagonal_mean"].status == golden.FAIL


def test_the_prediction_interval_misses_a_fresh_normal_draw_as_often_as_it_says():
    """Monte Carlo on normal data, where the interval is exact: 20,000 samples of 5 draws and
    one more draw each; at alpha 0.1 the miss rate must lie within 4 standard errors of 0.1.
    Without sqrt(1 + 1/n), or with a normal quantile for Student's, it is about 0.15 and 0.17."""
    rng = np.random.default_rng(0)
    samples, fresh = rng.normal(size=(20_000, 5)), rng.normal(size=20_000)
    intervals = np.array([ensemble_bands.prediction_interval(s, 0.1) for s in samples])
    missed = (fresh < intervals[:, 0]) | (fresh > intervals[:, 1])
    assert abs(missed.mean() - 0.1) < 4 * math.sqrt(0.1 * 0.9 / missed.size), missed.mean()


@pytest.mark.parametrize(
    ("scale", "x"),
    [
        (ensemble_bands.Scale("log_excess", 0.611088), 0.64),
        (ensemble_bands.Scale("log_misses", 1000.0), 997),
        (ensemble_bands.Scale("logit"), 0.95),
    ],
)
def test_each_scale_maps_back_to_the_value(scale, x):
    assert scale.to_value(float(scale.forward(x))) == pytest.approx(x)
    low, high = scale.band(-1.0, 1.0)
    assert low < high


def test_too_few_seeds_give_a_key_no_band_and_no_fail():
    seeds = SEEDS.head(2)
    fitted = ensemble_bands.fit_bands(seeds, "reversal", BUDGET, 0.611088, 1000)
    band = golden.parse_band("", "reversal.heldout_exact", fitted["reversal.heldout_exact"])
    tolerance = golden.Tolerance(golden.ENSEMBLE, band=band)
    assert golden.compare(5, 999, tolerance)[0] == golden.REPORT


# Kept where it can be seen ----------------------------------------------------------------------


def test_leave_one_out_failures_are_within_the_budget():
    check = validate.committed(GOLDEN, ("leave_one_out",))["leave_one_out"]
    assert check.draws == len(SEEDS)
    assert check.allowed, check.as_dict()


@pytest.mark.parametrize("name", validate.HOLDOUTS)
def test_out_of_sample_failures_are_within_the_budget(name):
    holdout = pd.read_csv(FOLDER / f"{validate.HOLDOUTS[name]}.csv")
    others = [pd.read_csv(FOLDER / f"{s}.csv") for n, s in validate.HOLDOUTS.items() if n != name]
    fitted_or_used = set(SEEDS["seed"]).union(*(set(o["seed"]) for o in others))
    assert len(holdout) >= 16 and not set(holdout["seed"]) & fitted_or_used
    check = validate.committed(GOLDEN, (name,))[name]
    assert check.draws == len(holdout)
    assert check.allowed, check.as_dict()


def test_the_budget_check_can_fail():
    """Two failures in 16 draws are more than a 1 % budget allows at 95 % confidence."""
    check = validate.Check("x", 16, (3, 9), ("k", "k"), BUDGET)
    assert not check.allowed and validate.Check("x", 16, (3,), ("k",), BUDGET).allowed


@pytest.mark.parametrize("stem", validate.HOLDOUTS.values())
def test_the_holdout_has_its_provenance(stem):
    provenance = yaml.safe_load((FOLDER / f"{stem}.yaml").read_text())["provenance"]
    holdout = pd.read_csv(FOLDER / f"{stem}.csv")
    assert sorted(provenance["seeds"]) == sorted(holdout["seed"])
    for field in ("command", "commit", "numerics", "date", "config_sha256"):
        assert provenance[field], field


# Power --------------------------------------------------------------------------------------------


def test_the_recorded_power_is_what_the_golden_logic_gives_on_the_recorded_runs():
    spec = importlib.util.spec_from_file_location("summary", ROOT / "bench/golden_power_summary.py")
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    recorded = yaml.safe_load((FOLDER / "power.yaml").read_text())
    runs = pd.read_csv(FOLDER / "power.csv", keep_default_na=False)
    values = runs.drop(columns=["caught", "failed_keys"]).to_dict("records")
    table = summary.power_table(summary.judge_runs(values, ENTRIES)).set_index("fault")
    assert set(table.index) == set(recorded["faults"]) and len(table) >= 3
    for fault, record in recorded["faults"].items():
        assert record["runs"] >= 4
        assert table.loc[fault, "caught"] == record["caught"], fault
        assert table.loc[fault, "keys"].split() == record["keys"], fault


def test_the_bands_name_the_method_they_were_fitted_with():
    """The bands file records the sha256 of the code that fitted them and whether that code
    was committed; a change of the method without a refit fails here."""
    import hashlib
    from pathlib import Path

    from tcrformer.chapters.ensemble import bands

    fitted = BANDS["provenance"]["bands_fitted"]
    assert fitted["dirty"] is False
    assert fitted["method_sha256"] == hashlib.sha256(Path(bands.__file__).read_bytes()).hexdigest()
