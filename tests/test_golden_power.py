"""The golden check's power harness (bench/golden_power.py): every fault of the plan
(config/golden/v3/faults.yaml) is one it injects, and each changes what the training or the
evaluation computes."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import torch

from tcrformer.core import numerics
from tcrformer.core.golden_file import GoldenFileError
from tcrformer.core.power import FAULTS_FILE, read_power_plan
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


def test_the_harness_injects_exactly_the_plans_faults():
    source = (BENCH / "golden_power.py").read_text()
    assert set(re.findall(r'fault == "(\w+)"', source)) == set(PLAN.faults)
    assert PLAN.seeds == tuple(range(300, 308))


def test_a_broken_plan_is_one_line_naming_the_file(tmp_path):
    plan = tmp_path / "faults.yaml"
    for text in ("faults: {}\nseeds: [1]\n", "faults: {a: b}\n", "[1, 2"):
        plan.write_text(text)
        with pytest.raises(GoldenFileError, match=str(plan)):
            read_power_plan(plan)
    with pytest.raises(GoldenFileError, match="not found"):
        read_power_plan(tmp_path / "absent.yaml")


@pytest.mark.parametrize("fault", list(PLAN.faults))
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


TRAINING_FAULTS = list(PLAN.faults)
FINGERPRINT = json.loads((ROOT / "tests/golden/numerics_fingerprint.json").read_text())
STEPS = 10  # the fingerprint's first steps: every fault has changed a loss by then
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
from tcrformer.training.fingerprint import short_run
runs = {}
for fault in sys.argv[1:]:
    with golden_power.training_fault(fault):
        runs[fault] = short_run(config, STEPS, pinned)
print(json.dumps(runs))
"""


@pytest.mark.skipif(not numerics.portable_supported()[0], reason="portable numerics unsupported")
def test_the_exact_bits_catch_every_training_fault_the_bands_may_miss():
    """The bands catch what moves a trained value past its spread (power.yaml); the exact
    bits of a short run (tests/test_numerics.py) catch any change to the training's
    arithmetic, so every training fault of the harness fails that check too."""
    code = SHORT_RUN.replace("STEPS", str(STEPS))
    done = subprocess.run(
        [sys.executable, "-c", code, POWER.CONTROL, *TRAINING_FAULTS],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    runs = {f: run["losses_float32_hex"] for f, run in json.loads(done.stdout).items()}
    expected = FINGERPRINT["losses_float32_hex"][:STEPS]
    assert runs[POWER.CONTROL] == expected  # the library as it is gives the fingerprint's bits
    missed = [f for f in TRAINING_FAULTS if runs[f] == expected]
    assert not missed, f"the fingerprint misses {missed}"


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
