"""The claims summary says what ran: each claim's own seeds (an arm trains as many as the
claims reading it ask, Settings.seeds_of), and its verdict beside the one registered as
predicted before the run. Fake decisions, no training."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from types import SimpleNamespace

import matplotlib
import pandas as pd
import pytest
import yaml

from tcrclaims import plotting as plots
from tcrclaims.figure_data import ClaimsFigures
from tcrclaims.kinds import HOLDS, SUPPORTED
from tcrclaims.settings import POWER_PLAN, Settings
from tcrclaims.summary import claims_markdown, figure_data, table_rows

from conftest import ROOT, default_config

matplotlib.use("Agg")
CLAIMS = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
SETTINGS = Settings.from_config({**default_config(), **CLAIMS})
PLAN = yaml.safe_load((ROOT / POWER_PLAN).read_text())
OFF = "smoothing_generalisation"  # its fake verdict differs from its registered prediction
FELL = "dropout"  # its fake exact test fell to Monte Carlo


def run_seeds(claim) -> int:
    """The seeds an experiment runs: the leading `seeds` of those its arms share."""
    shared = set.intersection(*(set(SETTINGS.seeds_of(a)) for a in claim.arms()))
    return min(len(shared), claim.test.get("seeds", len(shared)))


def effect(claim):
    n = run_seeds(claim)
    return SimpleNamespace(
        name=claim.test["effect"], estimate=0.1, low=0.0, high=0.2, holm_low=-0.1,
        holm_high=0.3, margin=claim.test["margin"], direction=claim.test["direction"],
        p_value=0.01, method="lattice", monte_carlo_error=0.0, secondary="t-test",
        secondary_p=0.02, disagree=False, seeds=(n - 1, n),
        fallback="heldout_fraction: Monte Carlo where counts give an exact test"
        if claim.id == FELL else "",
    )  # fmt: skip


def decision(claim):
    found = effect(claim) if claim.kind == "experiment" else None
    verdict = claim.predicted or (HOLDS if claim.kind == "check" else SUPPORTED)
    if claim.id == OFF:
        verdict = SUPPORTED
    return SimpleNamespace(effect=found, adjusted=found is not None, precondition="",
                           measured="measured.", verdict=verdict)  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    decisions = {c.id: decision(c) for c in SETTINGS.claims}
    return pd.DataFrame(table_rows(SETTINGS, decisions, {}, PLAN))


def test_the_table_carries_each_claims_prediction_and_its_own_seeds(table):
    assert SETTINGS.claim(OFF).predicted != SUPPORTED
    assert list(table["predicted"]) == [c.predicted for c in SETTINGS.claims]
    rows = table.set_index("id")
    for claim in SETTINGS.claims:
        if claim.kind == "experiment":
            assert rows.loc[claim.id, "seeds_run"] == run_seeds(claim), claim.id
            assert rows.loc[claim.id, "seeds"] == run_seeds(claim) - 1, claim.id
    experiments = table[table["kind"] == "experiment"]
    assert experiments["seeds_run"].nunique() > 1  # the claims run different counts
    # a claim out of the Holm family by design has no row in the power plan
    assert "attention_importance" not in PLAN["claims"]
    assert math.isnan(rows.loc["attention_importance", "seeds_planned"])


def test_the_markdown_marks_a_verdict_other_than_its_prediction(table):
    text = claims_markdown(table, SETTINGS, {})
    assert "(claims version 4)" in text.splitlines()[0]
    assert "| predicted | verdict |" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(SETTINGS.claims)
    marked = [line for line in rows if "≠ predicted" in line]
    assert len(marked) == 1 and f"`{OFF}`" in marked[0], marked
    run = table.loc[table["kind"] == "experiment", "seeds_run"]
    assert f"ran {run.min():g} to {run.max():g} seeds" in text
    assert f"ran {len(SETTINGS.seeds)} seeds," not in text
    older = claims_markdown(table, replace(SETTINGS, version=3), {})
    assert "(claims version 3)" in older.splitlines()[0]


def test_an_exact_test_that_fell_to_monte_carlo_is_said_in_the_table_and_the_markdown(table):
    rows = table.set_index("id")
    assert rows.loc[FELL, "exact_fallback"].startswith("heldout_fraction: Monte Carlo")
    assert set(table.loc[table["exact_fallback"] != "", "id"]) == {FELL}
    said = [line for line in claims_markdown(table, SETTINGS, {}).splitlines()
            if line.startswith("**Monte Carlo where an exact test was due:**")]  # fmt: skip
    assert said == [f"**Monte Carlo where an exact test was due:** {FELL} "
                    f"({rows.loc[FELL, 'exact_fallback']})."]  # fmt: skip


def test_the_figures_count_each_arms_seeds(table):
    trained = SETTINGS.used_arms()
    history = pd.DataFrame({"step": [1, 10, 20], "loss": [3.0, 2.0, 1.0],
                            "grad_norm": [1.0, 1.0, 1.0]})  # fmt: skip
    histories = {arm: [history] for arm in trained}
    benchmarks = {c.id: {"claim": c.id, "rows": []} for c in SETTINGS.claims
                  if c.kind == "benchmark" or c.test.get("effect") == "quadratic"}  # fmt: skip
    data = figure_data(SETTINGS, {}, histories, {}, benchmarks, table)
    assert data["seeds"] == {arm: len(SETTINGS.seeds_of(arm)) for arm in trained}
    assert len(set(data["seeds"].values())) > 1
    for row in data["effects"]:
        claim = SETTINGS.claim(row["id"])
        assert row["seeds"] == [run_seeds(claim) - 1, run_seeds(claim)], row["id"]
    figures = ClaimsFigures(**json.loads(json.dumps(data)))
    for draw in (plots.figC1_training_arms, plots.figC6_beam, plots.figC7_effects):
        draw(figures).clf()
