"""The golden check's power harness (bench/golden_power.py): every fault of the plan
(config/golden/v4/faults.yaml) is one it injects, each but the control changes what the
training or the evaluation computes, and the control is the library as it is."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import subprocess
import sys
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import torch

from tcrformer.core import numerics
from tcrformer.core.golden_file import GoldenFileError
from tcrformer.core.power import FAULTS_FILE, Prediction, read_power_plan
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import ROOT, default_config
from tools.golden import power as judging
from tools.golden import records, validate

torch.set_num_threads(1)
BENCH = ROOT / "bench"


def harness(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


POWER = harness("golden_power")
PLAN = read_power_plan(ROOT / "config" / FAULTS_FILE)
TINY = dict(
    d_model=16, num_heads=2, d_ff=32, num_layers=2, steps=30, batch_size=16, warmup=10,
    log_every=30, report_every=10, eval_n=40, device="cpu", checkpoint_every=1000,
)  # fmt: skip


def tiny_run(fault: str, tmp_path):
    recipe = with_overrides(recipe_from_config(default_config()["reversal"]), **TINY)
    folder = tmp_path / fault
    folder.mkdir(parents=True)
    outputs = {
        "model": folder / "model.safetensors",
        "losses": folder / "losses.csv",
        "numerics": folder / "numerics.json",
        "timing": folder / "training_time.json",
    }
    return POWER.run_one(fault, recipe, outputs, {})


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return tiny_run(POWER.CONTROL, tmp_path_factory.mktemp("clean"))


FAULTS = [f for f in PLAN.faults if f != POWER.CONTROL]  # each must change the bits


def test_the_harness_injects_exactly_the_plans_faults():
    assert set(POWER.FAULTS) == set(PLAN.faults) and POWER.CONTROL in PLAN.faults
    assert PLAN.seeds == tuple(range(8200, 8208))
    assert PLAN.faults["none"].predicted == Prediction("loss_start", 0.0)
    assert all(fault.predicted is not None for fault in PLAN.faults.values())


def test_the_plan_reads_v4s_mappings_and_v3s_lines(tmp_path):
    assert PLAN.faults["beta2_0_999"].breaks.startswith("Adam's second-moment decay is 0.999")
    assert PLAN.faults["smoothing_0_05"].predicted == Prediction("loss_late", -50.0)
    v3 = read_power_plan(ROOT / "config/golden/v3/faults.yaml")  # the record of v3's runs
    assert len(v3.faults) == 6 and v3.seeds == tuple(range(300, 308))
    assert v3.faults["dropout_off"].breaks.startswith("the model is built without dropout")
    assert all(fault.predicted is None for fault in v3.faults.values())
    plan = tmp_path / "faults.yaml"
    plan.write_text("seeds: [1]\nfaults:\n  a: {breaks: it}\n  b: {breaks: it, predicted: null}\n")
    assert [f.predicted for f in read_power_plan(plan).faults.values()] == [None, None]


def test_a_broken_plan_is_one_line_naming_the_file(tmp_path):
    plan = tmp_path / "faults.yaml"
    for text in ("faults: {}\nseeds: [1]\n", "faults: {a: b}\n", "[1, 2"):
        plan.write_text(text)
        with pytest.raises(GoldenFileError, match=str(plan)):
            read_power_plan(plan)
    with pytest.raises(GoldenFileError, match="not found"):
        read_power_plan(tmp_path / "absent.yaml")
    broken = (
        "3",
        "{predicted: {key: loss_start, shift_sd: 1}}",
        "{breaks: it, predicted: 1.5}",
        "{breaks: it, predicted: {key: loss_start}}",
        "{breaks: it, predicted: {key: loss_start, shift_sd: large}}",
        "{breaks: it, predicted: {key: 2, shift_sd: 1}}",
    )
    for entry in broken:
        plan.write_text(f"seeds: [1]\nfaults:\n  fine: it\n  bad_fault: {entry}\n")
        with pytest.raises(GoldenFileError) as raised:
            read_power_plan(plan)
        message = str(raised.value)
        assert str(plan) in message and "'bad_fault'" in message and "\n" not in message


@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_changes_what_the_run_computes(fault, clean, tmp_path):
    broken = tiny_run(fault, tmp_path)
    assert broken.keys() == clean.keys()
    changed = [k for k in clean if broken[k] != clean[k]]
    assert changed, f"{fault} left every value as it was"


def test_the_faults_leave_the_library_as_it_was(clean, tmp_path):
    for fault in PLAN.faults:
        tiny_run(fault, tmp_path / fault)
    assert tiny_run(POWER.CONTROL, tmp_path / "again") == clean


def test_an_unknown_fault_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown fault"):
        tiny_run("gremlins", tmp_path)


FINGERPRINT = json.loads((ROOT / "tests/golden/numerics_fingerprint.json").read_text())
STEPS = 10  # the fingerprint's first steps: every fault but AFTER_WARMUP's has acted by then
# Faults that change nothing until the warm-up ends (step 400 of the paper's recipe, past the
# fingerprint's 60 steps): their bits are compared on a short run whose warm-up ends in it.
AFTER_WARMUP = ("decay_exponent_0_55",)
SHORT_WARMUP = 4
SHORT_RUN = """
import json, sys
sys.path.insert(0, "bench")
import yaml
from tcrformer.core import numerics
from tcrformer.core.config import apply_receptor
config = apply_receptor(yaml.safe_load(open("config/config.yaml")))
pinned = numerics.pin(numerics.Numerics.from_config(config.get("numerics")))
numerics.configure_torch(pinned, threads=None)
import golden_power
from tcrformer.training.loop import train
from tcrformer.training.recipe import recipe_from_config, with_overrides
paper = recipe_from_config(config["reversal"])
runs = {}
for run in sys.argv[1:]:  # FAULT@WARMUP: the paper recipe's first STEPS steps at that warm-up
    fault, warmup = run.split("@")
    recipe = with_overrides(paper, steps=STEPS, device="cpu", log_every=STEPS, warmup=int(warmup))
    with golden_power.training_fault(fault) as faulty:
        runs[run] = [float(x).hex() for x in train(faulty(recipe)).losses.numpy()]
