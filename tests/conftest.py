"""Shared fixtures: a private copy of the workflow to run Snakemake in, a runner, and the two
complete runs the suite builds once and reads many times (every chapter of the default run
with a short training, and a run of another receptor and model sizes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# What a workflow copy needs; results/, .snakemake/ and the venv stay behind.
WORKFLOW_PARTS = (
    "Snakefile",
    "config",
    "workflow",
    "envs",
    "profiles",
    "bench",
    "pyproject.toml",
    "docs/claims_v4_review.md",  # the reviews the claims registration records
    "docs/claims_v4_review_final.md",
)


def copy_workflow(dest: Path) -> Path:
    for part in WORKFLOW_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / part)
    return dest


def run_fingerprint(
    *args: str, env: dict | None = None, patch: str = "", config: Path = ROOT / "config/config.yaml"
) -> dict:  # fmt: skip
    """`python -m tcrformer.training.fingerprint --config config *args` in a fresh process
    (its numerics pinned there) -> its JSON; `patch`: statements run on tcrformer.core.blas
    first (a missing library, another kernel family)."""
    code = "from tcrformer.training import fingerprint\nfingerprint.main()"
    command = [sys.executable, "-c", f"from tcrformer.core import blas\n{patch}\n{code}"]
    command += ["--config", str(config), *args]
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


# Every claims arm's changes at once, in a config a few steps can run: each reversal key that
# an arm some claim trains sets (Settings.used_arms; the speed benchmark's GRU trains none),
# at that arm's value, except `steps` (the caller's), `stress_step` (moved inside the first
# steps) and the two keys an arm sets to switch a piece off, which stay on so that dropout
# and the clip run too. test_numerics and test_emulated_cpus check its bits.
ARMS_KEPT_ON = ("dropout", "grad_clip")


def claims_arms_config(folder: Path, stress_step: int = 2) -> Path:
    from tcrclaims.settings import Settings

    config = default_config()
    arms = config["claims"]["arms"]
    for arm in Settings.from_config(config).used_arms():
        changes = arms[arm] or {}
        config["reversal"].update(
            {key: value for key, value in changes.items() if key not in ("steps", *ARMS_KEPT_ON)}
        )
    config["reversal"]["stress_step"] = stress_step
    path = folder / "claims_arms.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary directory."""
    return copy_workflow(tmp_path / "wf")


NETGUARD = ROOT / "tests" / "netguard"


@pytest.fixture(scope="session", autouse=True)
def no_network(tmp_path_factory):
    """Every Python subprocess of the suite runs behind tests/netguard; any internet
    connection it tries is refused and logged, and the session fails at the end."""
    log = tmp_path_factory.mktemp("netguard") / "connections.log"
    log.touch()
    old = {k: os.environ.get(k) for k in ("PYTHONPATH", "TCRFORMER_NETWORK_LOG")}
    path = os.pathsep.join(p for p in (str(NETGUARD), old["PYTHONPATH"]) if p)
    os.environ.update(PYTHONPATH=path, TCRFORMER_NETWORK_LOG=str(log))
    yield log
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    attempts = log.read_text()
    assert not attempts, f"tests tried to open network connections:\n{attempts}"


