"""Seed ensembles: settings and bad input, the distribution summaries, the seed file, and
the target as a user runs it."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch

from tcrformer.chapters.ensemble import distributions as ensemble
from tcrformer.chapters.ensemble.settings import Settings as EnsembleSettings
from tcrformer.core.config import ConfigError
from tcrformer.training.loop import new_run
from tcrformer.training.model import load_seed_model, save_models, state_dicts_equal
from tcrformer.training.recipe import recipe_from_config, with_overrides
from tcrformer.validation import validate

from conftest import ROOT, default_config, snakemake, write_config

SCHEMA_PATH = ROOT / "workflow/schemas/config.schema.yaml"

torch.set_num_threads(1)
CONFIG = default_config()
TINY = dict(
    d_model=16, num_heads=2, d_ff=32, num_layers=2, steps=40, batch_size=16, warmup=10,
    log_every=40, report_every=20, eval_n=20, device="cpu",
)  # fmt: skip


def tiny(**changes):
    return with_overrides(recipe_from_config(CONFIG["reversal"]), **{**TINY, **changes})


def settings(**section):
    """The ensemble's settings as the workflow makes them (the schema, then the chapter)."""
    config = copy.deepcopy({**CONFIG, "ensemble": {**CONFIG["ensemble"], **section}})
    return validate(config, SCHEMA_PATH)["ensemble"]


# Settings ---------------------------------------------------------------------------------------


def test_the_default_ensemble_is_32_seeds_of_the_paper_recipe():
    default = settings()
    assert isinstance(default, EnsembleSettings)
    assert default.recipe == "reversal" and default.seeds == tuple(range(32))
    assert default.recipe_for(CONFIG["reversal"], 7).seed == 7


@pytest.mark.parametrize(
    ("section", "key", "problem"),
    [
        ({"seeds": []}, "ensemble.seeds", "must not be empty"),
        ({"seeds": [0, -1]}, "ensemble.seeds[1]", ">= 0"),
        ({"seeds": [1, 1]}, "ensemble.seeds", "non-unique"),
        ({"seeds": list(range(5)), "max_seeds": 4}, "ensemble.seeds", "max_seeds = 4"),
        ({"recipe": "warp"}, "ensemble.recipe", "reversal"),
    ],
)
def test_bad_ensembles_name_their_key(section, key, problem):
    with pytest.raises(ConfigError) as err:
        settings(**section)
    assert err.value.key == key and problem in str(err.value)


# Distributions ----------------------------------------------------------------------------------


def test_describe_gives_the_order_statistics_and_percentiles():
    stats = ensemble.quantiles(np.arange(1, 101))
    assert stats["n"] == 100 and stats["min"] == 1 and stats["max"] == 100
    assert stats["median"] == 50.5 and stats["p5"] == pytest.approx(5.95)


def test_percentile_rank_counts_half_the_ties():
    sample = [1, 2, 2, 3]
    assert ensemble.percentile_rank(2, sample) == 50.0
    assert ensemble.percentile_rank(0, sample) == 0.0 and ensemble.percentile_rank(9, sample) == 100
    assert ensemble.placement(0.5, sample) == "below all 4 seeds"
    assert ensemble.placement(3.5, sample) == "above all 4 seeds"
    assert ensemble.placement(2, sample) == "at percentile 50 of 4 seeds"


def seeds_table():
    return pd.DataFrame(
        {
            "seed": [0, 1, 2, 3],
            "reversal.heldout_exact": [996, 999, 1000, 998],
            "reversal.loss_step500": [0.9, 1.0, 0.8, 0.95],
        }
    )


def test_summary_places_the_published_value_and_marks_keys_without_one():
    table = ensemble.summary_table(seeds_table(), {"reversal.loss_step500": 0.905})
    loss = table.set_index("key").loc["reversal.loss_step500"]
    assert loss["min"] == 0.8 and loss["max"] == 1.0 and loss["published"] == 0.905
    assert loss["published_percentile"] == 50.0  # above 0.8 and 0.9, below 0.95 and 1.0
    exact = table.set_index("key").loc["reversal.heldout_exact"]
    assert pd.isna(exact["published"]) and exact["published_placement"] == ""


def test_published_cdr3_correct_is_computed_from_the_printed_output():
    golden = {"reversal.cdr3_output": "FYQEYSSRISSAC", "reversal.heldout_exact": 999}
    keys = ["reversal.cdr3_correct", "reversal.heldout_exact"]
    published = ensemble.published_values(golden, "reversal", "CASSIRSSYEQYF", keys)
    assert published == {"reversal.cdr3_correct": 1, "reversal.heldout_exact": 999}
    wrong = ensemble.published_values(golden, "reversal", "CASSLAPGATNEKLFF", keys)
    assert wrong["reversal.cdr3_correct"] == 0


