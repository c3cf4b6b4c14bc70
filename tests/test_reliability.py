"""Whole-pipeline guarantees: identical reruns, and a run killed anywhere recovers.

A killed run is recovered with the command the README documents:
    snakemake --unlock && snakemake --cores 2 <targets>
(the default profile sets rerun-incomplete, so half-done jobs are redone).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import OFFLINE, SNAKEMAKE, copy_workflow, snakemake, write_config

pytestmark = pytest.mark.slow

# Fast chapters and their figures; ESM-2 is not fetched (no network in tests).
FAST_TARGETS = ["toy", "notes", "plm", "figures_toy", "figures_notes", "figures_plm"]
# The kill tests use the chapters without the protein language models, to stay quick.
KILL_TARGETS = ["toy", "notes", "figures_toy", "figures_notes"]
# Files that legitimately differ between runs: timings, logs, provenance.
VARYING = ("logs", "benchmarks")


def digest_tree(results: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(results.rglob("*")):
        rel = path.relative_to(results)
        if path.is_file() and rel.parts[1] not in VARYING and "timing" not in path.name:
            digests[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def run_targets(wf: Path, targets: list[str], config: Path) -> None:
    proc = snakemake(wf, *targets, "--configfile", str(config))  # --configfile takes several
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_two_clean_runs_are_byte_identical(tmp_path, full_run):
    """A fresh run of the fast chapters against the suite's full default run (the same
    offline config, another clean copy, another process): every file the fresh run wrote is
    byte-identical in the full run."""
    wf = copy_workflow(tmp_path / "fresh")
    run_targets(wf, FAST_TARGETS, write_config(wf / "offline.yaml", OFFLINE))
    fresh, full = digest_tree(wf / "results"), digest_tree(full_run / "results")
    assert fresh.keys() <= full.keys(), sorted(fresh.keys() - full.keys())
    differ = [k for k in fresh if fresh[k] != full[k]]
    assert not differ, differ
    assert any(k.endswith(".png") for k in fresh) and any(k.endswith(".svg") for k in fresh)
    assert any(k.endswith(".npy") for k in fresh) and any(k.endswith(".csv") for k in fresh)


def kill_when(wf: Path, args: list[str], marker: str, delay: float, timeout: float = 300) -> None:
    """Start snakemake, wait until `marker` (a path under wf) exists, wait `delay` more
    seconds, then SIGKILL its whole process group."""
    proc = subprocess.Popen(
        [*SNAKEMAKE, "--cores", "2", *args],
        cwd=wf, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    try:
        while not (wf / marker).exists():
            assert proc.poll() is None, f"snakemake ended before {marker} appeared"
            assert time.monotonic() < deadline, f"{marker} never appeared"
            time.sleep(0.05)
        time.sleep(delay)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def recover(wf: Path, args: list[str]) -> None:
    """The README's recovery: unlock, then the same command again."""
    assert snakemake(wf, "--unlock").returncode == 0
    proc = snakemake(wf, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize(
    ("marker", "delay"),
    [
        ("results/paper/logs/toy_values.log", 0.3),  # while the toy chapter computes
        ("results/paper/toy/golden.ok", 0.0),  # between chapters
        ("results/paper/figures/fig01_toy_input.png", 0.2),  # while figures are drawn
    ],
    ids=["during-toy", "between-chapters", "during-figures"],
)
def test_killed_run_recovers_to_the_same_results(workflow_copy, full_run, marker, delay):
    """Killed, then recovered: every file of the chapters run is byte-identical to the
    uninterrupted full default run's (the same offline config)."""
    wf = workflow_copy
    args = [*KILL_TARGETS, "--configfile", str(write_config(wf / "offline.yaml", OFFLINE))]
    kill_when(wf, args, marker, delay)
    recover(wf, args)
    recovered, uninterrupted = digest_tree(wf / "results"), digest_tree(full_run / "results")
    assert {"paper/toy/golden.ok", "paper/notes/golden.ok"} <= recovered.keys()
    assert recovered.keys() <= uninterrupted.keys(), sorted(recovered.keys() - uninterrupted.keys())
    assert {k: uninterrupted[k] for k in recovered} == recovered


# A short training, killed mid-run: the whole snakemake process group gets SIGKILL once
# the rule's log shows a step past the first checkpoint.
SHORT_TRAINING = {
    **OFFLINE,
    "reversal": {
        "steps": 240,
        "batch_size": 32,
        "checkpoint_every": 40,
        "log_every": 20,
        "report_every": 80,
        "eval_n": 50,
        "d_model": 32,
        "num_heads": 2,
        "d_ff": 64,
    },
}
TRAINING_FILES = ("model.safetensors", "losses.csv", "values.json", "cross_attention.npy")


def test_killed_training_resumes_to_the_same_model(tmp_path):
    reference = copy_workflow(tmp_path / "uninterrupted")
    config = write_config(reference / "short.yaml", SHORT_TRAINING)
    run_targets(reference, ["reversal"], config)

    wf = copy_workflow(tmp_path / "killed")
    args = ["reversal", "--configfile", str(write_config(wf / "short.yaml", SHORT_TRAINING))]
    log = wf / "results/paper/logs/train_reversal_reversal.log"
    proc = subprocess.Popen(
        [*SNAKEMAKE, "--cores", "2", *args],
        cwd=wf, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 600
    try:
        while not (log.exists() and "step 100/240" in log.read_text()):
            assert proc.poll() is None, "training ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (wf / "results/paper/reversal/model.safetensors").exists()
    recover(wf, args)
    assert "resum" in log.read_text().lower()
    for name in TRAINING_FILES:
        ours = (wf / "results/paper/reversal" / name).read_bytes()
        assert ours == (reference / "results/paper/reversal" / name).read_bytes(), name
