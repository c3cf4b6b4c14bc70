"""The curve monitor (tcrformer.chapters.ensemble.monitor) on curves whose truth is known: over
fitting ensembles and correct runs drawn from one model it flags at most its budget, it
flags a shift of the size a doubled learning rate made and a loss below the floor, and the
live monitor flags where a replay of the same curve does."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tcrformer.chapters.ensemble import monitor

from conftest import default_config

FLOOR, STEPS = 0.611, 3000


def correct_curves(n, rng):
    """n runs: an excess loss decaying with the step, a seed's own level and pace (the
    blocks of one run are correlated), and per-step minibatch noise of sd 0.008."""
    t = np.arange(1, STEPS + 1)
    level = rng.normal(0.0, 0.08, (n, 1))
    pace = rng.normal(0.0, 0.03, (n, 1))
    excess = np.exp(1.0 + level - (0.75 + pace) * np.log(t))
    return FLOOR + 0.02 + excess + rng.normal(0, 0.008, (n, STEPS))


def test_a_correct_run_is_flagged_at_most_at_the_budget():
    """The rate over fitting ensembles and new runs: at most alpha (the union bound over
    30 correlated looks makes it conservative), measured on 40 x 250 runs."""
    rng, flagged, runs = np.random.default_rng(0), 0, 0
    for _ in range(40):
        reference = monitor.Reference.fit(correct_curves(32, rng), 0.05, FLOOR)
        for curve in correct_curves(250, rng):
            flagged += monitor.first_flag(reference, curve) is not None
            runs += 1
    rate = flagged / runs
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / runs)
    assert rate > 0.002  # it does look: not a monitor that never flags


def test_it_flags_a_doubled_rate_sized_shift_and_a_loss_below_the_floor():
    rng = np.random.default_rng(1)
    reference = monitor.Reference.fit(correct_curves(32, rng), 0.01, FLOOR)
    shifted = correct_curves(100, rng)
    shifted[:, 1000:] += 0.017  # the window-mean shift of lr_doubled (power.yaml)
    steps = [monitor.first_flag(reference, c) for c in shifted]
    assert np.mean([s is not None for s in steps]) >= 0.95
    assert all(s is None or s > 1000 for s in steps)
    below = correct_curves(1, rng)[0]
    below[200:] = 0.05  # dropped label smoothing goes below the floor
    assert monitor.first_flag(reference, below) == 300


def test_the_live_monitor_flags_where_the_replay_does(caplog):
    rng = np.random.default_rng(2)
    reference = monitor.Reference.fit(correct_curves(16, rng), 0.01, FLOOR)
    again = monitor.Reference.from_record(reference.record())
    assert again == reference
    curve = correct_curves(1, rng)[0]
    curve[1500:] += 0.05
    live = monitor.CurveMonitor(again)
    with caplog.at_level(logging.INFO, logger="tcrformer.monitor"):
        for step, loss in enumerate(curve, start=1):
            live.observe(step, float(loss))
    assert live.flagged_at == monitor.first_flag(reference, curve) == 1600
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if m.startswith("monitor: steps")]) == 30
    assert any("out of reach of a correct run at step 1600" in m for m in lines)


def test_a_block_cut_by_a_resume_is_not_judged():
    rng = np.random.default_rng(3)
    reference = monitor.Reference.fit(correct_curves(16, rng), 0.01, FLOOR)
    live = monitor.CurveMonitor(reference)
    for step in range(151, 201):  # resumed at step 150: half a block, far too high
        live.observe(step, 9.0)
    assert live.flagged_at is None
    for step in range(201, 301):
        live.observe(step, 9.0)
    assert live.flagged_at == 300


@pytest.mark.parametrize("mean", [0.5, 0.611])
def test_a_block_at_or_below_the_floor_is_out_of_reach(mean):
    y = monitor.on_scale(np.array([mean]), np.array([500]), FLOOR)
    assert y[0] == np.inf


def test_attach_says_why_it_is_off_and_watches_the_recipe_it_was_fitted_for(tmp_path):
    import yaml

    from tcrformer.training.recipe import recipe_from_config, with_overrides

    from conftest import default_config

    recipe = recipe_from_config(default_config()["reversal"])
    assert monitor.attach(None, recipe)[0] is None
    found, why = monitor.attach(tmp_path / "v2/bands.yaml", recipe)
    assert found is None and "is not there yet" in why
    reference = monitor.Reference.fit(correct_curves(8, np.random.default_rng(4)), 0.01, FLOOR)
    bands = tmp_path / "bands.yaml"
    other = with_overrides(recipe, warmup=recipe.warmup + 1)
    bands.write_text(yaml.safe_dump({"monitor": {"recipe": monitor.recipe_key(other),
                                                 **reference.record()}}))  # fmt: skip
    found, why = monitor.attach(bands, recipe)
    assert found is None and "fitted for another recipe" in why
    another_seed = with_overrides(recipe, seed=recipe.seed + 5)  # the seed is set aside
    bands.write_text(yaml.safe_dump({"monitor": {"recipe": monitor.recipe_key(another_seed),
                                                 **reference.record()}}))  # fmt: skip
    found, why = monitor.attach(bands, recipe)
    assert found.reference == reference and "monitor: on, 30 looks every 100 steps" in why


@pytest.mark.slow
def test_the_reversal_training_log_shows_the_monitor(workflow_copy):
    """End to end: with v2 bands fitted for the run's recipe beside the golden file, rule
    train_reversal's log has a line per block and the warning; the training's outputs are
    what they are without the monitor (it only writes to the log)."""
    import yaml

    from tcrformer.core.golden import bands_v2_file
    from tcrformer.training.recipe import recipe_from_config

    from conftest import snakemake, write_config

    section = {"steps": 200, "eval_n": 20, "warmup": 40, "log_every": 100, "report_every": 100}
    config = default_config()
    config["reversal"].update(section)
    recipe = recipe_from_config(config["reversal"])
    never = monitor.Reference(100, (100, 200), (-20.0, 50.0), FLOOR, 0.01, 32)  # flags at 100
    bands = bands_v2_file(workflow_copy / "config/golden/seed_values.yaml")
    bands.parent.mkdir(parents=True, exist_ok=True)
    record = {"monitor": {"recipe": monitor.recipe_key(recipe), **never.record()}}
    bands.write_text(yaml.safe_dump(record))
    losses = {}
    for run, on in (("watched", True), ("unwatched", False)):
        overrides = {"run": run, "reversal": section, "golden": {"monitor": on}}
        path = write_config(workflow_copy / f"{run}.yaml", overrides)
        target = f"results/{run}/reversal/losses.csv"
        done = snakemake(workflow_copy, target, "--configfile", str(path))
        assert done.returncode == 0, done.stderr[-3000:]
        losses[run] = (workflow_copy / target).read_text()
    log = (workflow_copy / "results/watched/logs/train_reversal_reversal.log").read_text()
    assert "monitor: on, 2 looks every 100 steps" in log
    assert "monitor: steps 1-100 mean loss" in log and "monitor: steps 101-200" in log
    assert "out of reach of a correct run at step 100" in log
    quiet = (workflow_copy / "results/unwatched/logs/train_reversal_reversal.log").read_text()
    assert "monitor: off (golden.monitor is false" in quiet
    assert losses["watched"] == losses["unwatched"]
