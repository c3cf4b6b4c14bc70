"""The pipeline through a real SLURM cluster on this machine (tests/slurm/cluster.sh).

One run of `snakemake --workflow-profile profiles/slurm` in a copy of the workflow,
with only the profile's SITE lines changed (the partition names of the local
cluster), builds the toy and notes chapters and a short reversal training run.
Then: every job has a SLURM job id that squeue lists as COMPLETED, the training job
was submitted with --gpus=1 to the GPU partition, the CPU jobs asked for no GPU, the
tiny jobs (golden checks and gates) ran on the submitting node instead of being sbatched
(`localrule: True`), and the golden check passes on what SLURM produced.

Skipped, saying why, where SLURM cannot be installed or started (no root, no apt).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
# The partitions tests/slurm/cluster.sh creates, in the order the profile's SITE
# partition lines come: default-resources first, then the training rule's.
LOCAL_PARTITIONS = ("ci", "ci_gpu")
# Hard bound on the whole Snakemake run (the test's budget is 5 minutes).
RUN_LIMIT_S = 300
# A short training run: only these keys change, and only if the config has them.
SHORT_TRAINING = {
    "steps": 20,
    "batch_size": 16,
    "checkpoint_every": 10,
    "log_every": 5,
    "report_every": 10,
    "eval_n": 20,
}
# The training rule has a wildcard (the recipe), so its output file is the target.
TRAINING_TARGET = "results/paper/reversal/model.safetensors"
# Serialises SLURM tests of concurrent pytest sessions on one machine: one cluster.
LOCK_FILE = Path("/tmp/tcrformer-slurm-test.lock")


def _why_no_slurm() -> str | None:
    if os.geteuid() != 0:
        return "needs root to install and start SLURM (tests/slurm/cluster.sh)"
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        return "SLURM is not installed and apt-get is not there to install it"
    return None


def _cluster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(CLUSTER), *args], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running one-node cluster; stopped at the end if this fixture started it."""
    reason = _why_no_slurm()
    if reason:
        pytest.skip(reason)
    with LOCK_FILE.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        was_running = _cluster("status").returncode == 0
        t0 = time.monotonic()
        started = _cluster("start")
        setup_s = time.monotonic() - t0
        if started.returncode == 3:
            pytest.skip(f"SLURM cannot be installed or started here: {started.stderr.strip()}")
        assert started.returncode == 0, f"cluster.sh start failed:\n{started.stderr}"
        print(f"\nSLURM set-up: {setup_s:.1f} s (already running: {was_running})")
        try:
            yield
        finally:
            if not was_running:
                stopped = _cluster("stop")
                assert stopped.returncode == 0, stopped.stderr


