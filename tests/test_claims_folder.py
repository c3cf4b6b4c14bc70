"""The claims stand apart: their workflow and their package are one folder (workflow/claims/),
`all` plans no job of it, the claims' config is checked as the library's is, and deleting the
folder is all it takes to run the pipeline without them."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from conftest import ROOT, snakemake

FOLDER = ROOT / "workflow/claims"
JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):", re.MULTILINE)


def claims_rules() -> set[str]:
    return set(re.findall(r"^rule (\w+):", (FOLDER / "claims.smk").read_text(), re.MULTILINE))


def planned(workflow: Path, *targets: str) -> set[str]:
    """The rules of the jobs a dry run of `targets` plans."""
    dry = snakemake(workflow, "-n", "--forceall", *targets)
    assert dry.returncode == 0, dry.stderr[-3000:]
    return set(JOB.findall(dry.stdout))


def test_all_plans_no_claims_job_and_claims_plans_them(workflow_copy):
    rules = claims_rules()
    assert {"claims_register", "train_claim_arm", "claims_summary"} <= rules
    everything = planned(workflow_copy, "all")
    assert "toy_values" in everything  # the dry run's jobs are read
    assert not everything & rules, sorted(everything & rules)
    assert not any(name.startswith("figC") for name in everything)
    reduced = str(workflow_copy / "workflow/claims/config/claims_reduced.yaml")
    claims = planned(workflow_copy, "claims", "--configfile", reduced)
    assert {"claims_register", "train_claim_arm", "claims_summary"} <= claims
    from tcrclaims.figures import FIGURES

    assert {figure.id for figure in FIGURES} <= claims  # the unit's own figure rules


def test_a_bad_claims_key_stops_the_run_in_one_line(workflow_copy):
    """The claims' settings are checked by their rule file, as the library's chapters are by
    the config check: one line naming the key, exit 1, before any job."""
    bad = "claims={'arms': {'bad': {'warmup': -1}}}"
    done = snakemake(workflow_copy, "-n", "--config", bad)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("config error: claims.arms.bad.warmup")


def test_the_pipeline_runs_without_the_claims_folder(workflow_copy, tmp_path, monkeypatch):
    """Delete the folder, nothing else: `all` plans as before, and not one module of the
    claims' package is imported (an installed copy is shadowed by one that refuses)."""
    before = planned(workflow_copy, "all")
    shutil.rmtree(workflow_copy / "workflow/claims")
    refuse = tmp_path / "refuse/tcrclaims"
    refuse.mkdir(parents=True)
    (refuse / "__init__.py").write_text('raise ImportError("the claims were removed")\n')
    path = [str(refuse.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    assert planned(workflow_copy, "all") == before
    listed = snakemake(workflow_copy, "--list-rules")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert not re.search(r"^(claims|figC)", listed.stdout, re.MULTILINE)
