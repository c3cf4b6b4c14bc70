"""Shared fixtures: a private copy of the workflow to run Snakemake in, and a runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


def default_config() -> dict:
    """The workflow's config: config/config.yaml, then config/claims.yaml (as the Snakefile)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return {**config, **yaml.safe_load((ROOT / "config" / "claims.yaml").read_text())}


def pytest_collection_modifyitems(config, items):
    """Run the SLURM tests last: once SLURM's client tools are installed, every Snakemake
    start asks `scontrol` for the cluster's config (the SLURM executor plugin does, at
    import), which waits ~10 s whenever no controller is running. Under pytest-xdist
    (--dist loadfile) this order is the order files are handed out, so test_slurm.py goes
    last to whichever worker is free first."""
    items.sort(key=lambda item: item.get_closest_marker("slurm") is not None)
