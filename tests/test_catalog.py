"""The workflow catalog's conventions: workflow/Snakefile, a top-level Snakefile that includes
it, rule files that parse without the installed package or the scientific stack, a LICENSE
that matches pyproject's, and a catalog file that is true to the layout."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import yaml

from conftest import ROOT, SNAKEMAKE, snakemake

HEAVY = ("numpy", "pandas", "torch", "matplotlib")


def test_the_top_level_snakefile_includes_workflow_snakefile(workflow_copy):
    assert "workflow/Snakefile" in (ROOT / "Snakefile").read_text()
    both = [
        snakemake(workflow_copy, "-n"),
        snakemake(workflow_copy, "-n", "-s", "workflow/Snakefile"),
    ]
    for done in both:
        assert done.returncode == 0, done.stderr[-2000:]
        assert "train_reversal" in done.stdout  # the default target is `all`, from either one


def test_the_test_directory_runs_as_the_catalog_runs_it(workflow_copy):
    """`snakemake --directory .test`: the workflow's own config, then .test's laid over it
    (its run name and short training), results under .test/results/."""
    shutil.copytree(ROOT / ".test", workflow_copy / ".test", symlinks=True)
    done = snakemake(workflow_copy, "-n", "--directory", ".test")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "results/test/reversal/model.safetensors" in done.stdout  # .test's run name


def test_the_rule_files_parse_with_the_workflows_own_library_and_no_heavy_imports(workflow_copy):
    """As the catalog lints it: the copy's workflow/lib is imported (ahead of the installed
    package), and parsing imports none of numpy, pandas, torch, matplotlib."""
    init = workflow_copy / "workflow/lib/tcrformer/__init__.py"
    init.write_text(init.read_text() + '\nprint("the workflow copy\'s own library")\n')
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *SNAKEMAKE[1:], "--lint"],
        cwd=workflow_copy, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the workflow copy's own library" in done.stdout
    assert not heavy_imports_by_us(done.stderr)


def heavy_imports_by_us(importtime: str) -> list[str]:
    """The heavy modules that a tcrformer module imported (not Snakemake or its plugins),
    from python -X importtime's tree: a module's parent is the next line indented less."""
    tree = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and not line.endswith("package"):
            name = line.rsplit("|", 1)[-1]
            tree.append((len(name) - len(name.lstrip()), name.strip()))
    found = []
    for i, (depth, name) in enumerate(tree):
        if name.split(".")[0] not in HEAVY:
            continue
        ancestors, level = [], depth
        for deeper, parent in tree[i + 1 :]:
            if deeper < level:
                ancestors.append(parent)
                level = deeper
        if any(a.startswith("tcrformer") for a in ancestors):
            found.append(f"{name} (via {' <- '.join(ancestors)})")
    return found


def test_the_license_matches_pyproject():
    license_text = (ROOT / "LICENSE").read_text()
    declared = re.search(r'^license = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert declared == "MIT" and license_text.startswith("MIT License")


def test_the_catalog_file_is_true_to_the_layout():
    catalog = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    usage = catalog["usage"]
    assert (ROOT / "workflow/Snakefile").exists() and (ROOT / "config/README.md").exists()
    # conda is claimed only once CI builds the envs; until then the locks are the deployment.
    ci = (ROOT / ".ci/run").read_text() + (ROOT / ".github/workflows/main.yml").read_text()
    assert usage["software-stack-deployment"]["conda"] is ("--sdm conda" in ci)
    assert all(path.exists() for path in (ROOT / "envs").glob("*.yaml"))
    assert "--cores" in usage["mandatory-flags"]["flags"]
