"""The docs a newcomer reads are short and true to the tree: the README fits in two minutes,
every link and every repository path the docs name exists, and a verdict table a doc prints
is the one its archived run wrote."""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tcrformer.core.config import fill_defaults, get, load_schema
from tcrformer.core.text import short

from conftest import ROOT, SNAKEMAKE, default_config

README_WORDS = 900
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "config/README.md", ROOT / "config/golden/README.md", ROOT / "bench/README.md",
        ROOT / "results/README.md"]  # fmt: skip
# Top-level folders whose paths a doc may name; what a run writes (results/<run>/...) is not
# in the tree, so only results/README.md and results/archive/ are held to it.
TREE = ("config/", "workflow/", "docs/", "tests/", "bench/", "tools/", "profiles/", "envs/",
        "locks/", "notebooks/", ".test/", ".ci/", ".github/",
        "results/README.md", "results/archive/")  # fmt: skip
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
LIB = ROOT / "workflow/lib/tcrformer"


def named_paths(doc: Path) -> list[str]:
    """Links that are not URLs or anchors, and code spans that spell a path in the tree."""
    text = doc.read_text()
    links = [t.split("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]
    spans = [s.rstrip(".,:;") for s in CODE.findall(text) if s.startswith(TREE)]
    return [p for p in links + spans if p and not re.search(r"[<>*{}$]|\.\.\.", p)]


@pytest.mark.parametrize("doc, most", [("README.md", README_WORDS), ("docs/claims.md", 2500),
                                       ("config/golden/README.md", 1200)])  # fmt: skip
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


# Names a doc cites: files, tests, rules, package modules ---------------------------------------

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
FILE_NAME = re.compile(r"(?<![\w./<>-])([\w-]+(?:\.[\w-]+)*\.(?:py|smk|ipynb|sh|toml|yaml|md))\b")
DATA_FILE = re.compile(r".+\.(?:json|csv|md|yaml|npy|png|svg|html|txt|py|smk)")
TEST_FILE = re.compile(r"(?:tests/)?(test_\w+\.py)(?:::(\w+))?$")


def doc_text(doc: Path) -> str:
    """The doc without its URLs (a file name inside a link to elsewhere is not ours)."""
    return re.sub(r"https?://\S+", "", doc.read_text())


def spans(doc: Path) -> list[str]:
    return [s.rstrip(".,:;") for s in CODE.findall(doc_text(doc))]


@functools.cache
def tree_paths() -> tuple[Path, ...]:
    """Every file of the repository, outside results/ and hidden folders (but .test/)."""
    paths = []
    for folder, dirs, files in os.walk(ROOT):
        hidden = {d for d in dirs if d.startswith(".") and d != ".test"}
        dirs[:] = [d for d in dirs if d not in hidden and Path(folder, d) != ROOT / "results"]
        paths += [Path(folder) / f for f in files]
    return tuple(paths)


def tree_files() -> set[str]:
    return {p.name for p in tree_paths()}


@functools.cache
def written_names() -> str:
    """The text of the workflow, the tools and the benches: the names of what a run writes."""
    folders = ("workflow", "tools", "bench", "config", "profiles")
    return "\n".join(p.read_text() for f in folders for p in (ROOT / f).rglob("*")
                     if p.is_file() and p.suffix in (".py", ".smk", ".yaml", ".rst"))  # fmt: skip


def cited_text(doc: Path) -> str:
    """What a doc cites: its code spans and code blocks (prose may mention what is gone)."""
    text = doc_text(doc)
    return "\n".join(CODE.findall(text) + FENCE.findall(text))


def missing_files(doc: Path, tree: set[str], written: str) -> list[str]:
    """File names the doc cites that are neither a file in the tree nor, for a data file, a
    name the workflow writes. Test files are the test rule's."""
    names = set(FILE_NAME.findall(cited_text(doc)))
    code = (".py", ".smk", ".ipynb", ".sh", ".toml")
    return sorted(
        n for n in names
        if not n.startswith("test_") and n not in tree and (n.endswith(code) or n not in written)
    )  # fmt: skip


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_doc_names_exists(doc):
    missing = missing_files(doc, tree_files(), written_names())
    assert not missing, f"{doc.relative_to(ROOT)} names files that are not there: {missing}"


def in_the_suite(name: str) -> bool:
    """Whether a test function of this name is defined in tests/."""
    pattern = re.compile(rf"^\s*def {name}\(", re.M)
    return any(pattern.search(p.read_text()) for p in (ROOT / "tests").glob("test_*.py"))


def missing_tests(doc: Path) -> list[str]:
    """Test files (`test_x.py`, `tests/test_x.py::test_y`) and test functions the doc cites
    that the suite does not have."""
    missing = []
    for span in spans(doc):
        found = TEST_FILE.search(span)
        if found and not (ROOT / "tests" / found[1]).exists():
            missing.append(span)
        elif found and found[2] and not in_the_suite(found[2]):
            missing.append(span)
        elif re.fullmatch(r"test_\w+", span) and not in_the_suite(span):
            missing.append(span)
    return missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_test_a_doc_names_exists(doc):
    missing = missing_tests(doc)
    assert not missing, f"{doc.relative_to(ROOT)} names tests the suite does not have: {missing}"


def workflow_rules() -> set[str]:
    """Every rule and target of the workflow, as Snakemake lists them."""
    done = subprocess.run([*SNAKEMAKE, "--list-rules"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def cited_rules(doc: Path) -> set[str]:
    """Rule names the doc cites: `rule x`, `target x`, `x` before an arrow in a list of
    rules, each name of a table's `rules` column, and the targets of a snakemake command."""
    text = doc_text(doc)
    names = set(re.findall(r"\b(?:[Rr]ules?|[Tt]argets?):? `(\w+)`", text))
    names |= set(re.findall(r"`(\w+)` (?:→|->)", text))
    names |= {n for col in ("rules", "target") for cell in table_column(text, col)
              for n in listed_names(cell)}  # fmt: skip
    for command in re.findall(r"snakemake ([^`#&|\n]*)", text):
        names |= snakemake_targets(command.split())
    return names


def table_column(text: str, name: str) -> list[str]:
    """The cells of every Markdown table column headed `name`."""
    cells, column = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            column = row.index(name) if name in row else -1
        elif column >= 0 and not set(line) <= set("|-: ") and column < len(row):
            cells.append(row[column])
    return cells


def listed_names(cell: str) -> list[str]:
    """The bare names of a cell like 'a, b (what b does), c and d'."""
    while re.search(r"\([^()]*\)", cell):
        cell = re.sub(r"\([^()]*\)", "", cell)
    parts = re.split(r",| and ", cell.replace("`", ""))
    return [p.strip() for p in parts if re.fullmatch(r"[a-z][a-z0-9_]*", p.strip())]


# snakemake options that take one value, and those that take values up to the next option
ONE_VALUE = {"--cores", "-c", "-j", "--jobs", "--sdm", "--software-deployment-method",
             "--workflow-profile", "--profile", "--directory", "-d", "--report", "-s",
             "--snakefile"}  # fmt: skip
MANY_VALUES = {"--config", "-C", "--configfile", "--configfiles"}


def snakemake_targets(words: list[str]) -> set[str]:
    targets, skip, many = set(), False, False
    for word in words:
        if word.startswith("-"):
            skip, many = word in ONE_VALUE, word in MANY_VALUES
        elif skip or many:
            skip = False
        elif re.fullmatch(r"[a-z][a-z0-9_]*", word):
            targets.add(word)
    return targets


def test_every_rule_a_doc_names_exists():
    rules = workflow_rules()
    missing = {str(doc.relative_to(ROOT)): sorted(cited_rules(doc) - rules) for doc in DOCS}
    missing = {doc: names for doc, names in missing.items() if names}
    assert not missing, f"docs name rules the workflow does not have: {missing}"


def listed_modules(package: Path) -> list[str]:
    """The modules a package's docstring lists, one a line: 'name.py   what it holds' (or
    'name   what it holds')."""
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    names = re.findall(r"^\s*(\w+)(?:\.py)?  +\S", docstring, flags=re.M)
    return [f"{name}.py" for name in names]


PACKAGES = sorted(p.parent for folder in (LIB, ROOT / "workflow/claims/lib")
                  for p in folder.rglob("__init__.py"))  # fmt: skip


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_package_docstring_lists_only_its_own_modules(package):
    """A module the docstring lists is the package's, or, for a package of packages (the
    chapters), every subpackage's."""
    subpackages = [p.parent for p in package.glob("*/__init__.py")]
    missing = [m for m in listed_modules(package) if not (package / m).exists()
               and not (subpackages and all((s / m).exists() for s in subpackages))]  # fmt: skip
    where = package.relative_to(ROOT) / "__init__.py"
    assert not missing, f"{where} lists modules that are not there: {missing}"


# Profile entries: a doc that quotes one (`gpu: 1`, `config:`) quotes a profile --------------

PROFILE_DOCS = [ROOT / "docs/cluster.md", ROOT / "docs/usage.md"]
ENTRY = re.compile(r"#?\s*[a-z][\w-]*:(?: .*)?")


def profile_lines() -> list[str]:
    files = [*(ROOT / "profiles").rglob("*.yaml"), *(ROOT / "workflow").rglob("*.smk")]
    return [line.strip().lstrip("# ") for f in files for line in f.read_text().splitlines()]


@pytest.mark.parametrize("doc", PROFILE_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_profile_entry_a_doc_quotes_is_there(doc):
    text, lines = doc_text(doc), profile_lines()
    quoted = {s for s in re.findall(r"`([^`\n]+)`", text) if ENTRY.fullmatch(s)}
    missing = sorted(q for q in quoted if not any(s.startswith(q.lstrip("# ")) for s in lines))
    assert not missing, f"{doc.relative_to(ROOT)} quotes entries no profile has: {missing}"


# Config keys and their defaults --------------------------------------------------------------

SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
ANY_KEY = re.compile(r"\*|<\w+>")  # `reversal.speedrun.*`, `claims.arms.<arm>`


def resolve(node: dict) -> dict:
    while "$ref" in node:
        node = {**SCHEMA["$defs"][node["$ref"].split("/")[-1]],
                **{k: v for k, v in node.items() if k != "$ref"}}  # fmt: skip
    return node


def schema_node(dotted: str) -> dict | None:
    """The schema of a dotted config key (`*` or `<name>` stand for any key), or None."""
    node = SCHEMA
    for part in dotted.split("."):
        node = resolve(node)
        properties, others = node.get("properties", {}), node.get("additionalProperties")
        if part in properties:
            node = properties[part]
        elif isinstance(others, dict):
            node = others
        elif ANY_KEY.fullmatch(part) and properties:
            node = {}
        else:
            return None
    return node


def defaults() -> dict:
    """What a run gets when it sets nothing: the workflow's config files, then the schema."""
    return fill_defaults(default_config(receptor=False), SCHEMA)


NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def documented_as(text: str, value: Any) -> bool:
    """Whether a table's Default cell says `value`: the value itself ('512', 'null', '[1, 6]'),
    its ends ('0 … 31'), its size ('15 arms', 'four heads', '109 residues'), the receptor key
    it takes its value from, or 'see config.yaml' for a group of keys."""
    receptor = re.fullmatch(r"the receptor's \(`(receptor\.\w+)`\)", text)
    if receptor:
        return value is None and schema_node(receptor[1]) is not None
    if text == "see config.yaml":
        return True
    ends = re.fullmatch(r"(\S+) … (\S+)", text)
    if ends:
        return isinstance(value, list) and [str(value[0]), str(value[-1])] == list(ends.groups())
    if same_value(text, value):
        return True
    size = re.search(r"\b(\d+|one|two|three|four|five|six) [a-z]+s\b", text)
    count = size and int(NUMBER_WORDS.get(size[1], size[1]))
    return bool(size) and isinstance(value, list | dict | str) and len(value) == count


def same_value(text: str, value: Any) -> bool:
    """Whether the YAML `text` is `value` (numbers compared as numbers: '1e-9' is 1e-09)."""
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        pass
    try:
        return yaml.safe_load(text) == value
    except yaml.YAMLError:
        return False


def config_rows(doc: Path) -> list[tuple[str, str]]:
    """(key, default as written) for each row of the doc's Key | Default tables; a row of
    several keys (`reversal.adam.beta1`, `.beta2` | 0.9, 0.98) gives one pair a key."""
    rows, table = [], False
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not line.startswith("|"):
            table = False
        elif cells[:2] == ["Key", "Default"]:
            table = True
        elif table and not set(line) <= set("|-: "):
            keys = re.findall(r"`([^`]+)`", cells[0])
            keys = [keys[0]] + [keys[0].rsplit(".", 1)[0] + k if k.startswith(".") else k
                                for k in keys[1:]]  # fmt: skip
            values = cells[1].split(", ") if len(keys) > 1 else [cells[1]]
            rows += list(zip(keys, values, strict=True))
    return rows


CONFIG_DOCS = [doc for doc in DOCS if config_rows(doc)]


def config_table_errors(rows: list[tuple[str, str]], config: dict) -> list[str]:
    errors = []
    for key, text in rows:
        if schema_node(key) is None:
            errors.append(f"{key}: no such key in the schema")
        elif not ANY_KEY.search(key) and not documented_as(text, get(config, key)):
            errors.append(f"{key}: documented {text!r}, the config has {short(get(config, key))}")
    return errors


@pytest.mark.parametrize("doc", CONFIG_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_config_table_is_the_schema_and_the_config(doc):
    errors = config_table_errors(config_rows(doc), defaults())
    assert not errors, f"{doc.relative_to(ROOT)}: " + "; ".join(errors)


def schema_leaves(node: dict | None = None, prefix: str = "") -> list[str]:
    """Every configurable key: the schema's properties that hold no properties of their own."""
    node = resolve(node or SCHEMA)
    properties = node.get("properties", {})
    if not properties:
        return [prefix]
    return [leaf for key, child in properties.items()
            for leaf in schema_leaves(child, f"{prefix}.{key}" if prefix else key)]  # fmt: skip


def key_pattern(key: str) -> re.Pattern:
    """A documented key as a pattern: `reversal.speedrun.*` stands for each speedrun key."""
    return re.compile(ANY_KEY.sub(lambda _: ".+", re.escape(key).replace(r"\*", "*")))


def test_every_config_key_has_a_row():
    documented = [key_pattern(key) for doc in CONFIG_DOCS for key, _ in config_rows(doc)]
    missing = [k for k in schema_leaves() if not any(d.fullmatch(k) for d in documented)]
    assert not missing, f"config keys no doc's Key | Default table gives: {missing}"


def config_key_spans(doc: Path) -> list[str]:
    """Code spans that name a dotted key of a config section (`numerics.threads`), not a
    file (`config.yaml`) or a module (`tcrformer.core.io`)."""
    sections = set(SCHEMA["properties"])
    return [s for s in spans(doc) if re.fullmatch(r"[a-z]\w*(\.[\w*<>]+)+", s)
            and s.split(".")[0] in sections and not DATA_FILE.fullmatch(s)
            and not in_the_library(s)]  # fmt: skip


def in_the_library(dotted: str) -> bool:
    """Whether `dotted` is a module of the library and a name it defines (`figures.draw`,
    `numerics.pin`, `golden_file.METHOD_VERSION`)."""
    module, name = dotted.split(".", 1)
    return any(name in top_level_names(path) for path in LIB.rglob(f"{module}.py"))


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def value_keys() -> tuple[set[str], str]:
    """The value keys the golden file knows, and the library's code that writes the others
    (a chapter writes `f"{prefix}.label_smoothing_floor"`)."""
    golden = yaml.safe_load((ROOT / defaults()["golden"]["file"]).read_text())
    code = "\n".join(p.read_text() for p in LIB.rglob("*.py"))
    return {entry["key"] for entry in golden["values"]}, code


def is_value_key(dotted: str, golden: set[str], code: str) -> bool:
    return dotted in golden or f'.{dotted.split(".")[-1]}"' in code


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_config_key_a_doc_names_exists(doc):
    """A dotted name under a config section is a config key, or a value key (the golden
    file's, or one the library writes); a name with a placeholder is let through."""
    golden, code = value_keys()
    missing = [s for s in config_key_spans(doc) if schema_node(s) is None
               and not is_value_key(s, golden, code) and not re.search(r"[<*]", s)]  # fmt: skip
    assert not missing, f"{doc.relative_to(ROOT)} names config keys that do not exist: {missing}"


# The notebook ---------------------------------------------------------------------------------

DURATION = re.compile(r"\b(?:an? |\d+ |half an? )?(?:second|minute|hour)s?\b")


def test_the_notebook_states_no_wall_clock_time():
    """How long a cell takes depends on the machine; the measured times, with their date and
    machine, are the README's and bench/README.md's."""
    notebook = json.loads((ROOT / "notebooks/walkthrough.ipynb").read_text())
    text = "\n".join("".join(cell["source"]) for cell in notebook["cells"])
    said = [m.group(0) for m in DURATION.finditer(text)]
    assert not said, f"notebooks/walkthrough.ipynb states times: {said}"


# One word each: "the explainer" is the source documents, "seed" a random seed only -----------

# Phrases that once used "seed" for the explainer; the brackets keep this file from matching.
SEED_AS_EXPLAINER = re.compile(
    r"seed[ ](?:document|text|code|section)s?\b|seed[_]values\.yaml|the seeds[ ]print"
    r"|what the seeds[ ]say|the seeds['] (?:published|values)"
)
# Records of what was (the changelog, archived and committed runs) keep their words.
HISTORY = ("CHANGELOG.md", "results/", "config/golden/draws/")
TEXT = (".py", ".smk", ".md", ".yaml", ".rst", ".cff", ".ipynb", ".toml")


def test_seed_means_a_random_seed_only():
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in sorted(tree_paths())
             if p.suffix in TEXT and not str(p.relative_to(ROOT)).startswith(HISTORY)
             for m in SEED_AS_EXPLAINER.finditer(p.read_text())]  # fmt: skip
    assert not found, f"'seed' for the explainer's documents: {found}"


# The checks catch what they were written against ------------------------------------------------

STALE = """
| Key | Default | Meaning |
|---|---|---|
| `claims.version` | 2 | The protocol. |
| `claims.arms` | 23 arms | The arms. |
| `numerics.ranks` | 2 (1 when the key is absent) | Ranks. |

The bands are tested by `test_golden_bands.py`.

| chapter | rules |
|---|---|
| claims | claims_register, claims_sweep_grid (a checkpoint: extends a sweep), claims_sweep |
"""


def test_the_checks_catch_the_drifts_they_were_written_for(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(STALE)
    errors = config_table_errors(config_rows(doc), defaults())
    assert [e.split(":")[0] for e in errors] == ["claims.version", "claims.arms", "numerics.ranks"]
    assert missing_tests(doc) == ["test_golden_bands.py"]
    assert cited_rules(doc) == {"claims_register", "claims_sweep_grid", "claims_sweep"}
