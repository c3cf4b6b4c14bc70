"""Whole-pipeline guarantees: identical reruns, and a run killed anywhere recovers.

A killed run is recovered with the command the README documents:
    snakemake --unlock && snakemake --cores 2 <targets>
(the default profile sets rerun-incomplete, so half-done jobs are redone).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_module import RUN, deploy, git_head, repository_changes

from conftest import OFFLINE, ROOT, SNAKEMAKE, copy_workflow, snakemake, write_config

pytestmark = pytest.mark.slow

# Fast chapters and their figures; ESM-2 is not fetched (no network in tests).
FAST_TARGETS = [
    "toy",
    "notes",
    "plm",
    "figures_toy",
    "figures_notes",
    "figures_plm",
    "figures_schematic",
]
# Files that legitimately differ between runs: timings, logs, provenance.
VARYING = ("logs", "benchmarks")
# Where the run is killed, in order: once a file matching the pattern appears that was not
# there when that attempt began, and the seconds after it.
KILL_POINTS = [
    ("results/paper/logs/toy_values.log", 0.3),  # while the toy chapter computes
    ("results/paper/toy/golden.ok", 0.0),  # between chapters
    ("results/paper/figures/*.png", 0.2),  # while figures are drawn
]


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


def kill_when(wf: Path, args: list[str], marker: str, delay: float, timeout: float = 300) -> None:
    """Start snakemake, wait until a file matching `marker` (a pattern under wf) appears
    that was not there before, wait `delay` more seconds, then SIGKILL its whole process
    group."""
    before = set(wf.glob(marker))
    proc = subprocess.Popen(
        [*SNAKEMAKE, "--cores", "2", *args],
        cwd=wf, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    try:
        while not set(wf.glob(marker)) - before:
            assert proc.poll() is None, f"snakemake ended before a new {marker} appeared"
            assert time.monotonic() < deadline, f"no new {marker} appeared"
            time.sleep(0.05)
        time.sleep(delay)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended by itself
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def recover(wf: Path, args: list[str]) -> None:
    """The README's recovery: unlock, then the same command again."""
    assert snakemake(wf, "--unlock").returncode == 0
    proc = snakemake(wf, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_deployed_run_killed_three_times_recovers_to_the_clones_bytes(tmp_path, full_run):
    """The workflow deployed as a module in a user's folder with the .test config
    (test_module.deploy), its fast chapters killed during the toy chapter, then between
    chapters, then while figures are drawn, each time recovered the README's way: every file
    they end with is byte-identical to the suite's uninterrupted default run in a clone (the
    same chapters' config, another folder, other processes). So a rerun elsewhere gives the
    same bytes, and no kill point leaves a half-written file behind. Then the whole .test run
    completes there: its golden check passes, its manifest names the workflow's commit, and
    nothing is written into the repository."""
    before = repository_changes()
    user = deploy(tmp_path / "analysis")
    profile = ["--workflow-profile", str(ROOT / "profiles" / "default")]  # as docs/usage.md
    for marker, delay in KILL_POINTS:
        kill_when(user, [*profile, *FAST_TARGETS], marker.replace("/paper/", f"/{RUN}/"), delay)
        assert snakemake(user, "--unlock").returncode == 0
    recover(user, [*profile, *FAST_TARGETS])
    recovered = as_run(digest_tree(user / "results"), RUN)
    uninterrupted = as_run(digest_tree(full_run / "results"), "paper")
    assert {"toy/golden.ok", "notes/golden.ok", "plm/golden.ok"} <= recovered.keys()
    assert recovered.keys() <= uninterrupted.keys(), sorted(recovered.keys() - uninterrupted.keys())
    # A golden report names the golden file it read: the clone's own path, from the module.
    reports = {k for k in recovered if Path(k).stem == "golden_report"}
    assert {k: uninterrupted[k] for k in recovered.keys() - reports} == {
        k: v for k, v in recovered.items() if k not in reports
    }
    for name in (k for k in reports if k.endswith(".json")):
        ours, clones = (json.loads((root / name).read_text()) for root in
                        (user / "results" / RUN, full_run / "results" / "paper"))  # fmt: skip
        assert ours["rows"] == clones["rows"] and ours["summary"] == clones["summary"], name
    assert any(k.endswith(".png") for k in recovered) and any(k.endswith(".svg") for k in recovered)
    assert any(k.endswith(".npy") for k in recovered) and any(k.endswith(".csv") for k in recovered)
    done = snakemake(user, *profile, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    results = user / "results" / RUN
    assert (results / "golden.ok").is_file()
    summary = json.loads((results / "golden_report.json").read_text())["summary"]
    assert summary["FAIL"] == 0 and summary["PASS"] > 0, summary
    manifest = json.loads((results / "manifest.json").read_text())
    assert manifest["git"]["commit"] == git_head(), "the manifest names the workflow's commit"
    assert not (ROOT / "results" / RUN).exists()
    assert repository_changes() == before


def as_run(digests: dict[str, str], run: str) -> dict[str, str]:
    """One run's digests, keyed by the path inside its run folder."""
    return {k.removeprefix(f"{run}/"): v for k, v in digests.items() if k.startswith(f"{run}/")}


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
        with contextlib.suppress(ProcessLookupError):  # it may have ended by itself
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (wf / "results/paper/reversal/model.safetensors").exists()
    recover(wf, args)
    assert "resum" in log.read_text().lower()
    for name in TRAINING_FILES:
        ours = (wf / "results/paper/reversal" / name).read_bytes()
        assert ours == (reference / "results/paper/reversal" / name).read_bytes(), name