def test_loss_bands_per_step():
    losses = pd.DataFrame(
        {"seed": [0, 0, 1, 1, 2, 2], "step": [1, 2] * 3, "loss": [3.0, 2.0, 4.0, 1.0, 5.0, 3.0]}
    )
    bands = ensemble.loss_bands(losses)
    assert list(bands["step"]) == [1, 2]
    assert list(bands["median"]) == [4.0, 2.0] and list(bands["min"]) == [3.0, 1.0]


def test_stochastic_keys_leave_out_strings_and_the_smoothing_floor():
    values = {"r.loss_step500": 0.9, "r.label_smoothing_floor": 0.6, "r.cdr3_output": "F", "r.x": 3}
    assert ensemble.stochastic_keys(values) == ["r.loss_step500", "r.x"]


# The seed file -----------------------------------------------------------------------------------


def test_a_seed_file_holds_its_seeds_and_refuses_a_stranger(tmp_path):
    recipe = tiny(steps=2)
    models = {s: new_run(with_overrides(recipe, seed=s), torch.device("cpu")).model for s in (7, 9)}
    path = tmp_path / "models.safetensors"
    save_models(path, models, recipe.architecture())
    assert state_dicts_equal(load_seed_model(path, 9, "fast"), models[9])
    with pytest.raises(Exception, match="holds no weights of seed 8"):
        load_seed_model(path, 8, "fast")


# The target, as a user runs it -----------------------------------------------------------------

ENS = {"run": "ens", "reversal": {"steps": 60, "eval_n": 50}, "ensemble": {"seeds": [0, 1, 2]}}


@pytest.mark.slow
def test_the_ensemble_target_writes_table_figure_and_report(workflow_copy):
    config = write_config(workflow_copy / "ens.yaml", ENS)
    done = snakemake(workflow_copy, "ensemble", "--configfile", str(config), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = workflow_copy / "results/ens/ensemble"
    figure = workflow_copy / "results/ens/figures/figS3_seed_ensemble.png"
    table = pd.read_csv(folder / "ensemble.csv")
    assert set(table["n"]) == {3}
    assert "reversal.heldout_exact" in set(table["key"])
    assert "| key | n | min |" in (folder / "ensemble.md").read_text()
    assert figure.stat().st_size > 10_000
    assert sorted(pd.read_csv(folder / "seeds.csv")["seed"]) == [0, 1, 2]
    curves = pd.read_csv(folder / "curves.csv")  # every seed's full curve, committed later
    assert list(curves.columns) == ["step", "seed0", "seed1", "seed2"] and len(curves) == 60
    assert curves["seed1"].tolist() == pd.read_csv(folder / "seed1/losses.csv")["loss"].tolist()
    statistics = pd.read_csv(folder / "statistics.csv")  # 60 steps: no window of v3
    assert statistics["loss_start"].isna().all() and (statistics["misses"] >= 0).all()
    assert list(statistics["seed"]) == [0, 1, 2]
    # The ensemble trains what the reversal keys say: 60 steps per seed.
    losses = pd.read_csv(folder / "seed0/losses.csv")
    assert len(losses) == 60 and set(losses["seed"]) == {0}
    # A seed's job (one worker) is the single run of that seed (numerics.threads 2 workers),
    # bit for bit.
    single = write_config(workflow_copy / "single.yaml", {**ENS, "run": "single",
                          "golden": {"strict": False}, "numerics": {"threads": 2}})  # fmt: skip
    done = snakemake(workflow_copy, "reversal", "--configfile", str(single), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    single_values = json.loads((workflow_copy / "results/single/reversal/values.json").read_text())
    seed0 = json.loads((folder / "seed0/values.json").read_text())
    shared = {k: v for k, v in single_values.items() if not k.startswith("reversal.curve.")}
    assert {k: seed0[k] for k in shared} == shared  # the judged statistics: statistics.csv
    report = workflow_copy / "ens_report.zip"
    args = ("ensemble", "--configfile", str(config), "--report", str(report))
    done = snakemake(workflow_copy, *args)
    assert done.returncode == 0 and report.stat().st_size > 10_000, done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "expected"),
    [("ensemble={'max_seeds': 2}", "config error: ensemble.seeds = '32 seeds'")],
)  # the other cases: test_bad_ensembles_name_their_key, in-process
def test_bad_ensemble_input_is_one_line_and_nothing_is_written(workflow_copy, override, expected):
    done = snakemake(workflow_copy, "ensemble", "--config", override)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("config error")]
    assert len(lines) == 1 and lines[0].startswith(expected), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (workflow_copy / "results").exists()
