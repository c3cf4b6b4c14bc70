"""bench/gpu_check.sh, the GPU path in one call, where no GPU is: it refuses CUDA in one
line, and its CPU run makes the whole table through the same profile and the same code."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, copy_workflow


def gpu_check(wf, *args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(wf / "bench/gpu_check.sh"), *args], env=environment,
                          capture_output=True, text=True, timeout=900)  # fmt: skip


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("gpu_check") / "wf")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_it_stops_in_one_line_and_writes_nothing(workflow_copy):
    done = gpu_check(workflow_copy)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("gpu_check: ") and done.stderr.count("\n") == 1, done.stderr
    assert "--device cpu" in done.stderr
    assert not (workflow_copy / "results").exists()


@pytest.mark.slow
def test_on_the_cpu_it_makes_the_whole_table(workflow_copy):
    done = gpu_check(workflow_copy, "--device", "cpu", "--steps", "4", "--seeds", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split(" | ") for line in done.stdout.splitlines()[2:]]
    found = {row[0].lstrip("| "): row[1] for row in rows}
    assert found["fingerprint, 4 steps, run twice"] == "identical bytes"
    assert found["reversal, the default training"].endswith(" steps/s")
    assert any(check.startswith("golden: reversal.") for check in found)
    assert found["ensemble, 2 seeds at once, 4 steps each"].endswith(" steps/s together")
    assert found["device"] == "cpu"
    assert (workflow_copy / "results/gpu_check/gpu_check.log").exists()


def load_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench/gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_check", module)  # its dataclass looks itself up
    spec.loader.exec_module(module)
    return module


def test_two_fingerprints_that_differ_fail_the_check(monkeypatch, tmp_path, capsys):
    script = load_script(monkeypatch)
    monkeypatch.setattr(script, "ROOT", tmp_path)
    record = {"losses_sha256": "0" * 64, "weights_sha256": "1" * 64, "step": "autograd"}
    outputs = iter(json.dumps({**record, "last_loss": loss}) for loss in (1.0, 2.0))
    monkeypatch.setattr(script.Check, "call", lambda self, what, command: (next(outputs), 1.0))
    monkeypatch.setattr(script.Check, "reversal", lambda self: ([], 1.0))
    monkeypatch.setattr(script.Check, "ensemble", lambda self, alone: [])
    monkeypatch.setattr(script.Check, "identity", lambda self: [])
    assert script.main(["--device", "cpu", "--steps", "3"]) == 1
    assert "| fingerprint, 3 steps, run twice | DIFFERENT bytes |" in capsys.readouterr().out