def _workflow_files() -> list[str]:
    """The files of this checkout that git knows or would add (not ignored ones)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def copy_workflow(dest: Path) -> Path:
    for name in _workflow_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


SITE_LINE = re.compile(r"^(\s*slurm_partition:\s*)(\S+)(\s+# SITE\b.*)$")


def site_edit(profile_text: str) -> str:
    """What a site does to profiles/slurm/config.yaml: set the partition names (the first
    SITE partition line is the default partition, every later one a training rule's GPU)."""
    edited, seen = [], 0
    for line in profile_text.splitlines():
        match = SITE_LINE.match(line)
        if match:
            line = match[1] + LOCAL_PARTITIONS[min(seen, 1)] + match[3]
            seen += 1
        edited.append(line)
    assert seen >= 2, "the profile has fewer SITE partition lines"
    return "\n".join(edited) + "\n"


def test_site_edit_changes_only_site_lines():
    original = (ROOT / "profiles/slurm/config.yaml").read_text().splitlines()
    edited = site_edit("\n".join(original)).splitlines()
    changed = [(a, b) for a, b in zip(original, edited, strict=True) if a != b]
    assert len(changed) == 4, changed  # the default partition and three training rules
    assert all("# SITE" in a and "# SITE" in b for a, b in changed)


def _short_training_config(wf: Path) -> dict:
    config = yaml.safe_load((wf / "config/config.yaml").read_text())
    reversal = config.get("reversal", {})
    return {"reversal": {k: v for k, v in SHORT_TRAINING.items() if k in reversal}}


def _has_rule(wf: Path, name: str) -> bool:
    rule = re.compile(rf"^rule {name}:", re.M)
    return any(rule.search(p.read_text()) for p in (wf / "workflow/rules").glob("*.smk"))


def _submissions(log: str) -> dict[str, list[str]]:
    """rule name -> SLURM job ids, from the executor's 'submitted' lines."""
    jobs: dict[str, list[str]] = {}
    pattern = re.compile(
        r"has been submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_([A-Za-z0-9_]+)/"
    )
    for job_id, rule in pattern.findall(log):
        jobs.setdefault(rule, []).append(job_id)
    return jobs


def _sbatch_calls(log: str) -> dict[str, list[str]]:
    """rule name -> the sbatch command lines logged by --verbose."""
    calls: dict[str, list[str]] = {}
    for line in log.splitlines():
        if "sbatch call:" in line:
            rule = re.search(r"--comment '?rule_([A-Za-z0-9_]+?)(?:_wildcards_\S*)?'?\s", line)
            assert rule, line
            calls.setdefault(rule[1], []).append(line)
    return calls


def _job_states(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(
        ["squeue", "--states=all", "--noheader", "-o", "%i %T", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def test_pipeline_runs_through_slurm(slurm_cluster, tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    profile = wf / "profiles/slurm/config.yaml"
    profile.write_text(site_edit(profile.read_text()))

    training = _has_rule(wf, "train_reversal")
    targets = ["toy", "notes"]
    args = []
    if training:
        targets.append(TRAINING_TARGET)
        overrides = tmp_path / "short_training.yaml"
        overrides.write_text(yaml.safe_dump(_short_training_config(wf)))
        args += ["--configfile", str(overrides)]

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    # Jobs inherit this environment (sbatch --export=ALL): Snakemake from this venv,
    # and the copy's own workflow/lib ahead of any installed tcrformer.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(wf / "workflow/lib")
    snakemake = shutil.which("snakemake", path=env["PATH"])
    assert snakemake, "snakemake not found next to the test's Python"
    # Targets before --configfile, which takes every word after it.
    cmd = ["timeout", "-s", "KILL", str(RUN_LIMIT_S), snakemake,
           "--workflow-profile", "profiles/slurm", "--verbose", "--cores", "2",
           *targets, *args]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=wf, env=env, capture_output=True, text=True)
    wall_s = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    (tmp_path / "snakemake.log").write_text(log)
    print(f"\nSnakemake through SLURM: {wall_s:.1f} s, targets {' '.join(targets)}")
    assert proc.returncode == 0, f"exit {proc.returncode} after {wall_s:.0f} s:\n{log[-6000:]}"

    # The chapters' computations went through SLURM and finished there; the tiny jobs did not.
    submitted = _submissions(log)
    print(f"sbatch submissions: {sum(map(len, submitted.values()))} ({sorted(submitted)})")
    expected = {"toy_values", "notes_values"} | ({"train_reversal"} if training else set())
    assert submitted.keys() == expected, submitted
    assert sum(map(len, submitted.values())) == len(expected)  # one job each, nothing else
    job_ids = [j for ids in submitted.values() for j in ids]
    states = _job_states(job_ids)
    assert states == {j: "COMPLETED" for j in job_ids}, states

    # The resources the profile asked for reached sbatch.
    calls = _sbatch_calls(log)
    assert calls.keys() == submitted.keys(), (calls.keys(), submitted.keys())
    for rule, lines in calls.items():
        for line in lines:
            if rule == "train_reversal":
                assert " --gpus=1" in line and " -p ci_gpu " in line, line
                assert " --cpus-per-gpu=" in line, line
            else:
                assert "--gpus" not in line and " -p ci " in line, line

    # The golden check passes on what the SLURM jobs wrote.
    for chapter in ("toy", "notes"):
        report = json.loads((wf / f"results/paper/{chapter}/golden_report.json").read_text())
        not_pass = [r["key"] for r in report["rows"] if r["status"] != "PASS"]
        assert report["summary"]["PASS"] > 0 and not not_pass, (chapter, not_pass)
        assert (wf / f"results/paper/{chapter}/golden.ok").exists()

    if not training:
        pytest.skip("no train_reversal rule yet: the GPU job was not exercised")
    assert len(submitted.get("train_reversal", [])) == 1, submitted
    assert (wf / TRAINING_TARGET).stat().st_size > 0
