"""The whole pipeline as the README runs it, with the suite's short training: every chapter,
the golden check, the manifest, the report (the paper's training: tests/test_paper_run.py)."""

import json
import zipfile
from pathlib import Path

import pytest

from tcrformer.core.io import sha256

from conftest import private_copy, snakemake


@pytest.fixture(scope="module")
def full_copy(full_run, tmp_path_factory):
    """The full run, to run Snakemake in again (the shared one stays as it was built)."""
    return private_copy(full_run, tmp_path_factory.mktemp("all") / "wf")


def test_every_value_of_the_short_run_passes_or_says_why_not(full_run):
    """The suite's run trains 100 steps: the reversal chapter's keys are SKIPPED, naming the
    input that differs from the explainer's (tests/test_paper_run.py judges the paper's
    training); the ESM-2 keys are SKIPPED without weights; every other key PASSes."""
    report = json.loads((full_run / "results/paper/golden_report.json").read_text())
    by_status = {}
    for row in report["rows"]:
        by_status.setdefault(row["status"], []).append(row)
    assert not by_status.get("FAIL"), by_status.get("FAIL")
    for row in by_status["SKIPPED"]:
        if row["chapter"] == "reversal":
            assert row["reason"].startswith(("inputs differ", "the CDR3 came back")), row
        else:
            assert row["key"].startswith("esm2.") and "no ESM-2 weights" in row["reason"], row
    assert {row["chapter"] for row in by_status["PASS"]} == {"toy", "notes", "plm"}
    assert [row["key"] for row in by_status["REPORT"]] == ["reversal.training_time_s"]


def test_manifest_lists_every_result_with_its_checksum_and_rule(full_run):
    manifest = json.loads((full_run / "results/paper/manifest.json").read_text())
    files = manifest["files"]
    assert "results/paper/values.json" in files
    assert any(path.endswith(".png") for path in files)
    for path, entry in files.items():
        assert entry["sha256"] == sha256(full_run / path), path
        assert entry["rule"]
    assert set(manifest["versions"]) >= {"python", "numpy", "torch", "snakemake"}
    assert len(manifest["config_sha256"]) == 64


def test_up_to_date_pipeline_has_nothing_to_do(full_copy):
    offline = str(full_copy / "offline.yaml")
    proc = snakemake(full_copy, "--configfile", offline)
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_report_builds(full_copy):
    offline = str(full_copy / "offline.yaml")
    proc = snakemake(full_copy, "--configfile", offline, "--report", "results/paper/report.zip")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with zipfile.ZipFile(full_copy / "results/paper/report.zip") as archive:
        files = {Path(name).name: name for name in archive.namelist()}
        html = b"".join(archive.read(n) for n in archive.namelist() if n.endswith(".html"))
    figures = {path.name for path in (full_copy / "results/paper/figures").glob("*.png")}
    assert figures and figures <= set(files), sorted(figures - set(files))
    assert b"CASSIRSSYEQYF" in html  # the captions name the run's receptor


def test_wall_clock_values_live_apart_from_the_results(full_run):
    timings = json.loads((full_run / "results/paper/timings.json").read_text())
    (row,) = timings["rows"]
    assert row["key"] == "reversal.training_time_s" and row["status"] == "REPORT"
    assert row["value"] > 0
    values = json.loads((full_run / "results/paper/values.json").read_text())
    assert "reversal.training_time_s" not in values
