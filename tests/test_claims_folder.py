"""The claims chapter stands apart: its workflow is one folder (workflow/claims/), `all` plans
no job of it, and the pipeline runs without the folder."""

from __future__ import annotations

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
    assert {"claims_register", "train_claim_arm", "claims_summary"} <= planned(
        workflow_copy, "claims", "--configfile", reduced
    )


def test_the_pipeline_runs_without_the_claims_folder(workflow_copy):
    """Remove the folder and the Snakefile's two lines that name it: `all` plans as before."""
    before = planned(workflow_copy, "all")
    shutil.rmtree(workflow_copy / "workflow/claims")
    snakefile = workflow_copy / "workflow/Snakefile"
    text = snakefile.read_text()
    lines = [
        'OWN_CONFIG_FILES.append(Path(workflow.current_basedir) / "claims/config/claims.yaml")\n',
        'include: "claims/claims.smk"\n',
    ]
    assert all(text.count(line) == 1 for line in lines)
    for line in lines:
        text = text.replace(line, "")
    snakefile.write_text(text)
    assert planned(workflow_copy, "all") == before
