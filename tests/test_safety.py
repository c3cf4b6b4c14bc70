"""Static guarantees: safe loaders only, and every result written through tcrformer.io."""

import re
from pathlib import Path

import pytest

from conftest import ROOT

CODE = sorted(
    p
    for p in [
        *ROOT.glob("workflow/**/*.py"),
        *ROOT.glob("bench/**/*.py"),
        *ROOT.glob("tests/**/*.py"),
    ]
    if "netguard" not in p.parts
)
PIPELINE = [p for p in CODE if "tests" not in p.relative_to(ROOT).parts]

UNSAFE_LOAD_FLAG = "weights_only" + "=False"  # spelled in two parts so this file is no hit
UNSAFE = {
    UNSAFE_LOAD_FLAG: re.compile(r"weights_only\s*=\s*" + "False"),
    "allow_pickle=True": re.compile(r"allow_pickle\s*=\s*True"),
    "pickle.load": re.compile(r"\bpickle\.loads?\("),
}
# Direct writers that would bypass the atomic helpers in tcrformer/io.py.
DIRECT_WRITES = re.compile(
    r"\bnp\.save\(|\.to_csv\(\s*[\w.\[\]\"']+\s*[,)]|json\.dump\(|\.savefig\([^)]*\b(?:png|svg|path)\b"
    r"|\bopen\([^)]*['\"]w"
)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", CODE, ids=rel)
def test_no_unsafe_loading(path):
    text = path.read_text()
    if path.name == "test_safety.py":
        return
    for name, pattern in UNSAFE.items():
        assert not pattern.search(text), f"{rel(path)} uses {name}"


@pytest.mark.parametrize("path", PIPELINE, ids=rel)
def test_results_are_written_through_the_atomic_helpers(path):
    if path.name == "io.py":
        return
    for number, line in enumerate(path.read_text().splitlines(), 1):
        exempt = ("atomic", "tmp", ".log[")  # temporaries, and the rule's own log file
        if DIRECT_WRITES.search(line) and not any(word in line for word in exempt):
            pytest.fail(f"{rel(path)}:{number} writes a file directly: {line.strip()}")