print(json.dumps(runs))
"""


@pytest.mark.skipif(not numerics.portable_supported()[0], reason="portable numerics unsupported")
def test_the_exact_bits_of_a_short_run_catch_every_fault():
    """The bands catch what moves a trained value past its spread; the exact bits of a short
    run catch any change to the training's arithmetic within it. The control gives the
    fingerprint's bits (tests/test_numerics.py); every other fault changes them, but those
    that act only after the warm-up, which change a run whose warm-up ends within it."""
    warmup = recipe_from_config(default_config()["reversal"]).warmup  # the paper's
    control, short = f"{POWER.CONTROL}@{warmup}", f"{POWER.CONTROL}@{SHORT_WARMUP}"
    args = [control, short, *(f"{f}@{warmup}" for f in FAULTS)]
    args += [f"{f}@{SHORT_WARMUP}" for f in AFTER_WARMUP]
    code = SHORT_RUN.replace("STEPS", str(STEPS))
    done = subprocess.run([sys.executable, "-c", code, *args],
                          cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    runs = json.loads(done.stdout)
    assert runs[control] == FINGERPRINT["losses_float32_hex"][:STEPS]  # the library as it is
    unchanged = [f for f in FAULTS if runs[f"{f}@{warmup}"] == runs[control]]
    missed = [f for f in unchanged if f not in AFTER_WARMUP]
    assert not missed, f"the fingerprint misses {missed}"
    for fault in AFTER_WARMUP:  # nothing changes until the warm-up ends, then the bits do
        run = runs[f"{fault}@{SHORT_WARMUP}"]
        assert fault in unchanged and run[:SHORT_WARMUP] == runs[short][:SHORT_WARMUP], fault
        assert run != runs[short], f"{fault} left a short warm-up's bits as they were"


def same_evaluation(a, b) -> bool:
    return (a.heldout_exact, a.cdr3_output) == (b.heldout_exact, b.cdr3_output) and (
        np.array_equal(a.cross_attention, b.cross_attention)
    )


def test_evaluation_turns_dropout_off_and_would_see_it_left_on():
    """A model handed over in training mode is evaluated as in eval mode, whatever torch's
    random state; with eval() broken to leave dropout on, the same check sees it."""
    from tcrformer.training.evaluate import evaluate_recipe
    from tcrformer.training.loop import train

    recipe = with_overrides(recipe_from_config(default_config()["reversal"]), **TINY)
    assert recipe.dropout > 0
    model = train(recipe).model
    torch.manual_seed(1)
    first = evaluate_recipe(model.train(), recipe)
    torch.manual_seed(2)
    assert same_evaluation(evaluate_recipe(model.train(), recipe), first)
    torch.manual_seed(3)
    with mock.patch.object(torch.nn.Module, "eval", lambda self: self.train(True)):
        assert not same_evaluation(evaluate_recipe(model, recipe), first)


# The tool that judges the runs (tools/golden/judging.py) ---------------------------------------


@pytest.fixture(scope="module")
def judged_with():
    """v3's committed bands as the bands (any Band does), the model fitted on v3's 80 fitting
    seeds."""
    fitting = pd.read_csv(ROOT / "config/golden/v3/fitting.csv").query("seed >= 64")
    bands = records.read_bands(ROOT / "config/golden/v3/bands.yaml")
    model = validate.fit_generating(validate.columns_on_scale(fitting, 0.611088),
                                    validate.Method())  # fmt: skip
    return fitting, bands, model


def fault_runs(tmp_path, fitting, faults: dict) -> None:
    """A power folder as `snakemake power` writes it: per fault, runs on two seeds whose
    curves are fitting seeds' with loss_start moved by the fault's amount."""
    steps = np.arange(1, 3001)
    for fault, shift in faults.items():
        for seed, row in zip((8200, 8201), fitting.dropna().iloc[:2].to_dict("records"),
                             strict=True):  # fmt: skip
            folder = tmp_path / fault / f"seed{seed}"
            folder.mkdir(parents=True)
            loss = np.where(steps <= 300, row["loss_start"] + shift, row["loss_late"])
            loss[400:600] = row["loss_early"]
            pd.DataFrame({"step": steps, "loss": loss}).to_csv(folder / "losses.csv", index=False)
            values = {
                "reversal.heldout_exact": 999,
                "reversal.cdr3_output": "FYQEYSSRISSAC",
                "reversal.cross_attention_antidiagonal_mean": row["antidiagonal"],
            }
            (folder / "values.json").write_text(json.dumps(values))
            numerics = {"cpu": {"model": "CPU A"}, "mode": "portable"}
            (folder / "numerics.json").write_text(json.dumps(numerics))


def test_each_run_is_judged_and_each_faults_shift_is_paired_by_seed(tmp_path, judged_with):
    """A fault whose runs are the control's with loss_start raised: caught by loss_start
    alone, with an exact interval; its paired shift is the raise on the law's scale, the
    other keys' 0; the control is caught by none."""
    fitting, bands, model = judged_with
    fault_runs(tmp_path, fitting, {"none": 0.0, "slow": 0.5})
    table = judging.run_table(tmp_path, bands)
    assert set(table[table["fault"] == "slow"]["failed"]) == {"loss_start"}
    assert set(table[table["fault"] == "none"]["failed"]) == {""}
    summary = judging.summary(table, fitting, bands, 0.611088).set_index("fault")
    assert summary.loc["slow", "caught"] == 2 and summary.loc["none", "caught"] == 0
    assert summary.loc["slow", "low"] > 0.15 and summary.loc["slow", "high"] == 1
    control = table[table["fault"] == "none"].set_index("seed")
    slow = table[table["fault"] == "slow"].set_index("seed")
    law = model.laws["loss_start"]
    expected = np.mean(
        law.in_sds(validate.to_scale("loss_start", slow["loss_start"], 0.611088))
        - law.in_sds(validate.to_scale("loss_start", control["loss_start"], 0.611088))
    )
    assert summary.loc["slow", "shift_sd_loss_start"] == pytest.approx(expected, rel=1e-9)
    assert expected > 5 and summary.loc["slow", "shift_sd_loss_late"] == 0
    assert summary.loc["slow", "predicted"] > 0.99 > 0.05 > summary.loc["none", "predicted"]
    record = judging.power_record(tmp_path, "the command")
    assert record["provenance"]["command"] == "the command" and record["runs"] == 4
    assert record["machines"] == {"CPU A": 4} and record["numerics"] == {"portable": 4}


