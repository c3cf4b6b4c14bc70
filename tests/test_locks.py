"""The pinned versions agree wherever they are written.

pyproject.toml pins the direct dependencies; locks/ holds every package, with hashes, that
the README's commands install (locks/refresh writes them); envs/*.yaml mirror the pins for
`--sdm conda`; the pre-commit hooks run the formatters CI runs; CITATION.cff names the
project's version. A pin changed in one place and not the others fails here. Files only: no
network, no install.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import ROOT

LOCKS = ("run", "test", "notebook", "ci")
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# conda-forge names in envs/*.yaml that are not the PyPI names of the locks.
CONDA_TO_PYPI = {"pytorch": "torch", "matplotlib-base": "matplotlib"}
NOT_PACKAGES = {"python", "pip"}
# README command 2, the test command: its install from the test lock, then pytest.
TEST_COMMAND = re.compile(r"^python3 -m venv \.venv && .*locks/test\.txt.* -m pytest$", re.M)


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: tuple[str, ...]


def read_lock(path: Path) -> tuple[dict[str, Pin], list[str]]:
    """({package: its pin}, the option lines) of a pip-compile lock."""
    pins, options = {}, []
    # A requirement continues over lines ending in a backslash; comments stand alone.
    text = re.sub(r"\\\n", " ", path.read_text())
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        spec, *rest = line.split(" --hash=")
        req = Requirement(spec)
        (specifier,) = req.specifier
        assert specifier.operator == "==", f"{path.name}: {spec} is not pinned with =="
        hashes = tuple(h.strip() for h in rest)
        pins[canonicalize_name(req.name)] = Pin(specifier.version, hashes)
    return pins, options


def pyproject_pins(root: Path, extra: str | None = None) -> dict[str, str]:
    """{package: version} of pyproject's dependencies, or of one of its extras."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    specs = project["optional-dependencies"][extra] if extra else project["dependencies"]
    pins = {}
    for spec in specs:
        req = Requirement(spec)
        (specifier,) = req.specifier
        assert specifier.operator == "==", f"pyproject.toml: {spec} is not pinned with =="
        pins[canonicalize_name(req.name)] = specifier.version
    return pins


def env_pins(path: Path) -> dict[str, str]:
    """{PyPI name: version} of what a conda environment file names (conda and pip entries)."""
    pins = {}
    for dep in yaml.safe_load(path.read_text())["dependencies"]:
        if isinstance(dep, dict):
            for spec in dep.get("pip", []):
                req = Requirement(spec)
                pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
            continue
        name, version = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(?:=+\s*([^\s=]+))?.*", dep).groups()
        if name.lower() in NOT_PACKAGES:
            continue
        assert version, f"{path.name}: {dep!r} is not pinned"  # tests/test_envs.py says so too
        pins[canonicalize_name(CONDA_TO_PYPI.get(name.lower(), name))] = version
    return pins


def public(version: str) -> str:
    """The version without its local label: 2.13.0+cpu -> 2.13.0."""
    return Version(version).public


def disagreements(root: Path) -> list[str]:
    """Every pin that one file writes differently from another, in words."""
    run, _ = read_lock(root / "locks/run.txt")
    test, _ = read_lock(root / "locks/test.txt")
    notebook, _ = read_lock(root / "locks/notebook.txt")
    found = []
    # pyproject's direct pins, in the locks that install them, at the same version.
    wanted = [("run", run, pyproject_pins(root)), ("test", test, pyproject_pins(root))]
    wanted.append(("test", test, pyproject_pins(root, "test")))
    wanted.append(("notebook", notebook, pyproject_pins(root)))
    wanted.append(("notebook", notebook, pyproject_pins(root, "notebook")))
    for lock_name, lock, pins in wanted:
        for name, version in pins.items():
            if name not in lock:
                found.append(f"{name}=={version} (pyproject.toml) is missing from {lock_name}.txt")
            elif public(lock[name].version) != version:
                found.append(
                    f"{name}: pyproject.toml pins {version}, "
                    f"locks/{lock_name}.txt has {lock[name].version}"
                )
    # The tests and the notebook run on the libraries the run installs: what two locks both
    # hold, they pin alike.
    for name_a, a, name_b, b in (
        ("run", run, "test", test),
        ("run", run, "notebook", notebook),
        ("test", test, "notebook", notebook),
    ):
        for name in sorted(a.keys() & b.keys()):
            if a[name].version != b[name].version:
                found.append(
                    f"{name}: locks/{name_a}.txt has {a[name].version}, "
                    f"locks/{name_b}.txt has {b[name].version}"
                )
    # The conda environments: each package at the version the run lock installs.
    for env in sorted((root / "envs").glob("*.yaml")):
        for name, version in env_pins(env).items():
            if name not in run:
                found.append(f"{name} ({env.name}) is missing from run.txt")
            elif public(run[name].version) != version:
                found.append(
                    f"{name}: envs/{env.name} pins {version}, locks/run.txt has {run[name].version}"
                )
    return found


