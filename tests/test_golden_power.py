"""The golden check's power harness (bench/golden_power.py): every fault it injects changes
what the training or the evaluation computes, and the recorded power is what the golden
logic gives on the recorded runs."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

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


@pytest.mark.parametrize("fault", list(POWER.FAULTS))
def test_every_fault_changes_what_the_run_computes(fault, clean, tmp_path):
    broken = tiny_run(fault, tmp_path)
    assert broken.keys() == clean.keys()
    changed = [k for k in clean if broken[k] != clean[k]]
    if fault == "dropout_at_eval":  # training is untouched, the evaluation is not
        assert all(broken[k] == clean[k] for k in clean if "loss_step" in k)
    assert changed, f"{fault} left every value as it was"


def test_the_faults_leave_the_library_as_it_was(clean, tmp_path):
    for fault in POWER.FAULTS:
        tiny_run(fault, tmp_path / fault)
    assert tiny_run(POWER.CONTROL, tmp_path / "again") == clean


def test_an_unknown_fault_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown fault"):
        tiny_run("gremlins", tmp_path)
