"""The conda environments (envs/*.yaml) agree with the pip install path.

Conda cannot run here, so the environments are checked against what it would build
from: every package they name is importable in this (pip) environment at the
version pyproject.toml pins, and every rule that runs code names one of them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))
# conda-forge name -> (PyPI distribution name, import name); pip entries use PyPI names.
CONDA_TO_PYPI = {
    "pytorch": ("torch", "torch"),
    "matplotlib-base": ("matplotlib", "matplotlib"),
    "matplotlib": ("matplotlib", "matplotlib"),
    "pyyaml": ("pyyaml", "yaml"),
    "numpy": ("numpy", "numpy"),
    "pandas": ("pandas", "pandas"),
    "scipy": ("scipy", "scipy"),
    "jsonschema": ("jsonschema", "jsonschema"),
    "safetensors": ("safetensors", "safetensors"),
}
PIP_IMPORT_NAMES = {
    "fair-esm": "esm",
    "sceptr": "sceptr",
    "scipy-openblas32": "scipy_openblas32",
    "numba": "numba",
    "libtcrlm": "libtcrlm",
    "tidytcells": "tidytcells",
    "blosum": "blosum",
}
# Importing these loads a library whose settings are read once per process (scipy_openblas32:
# OpenBLAS's kernel family, which core.blas sets when it loads it): found, not imported.
FOUND_NOT_IMPORTED = {"scipy_openblas32"}
NOT_PACKAGES = {"python", "pip"}  # the interpreter and the installer themselves
# What a dependency pulls in from PyPI, pinned in an env so that it does not float.
TRANSITIVE = {"libtcrlm", "tidytcells", "blosum"}
ACTIONS = ("shell", "script", "notebook", "wrapper", "run")


def pyproject_pins() -> dict[str, str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for spec in project["dependencies"]:
        req = Requirement(spec)
        (specifier,) = req.specifier  # every dependency is pinned with one ==
        assert specifier.operator == "==", spec
        pins[req.name.lower()] = specifier.version
    return pins


def env_packages(path: Path) -> list[tuple[str, str | None, str]]:
    """(PyPI name, pinned version or None, import name) for each package an env names."""
    env = yaml.safe_load(path.read_text())
    packages = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for spec in dep.get("pip", []):
                req = Requirement(spec)
                version = next(iter(req.specifier)).version if req.specifier else None
                packages.append((req.name.lower(), version, PIP_IMPORT_NAMES[req.name.lower()]))
            continue
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(?:=+\s*([^\s=]+))?(?:\s*=\s*\S+)?\s*", dep)
        assert match, f"{path.name}: cannot read conda spec {dep!r}"
        name, version = match[1].lower(), match[2]
        if name in NOT_PACKAGES:
            continue
        assert name in CONDA_TO_PYPI, f"{path.name}: add {name!r} to CONDA_TO_PYPI"
        pypi, module = CONDA_TO_PYPI[name]
        packages.append((pypi, version, module))
    return packages


def test_there_is_one_env_per_rule_group():
    assert {p.stem for p in ENVS} >= {"numeric", "torch", "plm", "plotting"}


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_is_conda_forge_only_and_pinned(env):
    spec = yaml.safe_load(env.read_text())
    assert spec["channels"] == ["conda-forge", "nodefaults"]
    for pypi, version, _ in env_packages(env):
        assert version, f"{env.name}: {pypi} is not pinned"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_pins_agree_with_pyproject(env):
    pins = pyproject_pins()
    python = next(d for d in yaml.safe_load(env.read_text())["dependencies"] if "python" in str(d))
    assert re.fullmatch(r"python\s*=\s*3\.1[1-9]", python), python  # requires-python >= 3.11
    for pypi, version, _ in env_packages(env):
        if pypi in TRANSITIVE:  # pinned as locks/run.txt has it (tests/test_locks.py)
            assert version is not None, f"{env.name}: {pypi} is not pinned"
            continue
        assert pypi in pins, f"{env.name}: {pypi} is not a dependency in pyproject.toml"
        assert version == pins[pypi], f"{env.name}: {pypi} {version} != pyproject {pins[pypi]}"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_packages_import_in_the_pip_environment(env):
    for pypi, version, module in env_packages(env):
        if module in FOUND_NOT_IMPORTED:
            assert importlib.util.find_spec(module) is not None, module
        else:
            importlib.import_module(module)
        installed = importlib.metadata.version(pypi).split("+")[0]  # torch: 2.13.0+cpu
        assert installed == version, f"{pypi}: installed {installed}, {env.name} pins {version}"


CLAIMS = ROOT / "workflow" / "claims"  # a chapter's own folder: its scripts import tcrclaims too


def script_folders() -> list[Path]:
    """Every folder that holds a script a rule runs (its `script:`, relative to its file),
    the claims' folder's rules included."""
    rule_files = [*(ROOT / "workflow/rules").glob("*.smk"), *CLAIMS.glob("*.smk")]
    found = set()
    for path in rule_files:
        for script in re.findall(r'script:\s*\n\s*"([^"]+)"', path.read_text()):
            found.add((path.parent / script).resolve().parent)
    return sorted(found)


@pytest.mark.parametrize("folder", script_folders(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_rule_script_imports_the_library_from_its_own_folder(folder, tmp_path):
    """In a conda environment (no install, Snakemake's PYTHONPATH dropped) a rule script
    finds tcrformer in its own folder, which Snakemake puts on its path: the library of
    this checkout, from any working folder; a claims script finds tcrclaims there too."""
    probe = (f"import sys; sys.path.append({str(folder)!r}); from tcrformer.core import "
             "shipped; print(shipped.__file__); print(shipped.REPOSITORY)")  # fmt: skip
    if folder.is_relative_to(CLAIMS):
        probe += "; import tcrclaims; print(tcrclaims.__file__)"
    # -S: no site-packages (no installed tcrformer); -I: no PYTHONPATH, no current folder
    done = subprocess.run([sys.executable, "-S", "-I", "-c", probe], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    module, repository, *claims = done.stdout.split()
    assert Path(module).resolve() == ROOT / "workflow/lib/tcrformer/core/shipped.py"
    assert Path(repository) == ROOT
    if folder.is_relative_to(CLAIMS):
        assert Path(claims[0]).resolve() == CLAIMS / "lib/tcrclaims/__init__.py"


def rules_in(path: Path) -> dict[str, str]:
    """Rule name -> the text of its body, for the rules defined at the top level."""
    text = path.read_text()
    heads = list(re.finditer(r"^(?:rule|checkpoint) (\w+):", text, re.M))
    bodies = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[head.end() : end]
        # the body ends at the first line back at column 0 (code between rules)
        stop = re.search(r"^\S", body, re.M)
        bodies[head[1]] = body[: stop.start()] if stop else body
    return bodies


def workflow_files() -> list[Path]:
    files = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
    files += sorted((ROOT / "workflow" / "claims").glob("*.smk"))  # a chapter's own folder
    files += [p for p in (ROOT / "Snakefile", ROOT / "workflow" / "Snakefile") if p.exists()]
    return files


def conda_problems(files: list[Path]) -> tuple[list[str], list[str], list[str]]:
    """(rules without conda:, conda: paths that are no file, rules with run:)."""
    missing, bad_path, run_blocks = [], [], []
    for smk in files:
        for name, body in rules_in(smk).items():
            actions = [a for a in ACTIONS if re.search(rf"^\s+{a}:", body, re.M)]
            if not actions:
                continue  # a target rule: it runs nothing, so no environment
            if "run" in actions:
                run_blocks.append(name)  # Snakemake cannot run `run:` in a conda env
                continue
            conda = re.search(r"^\s+conda:\s*\n?\s*[\"']([^\"']+)[\"']", body, re.M)
            if not conda:
                missing.append(f"{smk.name}:{name}")
            elif not (smk.parent / conda[1]).resolve().is_file():
                bad_path.append(f"{smk.name}:{name} -> {conda[1]}")
    return missing, bad_path, run_blocks


def test_the_conda_check_finds_what_is_missing(tmp_path):
    (tmp_path / "env.yaml").write_text("dependencies: []\n")
    smk = tmp_path / "x.smk"
    smk.write_text(
        "rule good:\n    output: 'a'\n    conda:\n        'env.yaml'\n    script: 's.py'\n\n\n"
        "rule bare:\n    output: 'b'\n    shell: 'touch {output}'\n\n\n"
        "rule lost:\n    output: 'c'\n    conda: 'nope.yaml'\n    shell: 'touch {output}'\n\n\n"
        "rule inline:\n    output: 'd'\n    run:\n        pass\n\n\n"
        "rule target:\n    input: 'a'\n"
    )
    assert conda_problems([smk]) == (["x.smk:bare"], ["x.smk:lost -> nope.yaml"], ["inline"])


def test_every_rule_that_runs_code_declares_a_conda_env():
    files = workflow_files()
    if not any(rules_in(f) for f in files):
        pytest.skip("no rules written yet")
    missing, bad_path, run_blocks = conda_problems(files)
    assert not missing, f"rules without conda: {missing}"
    assert not bad_path, f"conda: paths that are not files: {bad_path}"
    assert not run_blocks, f"run: blocks cannot use a conda env, use script: {run_blocks}"
