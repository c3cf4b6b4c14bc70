"""The golden check's power harness (bench/golden_power.py): every fault of the plan
(config/golden/v4/faults.yaml) is one it injects, each but the control changes what the
training or the evaluation computes, and the control is the library as it is."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import torch

from tcrformer.core import numerics
from tcrformer.core.golden_file import GoldenFileError
from tcrformer.core.power import FAULTS_FILE, Prediction, read_power_plan
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import ROOT, default_config

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