def test_runs_are_also_judged_by_the_bands_in_use(tmp_path, judged_with):
    """Where the pipeline judges by other bands than the tool's, each run is judged by both:
    a fault caught by the tool's loss_start band but inside a wider band in use is caught
    by the one and not the other, and the summary counts each."""
    fitting, bands, _ = judged_with
    fault_runs(tmp_path, fitting, {"none": 0.0, "slow": 0.5})
    wider = dict(bands, loss_start=dataclasses.replace(bands["loss_start"], high=10.0))
    table = judging.run_table(tmp_path, bands, wider)
    slow = table[table["fault"] == "slow"]
    assert set(slow["failed"]) == {"loss_start"} and set(slow["failed_in_use"]) == {""}
    summary = judging.summary(table, fitting, bands, 0.611088).set_index("fault")
    assert summary.loc["slow", "caught"] == 2 and summary.loc["slow", "caught_in_use"] == 0
    assert summary.loc["slow", "high_in_use"] < 1 and summary.loc["slow", "keys_in_use"] == ""
    assert "failed_in_use" not in judging.run_table(tmp_path, bands).columns
    assert records.bands_in_use().exists()


def test_the_predicted_catch_is_the_moved_laws_exceedance(judged_with):
    """One key moved by 3 SD: the predicted probability is its law's exact exceedance of
    that band, plus at most what the other keys catch unmoved; a floor (an infinite shift)
    is caught surely, an unmeasured key (NaN) left alone."""
    _, bands, model = judged_with
    z = np.random.default_rng(0).standard_normal((40_000, 5)) @ np.linalg.cholesky(
        model.correlation).T  # fmt: skip
    alone = judging.catch_probability(model, bands, {}, z, 0.611088)
    found = judging.catch_probability(model, bands, {"loss_early": 3.0}, z, 0.611088)
    law = model.laws["loss_early"].moved(3.0)
    high = validate.to_scale("loss_early", [bands["loss_early"].high], 0.611088)[0]
    exact = float(law.model.exceedance(high - law.shift, "high"))
    se = np.sqrt(found * (1 - found) / len(z))
    assert exact - 4 * se <= found <= exact + alone + 4 * se, (found, exact, alone)
    assert judging.catch_probability(model, bands, {"loss_late": -math.inf}, z, 0.611088) == 1
    assert judging.catch_probability(model, bands, {"misses": math.nan}, z, 0.611088) == alone


def test_power_is_judged_only_when_every_registered_run_is_done(tmp_path, capsys):
    """Power is judged once, on all of the faults and seeds registered in the plan
    (config/golden/v4/faults.yaml): an unfinished run stops it with one line, and nothing is
    written."""
    faults, seeds = judging.registered_faults()
    assert len(faults) >= 5 and len(seeds) >= 8 and judging.CONTROL in faults
    for fault in faults:
        for seed in seeds:
            (tmp_path / fault / f"seed{seed}").mkdir(parents=True)
    last = tmp_path / faults[-1] / f"seed{seeds[-1]}"
    assert len(judging.missing_runs(tmp_path, faults, seeds)) == len(faults) * len(seeds)
    for folder in tmp_path.glob("*/seed*"):
        if folder != last:
            (folder / "values.json").write_text("{}")
    assert judging.missing_runs(tmp_path, faults, seeds) == [f"{faults[-1]}/seed{seeds[-1]}"]
    out = tmp_path / "v4"
    assert judging.main([str(tmp_path), "--out", str(out)]) == 1
    assert f"{faults[-1]}/seed{seeds[-1]}" in capsys.readouterr().err
    assert not out.exists()
