"""The docs a newcomer reads are short and true to the tree: the README fits in two minutes,
every link and every repository path the docs name exists, and a verdict table a doc prints
is the one its archived run wrote."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT

README_WORDS = 900
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "config/README.md", ROOT / "config/golden/README.md", ROOT / "bench/README.md",
        ROOT / "results/README.md"]  # fmt: skip
# Top-level folders whose paths a doc may name; what a run writes (results/<run>/...) is not
# in the tree, so only results/README.md and results/archive/ are held to it.
TREE = ("config/", "workflow/", "docs/", "tests/", "bench/", "profiles/", "envs/", "locks/",
        "notebooks/", ".test/", ".ci/", ".github/",
        "results/README.md", "results/archive/")  # fmt: skip
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")


def named_paths(doc: Path) -> list[str]:
    """Links that are not URLs or anchors, and code spans that spell a path in the tree."""
    text = doc.read_text()
    links = [t.split("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]
    spans = [s.rstrip(".,:;") for s in CODE.findall(text) if s.startswith(TREE)]
    return [p for p in links + spans if p and not re.search(r"[<>*{}$]|\.\.\.", p)]


@pytest.mark.parametrize("doc, most", [("README.md", README_WORDS), ("docs/claims.md", 2500)])
def test_a_reader_doc_is_short(doc, most):
    words = len((ROOT / doc).read_text().split())
    assert words <= most, f"{doc} has {words} words (at most {most})"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    missing = []
    for name in named_paths(doc):
        base = doc.parent if not name.startswith(TREE) or name.startswith("../") else ROOT
        if not (base / name).exists() and not (ROOT / name).exists():
            missing.append(name)
    assert not missing, f"{doc.relative_to(ROOT)} names what is not there: {missing}"


def test_the_path_check_finds_a_missing_path(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("See [the map](docs/no_such_map.md) and `config/golden/explainer_values.yaml`.")
    assert named_paths(doc) == ["docs/no_such_map.md", "config/golden/explainer_values.yaml"]
    assert not (ROOT / "docs/no_such_map.md").exists()


# Where a doc prints a finished claims run's verdict table: (doc, the heading of its section,
# the run's archive). Each cell the doc prints must be the cell the run's own claims.md has.
VERDICT_TABLES = [
    ("results/archive/README.md", "#### The v2 run", "results/archive/claims_v2.tar.gz"),
    ("results/archive/README.md", "#### The v3 verdicts", "results/archive/claims_v3.tar.gz"),
    ("docs/claims.md", "## The v4 verdicts", "results/archive/claims_v4.tar.gz"),
]


def section(text: str, heading: str) -> str:
    """The lines under `heading`, up to the next heading of the same or a higher level."""
    level = heading.index(" ")
    lines = text.splitlines()
    start = lines.index(heading) + 1
    ends = [i for i in range(start, len(lines)) if re.match(f"#{{1,{level}}} ", lines[i])]
    return "\n".join(lines[start : ends[0] if ends else None])


def table_rows(text: str) -> dict[str, dict[str, str]]:
    """Every row of the Markdown tables in `text` that have a verdict column, keyed by its first
    cell, as {header: cell}."""
    rows, header = {}, None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if header is None:
            header = cells
        elif "verdict" in header and not set(line) <= set("|-: "):
            rows[cells[0].strip("`")] = dict(zip(header, cells, strict=False))
    return rows


def run_table(archive: Path) -> dict[str, dict[str, str]]:
    """The verdict table a finished claims run wrote (its claims/claims.md), from its archive."""
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/claims/claims.md"))
        return table_rows(tar.extractfile(member).read().decode())


def table_mismatches(printed: dict, run: dict) -> list[str]:
    """Each row a doc prints that the run lacks, and each cell that differs from the run's."""
    wrong = [f"{key}: not in the run" for key in printed if key not in run]
    for key, row in printed.items():
        theirs = run.get(key, {})
        differ = [col for col, cell in row.items() if col in theirs and cell != theirs[col]]
        wrong += [f"{key} {col}: {row[col]!r} where the run has {theirs[col]!r}" for col in differ]
    return wrong


@pytest.mark.parametrize("doc, heading, archive", VERDICT_TABLES, ids=lambda x: str(x))
def test_a_printed_verdict_table_is_the_runs(doc, heading, archive):
    printed = table_rows(section((ROOT / doc).read_text(), heading))
    assert printed, f"{doc} has no table under {heading!r}"
    wrong = table_mismatches(printed, run_table(ROOT / archive))
    assert not wrong, f"{doc} ({heading}) is not what {archive} wrote: " + "; ".join(wrong)


def test_the_table_check_finds_a_changed_cell():
    doc, heading, archive = VERDICT_TABLES[-1]
    printed = table_rows(section((ROOT / doc).read_text(), heading))
    key = next(iter(printed))
    flipped = "**SUPPORTED**" if "NOT" in printed[key]["verdict"] else "**NOT SUPPORTED**"
    printed[key]["verdict"] = flipped
    printed["no_such_claim"] = {"verdict": "**SUPPORTED**"}
    assert len(table_mismatches(printed, run_table(ROOT / archive))) == 2
