"""Every failing rule leaves what went wrong in its own log: a one-line error for a problem
with the input, the whole traceback for a bug. Under SLURM the console is a job file
somewhere else; the log is where a user looks."""

from __future__ import annotations

import pytest

from conftest import snakemake

TOY = "workflow/lib/tcrformer/chapters/toy/compute.py"


def break_toy_values(workflow_copy, line: str) -> None:
    """Make the copy's toy_values run `line` first (the copy's lib is the one its jobs run)."""
    path = workflow_copy / TOY
    text = path.read_text()
    head = 'the figures\' labels, by output name."""\n'
    assert head in text
    path.write_text(text.replace(head, head + f"    {line}\n", 1))


@pytest.mark.slow
def test_a_bug_leaves_its_traceback_in_the_rules_log(workflow_copy):
    break_toy_values(workflow_copy, 'raise RuntimeError("an injected bug")')
    done = snakemake(workflow_copy, "toy", "--config", "run=bug")
    assert done.returncode != 0
    log = (workflow_copy / "results/bug/logs/toy_values.log").read_text()
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: an injected bug" in log and "please report it" in log
    assert not (workflow_copy / "results/bug/toy/values.json").exists()


@pytest.mark.slow
def test_a_problem_with_the_input_is_one_line_in_the_log(workflow_copy):
    error = "ResultFileError('somewhere.csv: file not found')"
    break_toy_values(workflow_copy, f"from tcrformer.core.io import ResultFileError; raise {error}")
    done = snakemake(workflow_copy, "toy", "--config", "run=input")
    assert done.returncode != 0
    log = (workflow_copy / "results/input/logs/toy_values.log").read_text()
    assert "somewhere.csv: file not found" in log and "Traceback" not in log
