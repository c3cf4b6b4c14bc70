"""The docs a newcomer reads are short and true to the tree: the README fits in two minutes,
and every link and every repository path the docs name exists."""

from __future__ import annotations

import re
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


def test_the_readme_is_short():
    words = len((ROOT / "README.md").read_text().split())
    assert words <= README_WORDS, f"README.md has {words} words"


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
    doc.write_text("See [the map](docs/no_such_map.md) and `config/golden/seed_values.yaml`.")
    assert named_paths(doc) == ["docs/no_such_map.md", "config/golden/seed_values.yaml"]
    assert not (ROOT / "docs/no_such_map.md").exists()
