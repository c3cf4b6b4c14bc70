"""The whole pipeline, as the README runs it: every chapter, the golden check, the manifest,
the report. This is the run that regenerates every number and checks it against the seeds
(it trains the paper's reversal recipe: minutes on 2 cores)."""

import json
import zipfile
from pathlib import Path

import pytest

from tcrformer.core.io import sha256
from tcrformer.training import judged

from conftest import private_copy, snakemake

pytestmark = pytest.mark.training


@pytest.fixture(scope="module")
def full_copy(full_run, tmp_path_factory):
    """The full run, to run Snakemake in again (the shared one stays as it was built)."""
    return private_copy(full_run, tmp_path_factory.mktemp("all") / "wf")


def test_every_published_value_passes_or_says_why_not(full_run):
    report = json.loads((full_run / "results/paper/golden_report.json").read_text())
    by_status = {}
    for row in report["rows"]:
        by_status.setdefault(row["status"], []).append(row["key"])
    assert not by_status.get("FAIL"), by_status.get("FAIL")
    # Without network the ESM-2 weights cannot be had: those keys, and only those, are SKIPPED.
    assert all(key.startswith("esm2.") for key in by_status.get("SKIPPED", []))
    # The trained values are judged by golden check v3 (reversal.curve.*, every one PASS
    # here); the printed training values are REPORT rows with their percentile, and the time.
    reported = {row["key"]: row["reason"] for row in report["rows"] if row["status"] == "REPORT"}
    assert reported.pop("reversal.training_time_s").startswith("report-only")
    printed = {f"reversal.loss_step{s}" for s in (500, 1000, 1500, 2000, 2500, 3000)}
    printed |= {"reversal.heldout_exact", "reversal.cross_attention_antidiagonal_mean"}
    assert set(reported) == printed | {"reversal.cdr3_output"}, reported
    assert all(reported[key].startswith("at percentile ") for key in printed), reported
    assert reported["reversal.cdr3_output"].startswith("right; right in ")
    curve = [row for row in report["rows"] if row["key"].startswith("reversal.curve.")]
    assert {row["key"] for row in curve} == {f"reversal.curve.{key}" for key in judged.KEYS}
    assert all(row["status"] == "PASS" for row in curve), curve
    chapters = {row["chapter"] for row in report["rows"] if row["status"] == "PASS"}
    assert chapters == {"toy", "notes", "reversal", "plm"}


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
