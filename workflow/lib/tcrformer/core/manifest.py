"""Provenance: what produced the results of a run, and a checksum of every result file.

Nothing here depends on the clock, so two runs of the same commit and config on one machine
write the same manifest. Wall-clock times live in the benchmark files instead. The
numerics in force (tcrformer.core.numerics: CPU, the kernels torch used, the products,
MKL's branch, threads) are recorded per process that computed with torch, since trained
bits depend on them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tcrformer import __version__
from tcrformer.core.io import dumps_json, sha256
from tcrformer.core.shipped import REPOSITORY

PACKAGES = ("numpy", "torch", "snakemake", "pandas", "matplotlib", "fair-esm", "sceptr", "pyyaml")
LIBRARY = Path(__file__).resolve().parents[1]  # the tcrformer package this process imports


def code_digest(*parts: str, root: Path = LIBRARY) -> str:
    """sha256 of the Python files under `parts` (folders or files, relative to `root`, the
    library by default), each file's path relative to `root` and then its bytes, in sorted
    order: an edit, a new file, a removed or renamed one changes it, and nothing outside the
    parts does (comments and docstrings included: a file is hashed whole)."""
    digest = hashlib.sha256()
    for part in parts:
        path = root / part
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(source.relative_to(root).as_posix().encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_state(root: str | Path = REPOSITORY) -> dict[str, object]:
    """Commit and dirty flag of the workflow's checkout (the code that ran, wherever the run
    works), or 'unknown' outside git."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit, "dirty": dirty}


def config_digest(config: Mapping) -> str:
    return hashlib.sha256(dumps_json(config).encode()).hexdigest()


def build(
    produced_by: Mapping[str, str],
    config: Mapping,
    numerics: Mapping[str, Mapping] | None = None,
) -> dict:
    """The manifest: versions, git state, config digest, numerics, {path: sha256, bytes, rule}.

    `numerics` maps a process (a rule name) to what tcrformer.core.numerics.describe said there.
    """
    files = {
        path: {"sha256": sha256(path), "bytes": Path(path).stat().st_size, "rule": rule}
        for path, rule in sorted(produced_by.items())
    }
    return {
        "project": {"name": "tcrformer", "version": __version__},
        "git": git_state(),
        "config_sha256": config_digest(config),
        "config": dict(config),
        "versions": package_versions(),
        "numerics": dict(numerics or {}),
        "files": files,
    }
