"""The execution profiles: they parse, every entry is explained, each says what it should,
and Snakemake dry-runs the pipeline with them (the gpu profile trains on CUDA, even under a
`--config` of the user's, and gives GPU slots to the training rules and to no other)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, copy_workflow

PROFILES = ROOT / "profiles"
NAMES = ("default", "gpu", "slurm")


def load(name: str) -> dict:
    return yaml.safe_load((PROFILES / name / "config.yaml").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_profile_parses_as_snakemake_reads_it(name):
    from snakemake.profiles import ProfileConfigFileParser

    assert isinstance(load(name), dict)
    path = PROFILES / name / "config.yaml"
    with path.open() as stream:
        args = ProfileConfigFileParser().parse(stream)
    assert args, name


@pytest.mark.parametrize("name", NAMES)
def test_every_entry_is_commented(name):
    """Each key with a value has a comment on its line or right above it."""
    lines = (PROFILES / name / "config.yaml").read_text().splitlines()
    uncommented = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, _, value = stripped.partition(":")
        if not value.strip() or value.strip().startswith("#"):
            continue  # a mapping's header line; its entries carry the comments
        above = lines[i - 1].strip() if i else ""
        if "#" not in value and not above.startswith("#"):
            uncommented.append(key)
    assert not uncommented, f"profiles/{name}: entries without a comment: {uncommented}"


@pytest.mark.parametrize("name", NAMES)
def test_every_profile_resumes_a_killed_run(name):
    """Profiles replace each other, so each one says it (the README's resume promise)."""
    assert load(name)["rerun-incomplete"] is True


TRAINING_RULES = {"train_reversal", "train_ensemble", "train_claim_arm"}


def test_default_profile_is_cpu_only():
    profile = load("default")
    assert "set-threads" not in profile  # torch threads are numerics.threads (config)
    gpus = [res.get("gpu", 0) for res in profile.get("set-resources", {}).values()]
    assert not any(gpus)
    assert "executor" not in profile
    assert profile["cores"] == "all"  # a plain `snakemake` runs, on every core


def test_gpu_profile_shares_the_gpu_among_the_training_rules():
    """The recipe's training takes every slot of the GPU; a seed or an arm's job one; the
    device comes from a config file, which a user's --config is laid over, not replaces."""
    profile = load("gpu")
    slots = profile["resources"]["gpu_slots"]
    shares = {r: res["gpu_slots"] for r, res in profile["set-resources"].items()}
    assert shares == {"train_reversal": slots, "train_ensemble": 1, "train_claim_arm": 1}
    assert slots > 1 and "config" not in profile and "executor" not in profile
    cuda = yaml.safe_load((PROFILES / "gpu" / profile["configfile"]).read_text())
    assert cuda == {"reversal": {"device": "cuda"}}


def test_slurm_profile_has_what_a_cluster_needs():
    profile = load("slurm")
    assert profile["executor"] == "slurm"
    defaults = profile["default-resources"]
    assert defaults["slurm_partition"] and defaults["mem_mb"] > 0 and defaults["runtime"] > 0
    for rule in TRAINING_RULES:
        training = profile["set-resources"][rule]
        assert training["gpu"] == 1 and training["cpus_per_gpu"] >= 1
        assert training["slurm_partition"] != defaults["slurm_partition"]
    assert profile["slurm-status-command"] == "squeue"
    assert profile["slurm-init-seconds-before-status-checks"] >= 1


def test_slurm_profile_marks_the_lines_a_site_edits():
    text = (PROFILES / "slurm" / "config.yaml").read_text()
    site = [line.strip() for line in text.splitlines() if "# SITE" in line]
    for what in ("slurm_partition", "slurm_account", "gpu_model"):
        assert any(line.lstrip("# ").startswith(what) for line in site), what
    # only partition lines are live (the default one, and the GPU one of each training
    # rule); the account and the GPU model are opt-in
    live = [line for line in site if not line.startswith("#")]
    assert len(live) == 1 + len(TRAINING_RULES)
    assert all(line.startswith("slurm_partition:") for line in live)


def test_slurm_option_names_exist_in_the_installed_plugin():
    """The profile's slurm-* keys are options of snakemake-executor-plugin-slurm."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    from dataclasses import fields

    from snakemake_executor_plugin_slurm import ExecutorSettings

    options = {"slurm-" + f.name.replace("_", "-") for f in fields(ExecutorSettings)}
    used = {key for key in load("slurm") if key.startswith("slurm-")}
    assert used and used <= options, used - options


# --- dry runs of the real pipeline -------------------------------------------------------

needs_reversal = pytest.mark.skipif(
    not (ROOT / "workflow/rules/reversal.smk").exists(),
    reason="workflow/rules/reversal.smk (rule train_reversal) is not written yet",
)


def _dry_run(wf: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "2", *args],
        cwd=wf,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def _resources_by_rule(dry_run_output: str) -> dict[str, list[str]]:
    """rule name -> the `resources:` lines of its jobs in a dry run."""
    found: dict[str, list[str]] = {}
    rule = None
    for line in dry_run_output.splitlines():
        header = re.match(r"^(?:local)?rule (\w+):", line)
        if header:
            rule = header[1]
        elif rule and line.strip().startswith("resources:"):
            found.setdefault(rule, []).append(line.strip())
    return found


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("profiles") / "wf")


# A Snakefile that is the workflow, and says at parse time which device each training rule's
# params name: the recipes the rules' params are read from.
DEVICE_PROBE = """
include: "Snakefile"

import sys

devices = {
    "train_reversal": REVERSAL["reversal"].device,
    "train_ensemble": ENSEMBLE.recipe_for(config["reversal"], ENSEMBLE.seeds[0]).device,
    "train_claim_arm": sorted({arm.device for arm in CLAIMS.arms.values()}),
}
print(f"training devices: {devices}", file=sys.stderr)
"""


@pytest.mark.slow
@needs_reversal
def test_gpu_profile_trains_on_cuda_under_a_users_config(workflow_copy):
    """`--config run=g1` under profiles/gpu: every training rule still names cuda, and the
    GPU's slots go to the training rules only."""
    (workflow_copy / "device_probe.smk").write_text(DEVICE_PROBE)
    profile = ("-s", "device_probe.smk", "--workflow-profile", "profiles/gpu")
    out = _dry_run(workflow_copy, *profile, "reversal", "ensemble", "claims", "--config", "run=g1")
    devices = {"train_reversal": "cuda", "train_ensemble": "cuda", "train_claim_arm": ["cuda"]}
    assert f"training devices: {devices}" in out, out[-4000:]
    assert "results/g1/reversal/model.safetensors" in out
    slots = load("gpu")["resources"]["gpu_slots"]
    expected = {"train_reversal": f"gpu_slots={slots}", "train_ensemble": "gpu_slots=1",
                "train_claim_arm": "gpu_slots=1"}  # fmt: skip
    resources = _resources_by_rule(out)
    assert TRAINING_RULES <= resources.keys(), resources.keys()
    for rule, lines in resources.items():
        found = {m[0] if (m := re.search(r"\bgpu_slots=\d+", line)) else None for line in lines}
        assert found == {expected.get(rule)}, (rule, lines[:2])
        assert not any(re.search(r"\bgpu=[1-9]", line) for line in lines), (rule, lines[:2])


@pytest.mark.slow
@needs_reversal
def test_slurm_profile_dry_run_sends_the_training_rule_to_the_gpu_partition(workflow_copy):
    out = _dry_run(workflow_copy, "--workflow-profile", "profiles/slurm", "reversal")
    resources = _resources_by_rule(out)
    training = resources["train_reversal"]
    assert all("slurm_partition=gpu" in r and re.search(r"\bgpu=1\b", r) for r in training)
    assert all("cpus_per_gpu=" in r for r in training)
    cpu_rules = [r for name, lines in resources.items() if name != "train_reversal" for r in lines]
    assert cpu_rules and all("slurm_partition=cpu" in r for r in cpu_rules)


@pytest.mark.slow
def test_default_profile_dry_run_runs_on_the_cpu(workflow_copy):
    out = _dry_run(workflow_copy, "toy")
    resources = _resources_by_rule(out)
    assert resources, out[-4000:]
    assert not any(re.search(r"\bgpu=[1-9]", r) for lines in resources.values() for r in lines)


# --- the GPUs a process sees -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("visible", "count"),
    [("0", 1), ("0,1", 2), ("", 0), ("-1", 0), ("0,-1,1", 1), ("GPU-5b2a,GPU-77c1", 2)],
)
def test_visible_gpus_reads_cuda_visible_devices_as_cuda_does(visible, count):
    from tcrformer.core.numerics import visible_gpus

    assert visible_gpus({"CUDA_VISIBLE_DEVICES": visible}) == count


@pytest.mark.slow
@needs_reversal
def test_gpu_profile_dry_runs_on_one_faked_gpu(workflow_copy, monkeypatch):
    """The GPU profile on a machine with one GPU (CUDA_VISIBLE_DEVICES=0 stands in for it):
    the training plans, on one process (a GPU needs no workers)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    out = _dry_run(workflow_copy, "--workflow-profile", "profiles/gpu", "reversal")
    assert "train_reversal" in _resources_by_rule(out), out[-2000:]
