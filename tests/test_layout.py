"""The house keeps its shape: every chapter of one form, rules and scripts named alike, each
fact defined once, and docs/architecture.md naming what is there."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import tokenize
from pathlib import Path

import pytest

from tcrformer.chapters import PACKAGES
from tcrformer.core.config import ConfigError

from conftest import ROOT

LIB = ROOT / "workflow" / "lib" / "tcrformer"
RULES = ROOT / "workflow" / "rules"
SCRIPTS = ROOT / "workflow" / "scripts"
CLAIMS = ROOT / "workflow" / "claims"  # a chapter in a folder of its own: rules, scripts, config
RULE_FILES = sorted([*RULES.glob("*.smk"), *CLAIMS.glob("*.smk")])
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def rules_and_scripts() -> dict[str, str | None]:
    """{rule name: the script it runs, or None} over every rule file (checkpoints too)."""
    found = {}
    for path in RULE_FILES:
        text = path.read_text()
        blocks = re.split(r"^(?:rule|checkpoint) (\w+):", text, flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2], strict=True):
            script = re.search(r'script:\s*\n\s*"(?:\.\./)*[\w/]*?(\w+)\.py"', body)
            found[name] = script[1] if script else None
    return found


def defined(kind: type, name: str) -> list[str]:
    """Where in the lib a function or class of this name is defined."""
    places = []
    for path in LIB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, kind) and node.name == name:
                places.append(str(path.relative_to(LIB)))
    return places


# Every chapter of one form --------------------------------------------------------------------


def rule_file(chapter: str) -> Path:
    """A chapter's rule file: workflow/rules/<c>.smk, or <c>.smk in its own folder."""
    own = ROOT / "workflow" / chapter / f"{chapter}.smk"
    return own if own.exists() else RULES / f"{chapter}.smk"


@pytest.mark.parametrize("chapter", PACKAGES)
def test_every_chapter_is_a_package_of_settings_compute_and_figure_data(chapter):
    settings = importlib.import_module(f"tcrformer.chapters.{chapter}.settings")
    assert inspect.ismethod(settings.Settings.from_config), "Settings.from_config, a classmethod"
    compute = importlib.import_module(f"tcrformer.chapters.{chapter}.compute")
    figure_data = importlib.import_module(f"tcrformer.chapters.{chapter}.figure_data")
    assert isinstance(figure_data.FILES, dict) and callable(figure_data.read)
    rules = rule_file(chapter)
    assert rules.exists(), f"one rule file per chapter: {chapter}.smk"
    # Each rule of the chapter runs a script of its own name, which calls compute.<rule>.
    chapter_rules = rules_of(rules)
    assert chapter_rules, chapter
    for rule in chapter_rules:
        assert callable(getattr(compute, rule, None)), f"{chapter}.compute.{rule}"
        scripts = SCRIPTS if rules.parent == RULES else rules.parent / "scripts"
        script = (scripts / f"{rule}.py").read_text()
        assert f"import {rule}" in script, f"scripts/{rule}.py calls compute.{rule}"


def rules_of(path: Path) -> list[str]:
    """The rules of a file that run a script of their own name (not targets or benches)."""
    scripts = rules_and_scripts()
    names = re.findall(r"^rule (\w+):", path.read_text(), flags=re.M)
    in_scripts = set(re.findall(r'script:\s*\n\s*"(?:\.\./)?scripts/(\w+)\.py"', path.read_text()))
    return [name for name in names if scripts.get(name) == name and name in in_scripts]


@pytest.mark.parametrize("chapter", PACKAGES)
def test_every_chapter_is_checked_by_the_config_check(chapter, monkeypatch):
    """The workflow's validation runs each chapter's own checks: break one, and it stops."""
    from tcrformer.validation import validate

    from conftest import default_config

    settings = importlib.import_module(f"tcrformer.chapters.{chapter}.settings").Settings

    def refuse(config):
        raise ConfigError(f"{chapter}.sentinel", 0, "the chapter's own check ran")

    monkeypatch.setattr(settings, "from_config", refuse)
    with pytest.raises(ConfigError, match=f"{chapter}.sentinel"):
        validate(default_config(), ROOT / "workflow/schemas/config.schema.yaml")