def test_the_pins_agree_across_pyproject_the_envs_and_the_locks():
    assert not disagreements(ROOT)


def test_the_check_finds_a_pin_that_differs(tmp_path):
    """A copy with one pin changed in each kind of file: each change is reported."""
    for part in ("pyproject.toml", "locks", "envs"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / part)
    assert disagreements(tmp_path) == []

    def edit(path, old, new):
        text = (tmp_path / path).read_text()
        assert old in text, (path, old)
        (tmp_path / path).write_text(text.replace(old, new, 1))

    edit("pyproject.toml", '"pandas==2.3.3"', '"pandas==2.3.2"')
    edit("envs/numeric.yaml", "scipy =1.17.1", "scipy =1.17.0")
    edit("locks/test.txt", "\nnumpy==2.4.6 ", "\nnumpy==2.4.5 ")
    edit("pyproject.toml", '"pytest==9.2.0"', '"pytest==9.1.0"')
    edit("locks/notebook.txt", "\nnbclient==0.11.0 ", "\nnbclient==0.10.4 ")
    found = "\n".join(disagreements(tmp_path))
    assert "pandas: pyproject.toml pins 2.3.2, locks/run.txt has 2.3.3" in found
    assert "pandas: pyproject.toml pins 2.3.2, locks/test.txt has 2.3.3" in found
    assert "scipy: envs/numeric.yaml pins 1.17.0, locks/run.txt has 1.17.1" in found
    assert "numpy: pyproject.toml pins 2.4.6, locks/test.txt has 2.4.5" in found
    assert "numpy: locks/run.txt has 2.4.6, locks/test.txt has 2.4.5" in found
    assert "pytest: pyproject.toml pins 9.1.0, locks/test.txt has 9.2.0" in found
    assert "nbclient: pyproject.toml pins 0.11.0, locks/notebook.txt has 0.10.4" in found
    assert "nbclient: locks/test.txt has 0.11.0, locks/notebook.txt has 0.10.4" in found
    # A dependency added to pyproject.toml and not locked.
    edit("pyproject.toml", '"pyyaml==6.0.4",', '"pyyaml==6.0.4", "tabulate2==1.0",')
    assert "tabulate2==1.0 (pyproject.toml) is missing from run.txt" in disagreements(tmp_path)


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_package_is_pinned_and_hashed(lock):
    """pip's hash-checking mode (any --hash in the file) refuses a package without one."""
    pins, _ = read_lock(ROOT / f"locks/{lock}.txt")
    assert pins, f"locks/{lock}.txt is empty"
    unhashed = [name for name, pin in pins.items() if not pin.hashes]
    assert not unhashed, f"locks/{lock}.txt: no --hash for {unhashed}"
    for name, pin in pins.items():
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), name


@pytest.mark.parametrize("lock", ("run", "test", "notebook"))
def test_torch_is_the_cpu_build_from_the_pytorch_cpu_index(lock):
    pins, options = read_lock(ROOT / f"locks/{lock}.txt")
    assert pins["torch"].version == "2.13.0+cpu"
    assert options == [f"--extra-index-url {TORCH_INDEX}"]  # nothing of one machine's pip
    cuda = [name for name in pins if name.startswith(("nvidia-", "triton", "cuda-"))]
    assert not cuda, f"locks/{lock}.txt pulls the CUDA build's packages: {cuda}"


def test_the_ci_tools_lock_holds_what_locks_ci_in_pins():
    pins, options = read_lock(ROOT / "locks/ci.txt")
    assert options == []
    wanted = [
        Requirement(line)
        for line in (ROOT / "locks/ci.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert wanted
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins and req.specifier.contains(pins[name].version), (req, pins.get(name))


def test_the_pre_commit_hooks_run_the_locked_formatters():
    test, _ = read_lock(ROOT / "locks/test.txt")
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert {"ruff-check", "ruff-format", "snakefmt"} <= hooks.keys()
    for hook in hooks.values():
        for spec in hook.get("additional_dependencies", []):
            req = Requirement(spec)
            name = canonicalize_name(req.name)
            assert str(req.specifier) == f"=={test[name].version}", (hook["id"], spec)


def test_the_citation_names_the_project_its_version_and_the_paper():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert str(citation["version"]) == project["version"]
    assert citation["title"].startswith(project["name"])
    (paper,) = [r for r in citation["references"] if "1706.03762" in r.get("url", "")]
    assert paper["title"] == "Attention Is All You Need" and paper["year"] == 2017
    assert "Vaswani" not in str(citation["authors"])  # the paper is cited, not an author


def test_ci_runs_the_readme_test_command():
    (readme_command,) = TEST_COMMAND.findall((ROOT / "README.md").read_text())
    ci = (ROOT / ".ci/run").read_text()
    assert f"\n# {readme_command}\n" in ci, "the command in .ci/run's comment is not README's"
    workflow = yaml.safe_load((ROOT / ".github/workflows/main.yml").read_text())
    steps = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert readme_command in steps, "no GitHub step runs README's test command"