def snakemake(cwd: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run snakemake in `cwd`; returns the completed process (stdout and stderr captured)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*SNAKEMAKE, "--cores", "2", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def write_config(path: Path, overrides: dict) -> Path:
    path.write_text(yaml.safe_dump(overrides, sort_keys=False))
    return path


def private_copy(shared: Path, dest: Path) -> Path:
    """A copy of a shared workflow folder, its results and .snakemake records included (so
    Snakemake finds the same jobs done), for a test that runs Snakemake in it or changes it."""
    locks = shutil.ignore_patterns("locks", "__pycache__")
    return shutil.copytree(shared, dest, symlinks=True, ignore=locks)


def shared_workflow(tmp_path_factory, name: str, build) -> Path:
    """A workflow copy that `build` runs once per suite, whichever pytest-xdist worker asks
    first; the others wait for it and reuse it. It is read-only afterwards: a test that runs
    Snakemake in it works on a private_copy."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of this session
    folder = base / f"shared-{name}"
    with FileLock(f"{folder}.lock"):
        if not (folder / "built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(copy_workflow(folder / "wf"))
            (folder / "built").touch()
    return folder / "wf"


OFFLINE = {"plm": {"esm2": {"download": False}}}  # no network in tests: no ESM-2 weights
# Another receptor (config/examples/other_receptor.yaml: CASSLAPGATNEKLFF, its TRBV7-9 and
# TRBJ1-4 ends, its glutamate E12 as the focus), smaller notes and reversal models with
# other depths, and a short training.
OTHER_EXAMPLE = ROOT / "config" / "examples" / "other_receptor.yaml"
OTHER_RECEPTOR = yaml.safe_load(OTHER_EXAMPLE.read_text())["receptor"]["cdr3b"]
OTHER_RUN = {
    **yaml.safe_load(OTHER_EXAMPLE.read_text()),
    "run": "other",
    "notes": {"d_model": 128, "num_heads": 4, "d_ff": 256, "num_layers": 3},
    "reversal": {"d_model": 32, "num_heads": 2, "num_layers": 1, "steps": 40, "warmup": 10,
                 "report_every": 20, "eval_n": 50},
}  # fmt: skip
OTHER_RUN["plm"] = {**OTHER_RUN["plm"], **OFFLINE["plm"]}


# The .test config's short training (100 steps). The suite's runs test the code; the paper's
# 3,000-step training and the golden check of its values are tests/test_paper_run.py
# (`pytest -m training`, CI's step of its own, as the README's command 1 also checks them).
SHORT_TRAINING = yaml.safe_load((ROOT / ".test/config/config.yaml").read_text())["reversal"]


@pytest.fixture(scope="session")
def full_run(tmp_path_factory) -> Path:
    """Every chapter of the README's run (offline) with the short training, once per
    suite: results/paper."""

    def build(wf: Path) -> None:
        offline = write_config(wf / "offline.yaml", {**OFFLINE, "reversal": SHORT_TRAINING})
        proc = snakemake(wf, "--configfile", str(offline), timeout=3600)
        assert proc.returncode == 0, proc.stderr[-4000:]

    return shared_workflow(tmp_path_factory, "full", build)


@pytest.fixture(scope="session")
def other_run(tmp_path_factory) -> Path:
    """OTHER_RUN, once per suite: every figure, the complete run (its manifest) and the
    report of `figures` (other_report.zip)."""

    def build(wf: Path) -> None:
        config = str(write_config(wf / "other.yaml", OTHER_RUN))
        for targets in (["figures", "results/other/manifest.json"],
                        ["figures", "--report", "other_report.zip"]):  # fmt: skip
            proc = snakemake(wf, *targets, "--configfile", config, timeout=1800)
            assert proc.returncode == 0, proc.stderr[-4000:]

    return shared_workflow(tmp_path_factory, "other", build)


def default_config(receptor: bool = True) -> dict:
    """The workflow's config: config/config.yaml, then workflow/claims/config/claims.yaml (as
    the Snakefile), with the chapters' null receptor keys filled from the receptor block
    (receptor=False: as the files have them, for a test that changes the receptor)."""
    from tcrformer.core.config import apply_receptor

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = {**config, **yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())}
    return apply_receptor(config) if receptor else config


# Seconds each test file took in a recorded suite (`pytest --record-file-times`): the order
# pytest-xdist hands files out in (--no-loadscope-reorder keeps the collection's order).
FILE_TIMES = ROOT / "tests" / "file_times.json"


def pytest_addoption(parser):
    parser.addoption("--record-file-times", action="store_true",
                     help=f"write each test file's seconds to {FILE_TIMES.name}")  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """The longest files first, so that the workers finish together (longest processing
    time first). A file not recorded counts as 0 s; a file's time includes building the
    shared runs it is the first to ask for, so the builders start early. The SLURM test,
    mostly waiting on its daemons, runs beside the other worker's files: while its cluster
    runs, Snakemake's SLURM plugin reads the cluster's config from it, and once
    tests/slurm/cluster.sh has stopped it and removed slurm.conf, `scontrol` fails at once."""
    seconds = json.loads(FILE_TIMES.read_text()) if FILE_TIMES.exists() else {}
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))  # stable


_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each file's seconds, setup and teardown included (on the controller under xdist)."""
    name = report.nodeid.split("::")[0]
    _file_seconds[name] = _file_seconds.get(name, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    if session.config.getoption("--record-file-times") and not os.environ.get(
        "PYTEST_XDIST_WORKER"
    ):
        rounded = {k: round(v, 1) for k, v in sorted(_file_seconds.items())}
        FILE_TIMES.write_text(json.dumps(rounded, indent=1) + "\n")
