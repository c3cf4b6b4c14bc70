"""A release: the version is declared alike in pyproject.toml, CITATION.cff, CHANGELOG.md and
the package, and the release workflow (.github/workflows/release.yml) reads that version and
its CHANGELOG section, or stops."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import yaml

import tcrformer

from conftest import ROOT

RELEASE_HEADING = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", re.M)


def test_the_version_is_declared_alike():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    changelog = (ROOT / "CHANGELOG.md").read_text()
    newest, date = RELEASE_HEADING.search(changelog).groups()
    assert (str(citation["version"]), newest, tcrformer.__version__) == (version,) * 3
    assert str(citation["date-released"]) == date
    headings = re.findall(r"^## .*$", changelog, re.M)
    assert headings[:2] == ["## Unreleased", f"## {version} ({date})"], headings[:2]


def read_step() -> str:
    """The release workflow's step that reads the version and its notes."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    steps = workflow["jobs"]["release"]["steps"]
    (step,) = [s for s in steps if s.get("id") == "declared"]
    return step["run"]


def run_read_step(folder: Path, runner_temp: Path) -> tuple[subprocess.CompletedProcess, str]:
    output = runner_temp / "output"
    output.touch()
    env = {**os.environ, "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(output)}
    done = subprocess.run(["bash", "-e", "-c", read_step()], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    return done, output.read_text()


def test_the_release_reads_the_declared_version_and_its_notes(tmp_path):
    done, output = run_read_step(ROOT, tmp_path)
    assert done.returncode == 0, done.stderr
    assert output == f"version={tcrformer.__version__}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    section = changelog.split(f"## {tcrformer.__version__} (", 1)[1].split("\n## ", 1)[0]
    notes = (tmp_path / "notes.md").read_text()
    assert notes.strip() and notes.strip() == section.split("\n", 1)[1].strip()


def test_the_release_stops_when_the_version_has_no_changelog_section(tmp_path):
    folder = tmp_path / "repository"
    folder.mkdir()
    for name in ("pyproject.toml", "CITATION.cff"):
        shutil.copy(ROOT / name, folder / name)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    unreleased = changelog.replace(f"## {tcrformer.__version__} (", "## 9.9.9 (")
    (folder / "CHANGELOG.md").write_text(unreleased)
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    done, output = run_read_step(folder, runner_temp)
    assert done.returncode != 0 and output == ""
