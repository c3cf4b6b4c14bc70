"""The toy chapter through Snakemake: golden PASS, mutations FAIL, bad config stops early."""

import json

import pytest
import yaml
from test_config_errors import BAD_CONFIGS

from conftest import default_config, snakemake, write_config

pytestmark = pytest.mark.slow


def golden_rows(wf, run="paper", chapter="toy"):
    report = json.loads((wf / f"results/{run}/{chapter}/golden_report.json").read_text())
    return {row["key"]: row for row in report["rows"]}


def test_toy_chapter_passes_and_reruns_are_noops(workflow_copy):
    wf = workflow_copy
    first = snakemake(wf, "toy")
    assert first.returncode == 0, first.stderr[-3000:]
    rows = golden_rows(wf)
    assert rows and all(r["status"] == "PASS" for r in rows.values()), [
        k for k, r in rows.items() if r["status"] != "PASS"
    ]
    values = (wf / "results/paper/toy/values.json").read_bytes()
    again = snakemake(wf, "toy")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr
    assert (wf / "results/paper/toy/values.json").read_bytes() == values


def test_changing_one_hand_set_weight_fails_exactly_the_affected_keys(workflow_copy):
    wf = workflow_copy
    toy = default_config()["toy"]
    toy["heads"][0]["Q"][0][2] = 3.0  # head 1: charge query weight 2.0 -> 3.0
    mutated = write_config(wf / "mutation.yaml", {"toy": toy})
    proc = snakemake(wf, "toy", "--configfile", str(mutated))
    assert proc.returncode != 0
    assert "golden check failed" in proc.stderr
    rows = golden_rows(wf)
    failed = {k for k, r in rows.items() if r["status"] == "FAIL"}
    assert {"toy.head1.raw_scores_R", "toy.head1.weights_R", "toy.head1.weight_R_to_E"} <= failed
    # Untouched by head 1's query: the input, the shapes, the sqrt(d_k) demonstration.
    for key in ("toy.X", "toy.block.output_shape", "scaling.max_weight_scaled", "toy.sequence"):
        assert rows[key]["status"] == "PASS", key


def test_another_receptor_in_another_run(workflow_copy):
    wf = workflow_copy
    proc = snakemake(wf, "toy", "--config", "run=alt", "toy={'sequence': 'CASSLAPGATNEKLFF'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = json.loads((wf / "results/alt/toy/values.json").read_text())
    assert values["toy.sequence"] == "CASSLAPGATNEKLFF"
    assert len(values["toy.X"]) == 16
    rows = golden_rows(wf, run="alt")
    assert rows["toy.X"]["status"] == "SKIPPED"
    assert "inputs differ" in rows["toy.X"]["reason"]
    assert not (wf / "results/paper").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("override", "key"), [BAD_CONFIGS[0], BAD_CONFIGS[-1]],
                         ids=["schema", "a file it names"])  # fmt: skip
def test_snakemake_stops_on_a_bad_config_with_one_line(workflow_copy, override, key):
    """The same check wired into Snakemake, once per family: exit 1, one line, no traceback,
    nothing written."""
    wf = workflow_copy
    bad = write_config(wf / "bad.yaml", override)
    proc = snakemake(wf, "toy", "--configfile", str(bad))
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("config error")]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"config error: {key} = ")
    if "nonexistent" in str(override):
        assert "/nonexistent/" in errors[0]  # the line names the path
    assert "Traceback" not in proc.stderr
    assert not (wf / "results").exists() or not any((wf / "results").rglob("*.json"))


def test_config_overrides_merge_into_defaults(workflow_copy):
    wf = workflow_copy
    override = write_config(wf / "o.yaml", {"toy": {"focus_position": 10}})
    proc = snakemake(wf, "toy", "--configfile", str(override), "-n")
    assert proc.returncode == 0, proc.stderr
    merged = yaml.safe_load((wf / "config/config.yaml").read_text())
    assert merged["toy"]["focus_position"] == 6  # the user's file is untouched