BENCH = ROOT / "bench"
# import_module calls whose argument is neither a literal nor an f-string: what each can
# import, by the module that makes the call. A new call of this kind fails the graph test
# until it is named here.
DYNAMIC_IMPORTS = {
    "tcrformer.figures": lambda: {f.module for f in importlib.import_module(
        "tcrformer.figures").FIGURES},
}  # fmt: skip


def module_name(path: Path) -> str:
    if path.is_relative_to(LIB):
        dotted = ".".join(path.relative_to(LIB).with_suffix("").parts)
        return ("tcrformer." + dotted).removesuffix(".__init__")
    return "bench." + path.stem


def imported_names(tree: ast.AST, module: str, known: set[str]) -> set[str]:
    """What a module imports: import statements (a `from package import module` counts the
    module), and importlib.import_module calls: a literal, an f-string (every known module
    it can spell), or one named in DYNAMIC_IMPORTS."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):  # fmt: skip
            target = node.args[0]
            if isinstance(target, ast.Constant):
                names.add(target.value)
            elif isinstance(target, ast.JoinedStr):
                pattern = "".join(re.escape(part.value) if isinstance(part, ast.Constant)
                                  else r"[^.]+" for part in target.values)  # fmt: skip
                names.update(k for k in known if re.fullmatch(pattern, k))
            else:
                assert module in DYNAMIC_IMPORTS, f"{module}: an import_module call to name"
                names.update(DYNAMIC_IMPORTS[module]())
    return names & known


def import_graph() -> dict[str, set[str]]:
    """{module: the modules it imports} over the library and bench/."""
    paths = [*LIB.rglob("*.py"), *BENCH.glob("*.py")]
    known = {module_name(p) for p in paths}
    return {module_name(p): imported_names(ast.parse(p.read_text()), module_name(p), known)
            for p in paths}  # fmt: skip


def workflow_bench_modules() -> set[str]:
    """The bench/ files the workflow runs or loads (a rule's script:, bench_module(...))."""
    text = "\n".join(p.read_text() for p in [*RULES.glob("*.smk"), ROOT / "workflow/Snakefile"])
    scripts = re.findall(r'"\.\./\.\./bench/(\w+)\.py"', text)
    loaded = re.findall(r'bench_module\("(\w+)"\)', text)
    return {f"bench.{name}" for name in [*scripts, *loaded]}


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each once, as the path that closes it."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_core_imports_no_chapter_and_no_module_imports_its_importer():
    """core/ knows no chapter; the library imports nothing of bench/ (bench/ sits above it,
    and the workflow runs some of it); and no import cycle anywhere, importlib's included."""
    imports = import_graph()
    core = {m: i for m, i in imports.items() if m.startswith("tcrformer.core")}
    assert not {m: sorted(i) for m, i in core.items() if any(".chapters" in n for n in i)}
    lib = {m: i for m, i in imports.items() if m.startswith("tcrformer")}
    assert not {m: sorted(i) for m, i in lib.items() if any(n.startswith("bench") for n in i)}
    cycles = [c for c in cycles_in(imports) if len(set(c)) > 1 or c[0] != c[-1]]
    assert not cycles, cycles


def test_the_graph_sees_importlib_and_the_workflows_bench_files():
    """What the graph test reads: an f-string import_module (chapters.part_of), the figure
    table's dynamic one, and the bench files the ensemble rules load and run."""
    imports = import_graph()
    assert "tcrformer.chapters.toy.settings" in imports["tcrformer.chapters"]
    assert "tcrformer.plotting.schematics" in imports["tcrformer.figures"]
    used = workflow_bench_modules()
    assert {"bench.golden_power"} <= used
    assert all(name in imports for name in used), used
    assert "tcrformer.models.fast" in imports["bench.golden_power"]
    # A cycle through an importlib edge is found: chapters -> toy.settings -> chapters.
    looped = {**imports, "tcrformer.chapters.toy.settings": {"tcrformer.chapters"}}
    assert cycles_in(looped)


def test_script_and_rule_names_match():
    mismatched = {
        rule: script
        for rule, script in rules_and_scripts().items()
        if script is not None
        and script not in (rule, rule.removesuffix("_chapter"))
        and rule not in ("bench",)  # fmt: skip
    }
    assert not mismatched, mismatched
    figures = (RULES / "figures.smk").read_text()
    assert '"../scripts/draw_figure.py"' in figures  # the table's rules, one script


def test_every_script_belongs_to_a_rule():
    scripts = set(rules_and_scripts().values()) | {"draw_figure"}
    assert {p.stem for p in SCRIPTS.glob("*.py")} <= scripts


def test_the_figure_rules_come_from_one_table_in_a_short_file():
    assert len((RULES / "figures.smk").read_text().splitlines()) < 150


# Each fact defined once --------------------------------------------------------------------


# Names defined more than once on purpose: a protocol every chapter (or CLI) follows, an
# interface two model wrappers share, and the fast model mirroring the reference by contract.
PROTOCOL = {"Settings", "read", "main", "guesses"}
MIRRORED = {"EncoderDecoder", "EncoderLayer", "DecoderLayer", "LayerNorm",
            "scaled_dot_product_attention"}  # NumPy (the toy) and PyTorch (the notes)  # fmt: skip


def public_definitions() -> dict[str, list[str]]:
    """{name: the lib modules that define it at top level}, for every public function and
    class of the lib."""
    places: dict[str, list[str]] = {}
    for path in LIB.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                places.setdefault(node.name, []).append(str(path.relative_to(LIB)))
    return places


def test_each_fact_has_one_definition():
    twice = {n: p for n, p in public_definitions().items()
             if len(p) > 1 and n not in PROTOCOL | MIRRORED}  # fmt: skip
    assert not twice, twice


def test_the_one_definition_check_sees_a_second_definition(tmp_path, monkeypatch):
    """The check can fail: a copy of a lib module defining `period` again is caught."""
    copy = tmp_path / "tcrformer"
    import shutil

    shutil.copytree(LIB, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "chapters/notes/again.py").write_text("def period(dim, d):\n    return 1.0\n")
    monkeypatch.setattr(sys.modules[__name__], "LIB", copy)
    assert "period" in {n for n, p in public_definitions().items() if len(p) > 1}


def test_the_feature_names_live_in_the_toy_input_alone():
    hits = [str(p.relative_to(LIB)) for p in LIB.rglob("*.py") if "pos_sin_" in p.read_text()
            or '"hydropathy", "charge"' in p.read_text()]  # fmt: skip
    assert hits == ["models/chemistry.py"], hits


def test_the_workflow_reads_nothing_under_tests():
    files = [ROOT / "Snakefile", *RULE_FILES, *SCRIPTS.glob("*.py"), *CLAIMS.rglob("*.py"),
             *LIB.rglob("*.py"), ROOT / "config" / "config.yaml"]  # fmt: skip
    path_literal = re.compile(r"[\"']tests/")  # a path in code, not a mention in prose
    readers = [str(p.relative_to(ROOT)) for p in files if path_literal.search(p.read_text())]
    assert not readers, readers


def test_scripts_and_benches_patch_no_import_path():
    for path in [*SCRIPTS.glob("*.py"), *CLAIMS.rglob("*.py"), *(ROOT / "bench").glob("*.py")]:
        assert "sys.path" not in path.read_text(), path.name


# The rules ask the library, claim by claim ----------------------------------------------------


def claim_logic_in_rules(folder: Path) -> list[tuple[str, str]]:
    """(rule file, name) for every string of a .smk file that names a per-arm metric
    (claims.metrics.METRICS) or a test, direction or manipulation check (claims.kinds):
    which evaluation an arm needs, and which numbers a claim's job reads, are the library's
    to answer."""
    from tcrformer.chapters.claims import kinds
    from tcrformer.chapters.claims.metrics import METRICS

    tests = {test for names in kinds.TESTS.values() for test in names}
    names = {*METRICS, *tests, *kinds.DIRECTIONS, *kinds.PRECONDITIONS}
    found = []
    for path in sorted(folder.glob("*.smk")):
        with path.open() as handle:
            for token in tokenize.generate_tokens(handle.readline):
                text = re.sub(r"^[a-zA-Z]*", "", token.string).strip("\"'")
                if token.type == tokenize.STRING and text in names:
                    found.append((path.name, text))
    return found


def test_no_rule_file_names_a_metric_or_a_test():
    assert claim_logic_in_rules(RULES) == claim_logic_in_rules(CLAIMS) == []


def test_each_benchmarked_test_names_a_rule_that_runs_its_job():
    from tcrformer.chapters.claims.kinds import BENCHMARKS, EVALUATED

    assert set(BENCHMARKS) <= {test for tests in EVALUATED.values() for test in tests}
    assert set(BENCHMARKS.values()) <= set(rules_of(rule_file("claims")))


def test_the_rule_check_sees_a_metric_table_put_back(tmp_path):
    """v3's table of the extra each metric needs, and its look-up of a claim by its test,
    in a copy of the claims helpers: both are caught."""
    text = (CLAIMS / "helpers.smk").read_text()
    text += 'EXTRAS = {"beam_net_wins": "beam", "init_scale": "init"}\n'
    text += 'MIN_LENGTH = claim_test("quadratic").get("min_length")\n'
    (tmp_path / "helpers.smk").write_text(text)
    assert claim_logic_in_rules(tmp_path) == [
        ("helpers.smk", "beam_net_wins"),
        ("helpers.smk", "init_scale"),
        ("helpers.smk", "quadratic"),
    ]


# The map ------------------------------------------------------------------------------------


def test_the_architecture_page_names_every_package_and_chapter():
    page = ARCHITECTURE.read_text()
    for folder in ("core/", "models/", "chapters/", "plotting/", "figures.py"):
        assert folder in page, folder
    for chapter in PACKAGES:
        rules = rule_file(chapter).relative_to(ROOT / "workflow").as_posix()
        assert f"{chapter}/" in page and rules in page, chapter
    for path in sorted((LIB / "core").glob("*.py")) + sorted((LIB / "models").glob("*.py")):
        if path.name != "__init__.py":
            assert path.name in page, path.name


# The library holds what the pipeline runs -----------------------------------------------------

OFFLINE = re.compile(r"^def (fit|refit|validate|power|stratify|archive)\w*\(", re.MULTILINE)
ENTRY_POINTS = {"training/worker.py", "training/fingerprint.py"}  # the pipeline runs them
PIPELINE_NAMES = {  # names the offline pattern matches that rules do run
    "validation.py": "validate(config): the config check before any rule",
}


def offline_commands(folder: Path) -> list[str]:
    """Modules of `folder` that define a fitting, validation, power or archive function, or a
    command line of their own that no rule runs."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        text, name = path.read_text(), path.relative_to(folder).as_posix()
        command = '__name__ == "__main__"' in text and name not in ENTRY_POINTS
        if (OFFLINE.search(text) and name not in PIPELINE_NAMES) or command:
            found.append(name)
    return found


def test_the_library_holds_no_offline_command(tmp_path):
    """Fitting, validation, power and archive commands live in tools/, outside the library,
    and a copy of the library with one put back is caught."""
    assert offline_commands(LIB) == []
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "bands.py").write_text("def fit_bands(seeds):\n    return seeds\n")
    assert offline_commands(tmp_path) == ["chapters/bands.py"]
    assert {p.stem for p in (ROOT / "tools").glob("*.py")} >= {"golden", "claims_power",
                                                               "claims_archive"}  # fmt: skip
