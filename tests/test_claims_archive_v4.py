"""The finished claims v4 run, summarised again by this checkout from its archive
(results/archive/claims_v4.tar.gz): every verdict as archived, nothing marked CHANGED. Its
registration fixed the decision code function by function, which the file digest cannot
check; the table says so in one line. Its held-out fractions were stored as float32
fractions without their counts, so two claims' exact tests fell to Monte Carlo unseen; the
table now says that too, in one line and one column, and those are all that differ."""

from __future__ import annotations

import csv
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tcrclaims.compute import claims_summary
from tcrclaims.settings import JOB_FOLDER, POWER_PLAN, Settings
from tcrclaims.summary import CHANGED, CODE_CHANGED, UNCHECKED_CODE
from tcrformer.core.io import read_json, write_named
from tcrformer.validation import validate

from conftest import ROOT, default_config

ARCHIVE = ROOT / "results/archive/claims_v4.tar.gz"


@pytest.fixture(scope="module")
def archived(tmp_path_factory) -> Path:
    """The archive's claims folder of run `paper`, unpacked."""
    folder = tmp_path_factory.mktemp("v4")
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("results/paper/claims/")]
        tar.extractall(folder, members=members, filter="data")
    return folder / "results/paper/claims"


def summarise(claims: Path, out: Path) -> dict[str, Path]:
    """What claims_summary writes from an archived run's files, as the rule reads them."""
    config = default_config()
    validate(config, ROOT / "workflow/schemas/config.schema.yaml")  # the defaults filled in
    settings = Settings.from_config(config)
    metrics, histories = {}, {}
    for arm in settings.used_arms():
        for seed in settings.seeds_of(arm):
            job = claims / JOB_FOLDER.format(arm=arm, seed=seed)
            metrics.setdefault(arm, []).append(read_json(job / "metrics.json"))
            histories.setdefault(arm, []).append(pd.read_csv(job / "history.csv"))
    benchmarks = [
        *settings.benchmarked_by("claims_cost"),
        *settings.benchmarked_by("claims_rnn_speed"),
    ]
    results = claims_summary(
        settings,
        metrics,
        histories,
        read_json(claims / "analytic.json"),
        {claim: read_json(claims / f"benchmarks/{claim}.json") for claim in benchmarks},
        read_json(claims / "registration.json"),
        yaml.safe_load((ROOT / POWER_PLAN).read_text()),
    )
    paths = {"table": out / "claims.csv", "md": out / "claims.md",
             "figure_data": out / "figure_data.json"}  # fmt: skip
    write_named(paths, results)
    return paths


FALLBACK = "**Monte Carlo where an exact test was due:** "
FELL = {"smoothing_generalisation", "dropout"}  # held-out fractions with no counts, 48 seeds


def rows_of(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_the_v4_table_reproduces_from_its_archive(archived, tmp_path):
    again = summarise(archived, tmp_path)
    # the table: the archived one, and one column more that names the exact tests that
    # fell to Monte Carlo, for the two claims whose held-out fractions had no counts
    rows, archived_rows = rows_of(again["table"]), rows_of(archived / "claims.csv")
    column = rows[0].index("exact_fallback")
    assert [r[:column] + r[column + 1 :] for r in rows] == archived_rows
    fell = {r[0]: r[column] for r in rows[1:] if r[column]}
    assert set(fell) == FELL
    assert all(text.startswith("heldout_fraction: Monte Carlo where counts give an exact test")
               for text in fell.values())  # fmt: skip
    table = pd.read_csv(again["table"])
    assert not table["registered"].isin([CHANGED, CODE_CHANGED]).any()
    assert set(table["registered"]) == {"as registered"}
    assert again["figure_data"].read_bytes() == (archived / "figure_data.json").read_bytes()
    # the markdown: the archived one, and the lines (each with its blank) that say the
    # registration's code was not checked and which exact tests fell to Monte Carlo; its
    # title (the same claims version) names the source documents in today's words
    lines = again["md"].read_text(encoding="utf-8").splitlines()
    assert lines.count(UNCHECKED_CODE) == 1
    said = [line for line in lines if line.startswith(FALLBACK)]
    assert len(said) == 1 and all(f"{claim} (heldout_fraction: " in said[0] for claim in FELL)
    dropped = set()
    for at, line in enumerate(lines):
        if line in (UNCHECKED_CODE, said[0]):
            assert lines[at + 1] == ""
            dropped |= {at, at + 1}
    kept = [line for at, line in enumerate(lines) if at not in dropped]
    archived_lines = (archived / "claims.md").read_text(encoding="utf-8").splitlines()
    assert kept[0] == "# Claims: what the explainer says, tested (claims version 4)"
    title = archived_lines[0]
    assert title.startswith("# Claims: ") and title.endswith("(claims version 4)")
    assert kept[1:] == archived_lines[1:]
