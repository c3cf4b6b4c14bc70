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

from tcrformer.chapters import packages, records
from tcrformer.core.config import ConfigError

from conftest import ROOT, snakemake

LIB = ROOT / "workflow" / "lib" / "tcrformer"
RULES = ROOT / "workflow" / "rules"
SCRIPTS = ROOT / "workflow" / "scripts"
CLAIMS = ROOT / "workflow" / "claims"  # a chapter in a folder of its own: rules, scripts, config
CLAIMS_LIB = CLAIMS / "lib" / "tcrclaims"  # and its package, above the library
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


# The claims are a unit of their own: a folder (workflow/claims/: rules, scripts, config, and
# their package, tcrclaims), included by the Snakefile while it is there; no record of theirs
# is in the library.
UNITS = {"claims": "tcrclaims"}  # the unit's folder under workflow/ -> its package
APART_FOLDER = "claims"


def part_of(chapter: str, part: str):
    """A chapter's settings, compute or figure_data: the library's package, or a unit's."""
    return importlib.import_module(f"{UNITS.get(chapter, f'tcrformer.chapters.{chapter}')}.{part}")


@pytest.mark.parametrize("chapter", [*packages(), *UNITS])
def test_every_chapter_is_a_package_of_settings_compute_and_figure_data(chapter):
    settings = part_of(chapter, "settings")
    assert inspect.ismethod(settings.Settings.from_config), "Settings.from_config, a classmethod"
    compute = part_of(chapter, "compute")
    figure_data = part_of(chapter, "figure_data")
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


@pytest.mark.parametrize("chapter", packages())
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


def test_every_chapter_declares_itself_once_in_its_package():
    declared = {chapter.name for chapter in records()}
    assert declared == set(packages())
    for chapter in records():
        assert importlib.import_module(f"tcrformer.chapters.{chapter.name}").CHAPTER == chapter
    assert [c.category for c in records()] == sorted(c.category for c in records())
    assert chapter_lists(ROOT) == []


def chapter_lists(root: Path) -> list[str]:
    """Files under `root`'s workflow/ that spell a list of chapters by hand: a list, tuple,
    set or dict (its keys) of three or more chapter names, in the library or a rule file (a
    call's arguments name config sections, such as params_of("toy", "notes", "figures"))."""
    names, found = set(packages()), []
    for path in sorted((root / "workflow").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict) and sum(
                isinstance(i, ast.Constant) and i.value in names for i in items) >= 3:  # fmt: skip
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    rule_files = [*(root / "workflow/rules").glob("*.smk"), root / "workflow/Snakefile"]
    literal = re.compile(r"(?<![\w)\]])[\[({][^\])}]*[\])}]")  # not a call's arguments
    for path in sorted(rule_files):
        for group in literal.findall(path.read_text()):
            if len(set(re.findall(r"[\"'](\w+)[\"']", group)) & names) >= 3:
                found.append(str(path.relative_to(root)))
    return found


def test_the_chapter_list_check_sees_a_hand_kept_list(tmp_path):
    """The check can fail: a copy of the workflow with a list of chapters put back in a rule
    file and in the library is caught."""
    import shutil

    shutil.copytree(ROOT / "workflow", tmp_path / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    with (tmp_path / "workflow/rules/common.smk").open("a") as rules:
        rules.write('\nVALUE_CHAPTERS = ["toy", "notes", "plm", "reversal"]\n')
    with (tmp_path / "workflow/lib/tcrformer/figures.py").open("a") as lib:
        lib.write('\nORDER = {"toy": 1, "plm": 2, "notes": 3}\n')
    found = [place.split(":")[0] for place in chapter_lists(tmp_path)]
    assert found == ["workflow/lib/tcrformer/figures.py", "workflow/rules/common.smk"]


def test_the_snakefile_includes_the_chapters_rule_files_from_their_records():
    text = (ROOT / "workflow/Snakefile").read_text()
    loop = 'for chapter in CHAPTERS:\n\n    include: f"rules/{chapter.name}.smk"\n'
    assert loop in text
    by_hand = [c.name for c in records() if f'include: "rules/{c.name}.smk"' in text]
    assert not by_hand, by_hand


# Each layer looks only down -------------------------------------------------------------------

BENCH = ROOT / "bench"
TOOLS = ROOT / "tools"
# import_module calls whose argument is neither a literal nor an f-string: what each can
# import, by the module that makes the call. A new call of this kind fails the graph test
# until it is named here.
DYNAMIC_IMPORTS = {
    "tcrformer.figures": lambda: {f.module for f in importlib.import_module(
        "tcrformer.figures").FIGURES},
}  # fmt: skip


# The layers, lowest first: a module imports its own layer and those below, never one above.
# A unit's package (tcrclaims) stands on the whole library; the scripts and rule files sit
# above them all.
LAYERS = ("core", "stats", "models", "plotting", "training", "chapters", "workflow", "units",
          "offline")  # fmt: skip


def layer(module: str) -> int:
    """tcrformer.<layer>...; the library's own top-level modules (figures, validation,
    notebook) are the workflow's way in; a unit's package is above it; bench.* and tools.*
    are offline."""
    parts = module.split(".")
    if parts[0] in ("bench", "tools"):
        return LAYERS.index("offline")
    if parts[0] in UNITS.values():
        return LAYERS.index("units")
    if module == "tcrformer":
        return LAYERS.index("core")  # the package's constants (AMINO_ACIDS, __version__)
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else LAYERS.index("workflow")


def module_name(path: Path) -> str:
    for package in (LIB, CLAIMS_LIB):
        if path.is_relative_to(package):
            dotted = ".".join(path.relative_to(package).with_suffix("").parts)
            return f"{package.name}.{dotted}".removesuffix(".__init__")
    dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)  # bench/, tools/
    return dotted.removesuffix(".__init__")


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
    """{module: the modules it imports} over the library, the claims' package, bench/ and
    tools/."""
    paths = [*LIB.rglob("*.py"), *CLAIMS_LIB.rglob("*.py"), *BENCH.glob("*.py"),
             *TOOLS.rglob("*.py")]  # fmt: skip
    known = {module_name(p) for p in paths}
    return {module_name(p): imported_names(ast.parse(p.read_text()), module_name(p), known)
            for p in paths}  # fmt: skip


def upward_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """{module: what it imports from a layer above its own}."""
    found = {m: sorted(n for n in names if layer(n) > layer(m)) for m, names in graph.items()}
    return {m: names for m, names in found.items() if names}


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


def test_every_layer_imports_only_the_layers_below_it():
    """core < models < plotting < training < chapters < the workflow's way in < the claims'
    package < bench/, tools/: importlib's imports counted; and no import cycle anywhere."""
    imports = import_graph()
    assert upward_imports(imports) == {}
    cycles = [c for c in cycles_in(imports) if len(set(c)) > 1 or c[0] != c[-1]]
    assert not cycles, cycles


def test_the_graph_sees_importlib_and_an_import_up_a_layer():
    """What the graph test reads: an f-string import_module (chapters.module), the figure
    table's dynamic one; an import up a layer, and a cycle through importlib, are caught."""
    imports = import_graph()
    assert "tcrformer.chapters.toy.settings" in imports["tcrformer.chapters"]
    assert "tcrformer.plotting.schematics" in imports["tcrformer.figures"]
    assert "tcrformer.models.transformer" in imports["bench.golden_power"]
    up = {**imports, "tcrformer.training.loop": {"tcrformer.chapters.toy.compute"}}
    assert upward_imports(up)["tcrformer.training.loop"] == ["tcrformer.chapters.toy.compute"]
    # The library importing the claims' package, and that package importing a tool, are up.
    assert "tcrformer.figures" in imports["tcrclaims.figures"]
    up = {**imports, "tcrformer.figures": {"tcrclaims.figures"},
          "tcrclaims.settings": {"tools.claims_power"}}  # fmt: skip
    assert upward_imports(up) == {"tcrformer.figures": ["tcrclaims.figures"],
                                  "tcrclaims.settings": ["tools.claims_power"]}  # fmt: skip
    # A cycle through an importlib edge is found: chapters -> toy.settings -> chapters.
    looped = {**imports, "tcrformer.chapters.toy.settings": {"tcrformer.chapters"}}
    assert cycles_in(looped)


def unit_names(root: Path) -> list[str]:
    """Files of `root`'s library, rule files (workflow/rules, the Snakefile aside) and scripts
    that name a unit's package or its figures: the library and the chapters' workflow know
    no unit, so that deleting its folder removes it."""
    workflow = root / "workflow"
    paths = [*(workflow / "lib").rglob("*.py"), *(workflow / "rules").glob("*.smk"),
             *(workflow / "scripts").glob("*.py")]  # fmt: skip
    names = re.compile("|".join([*UNITS.values(), r"\bfigC\d"]))
    return sorted(str(p.relative_to(root)) for p in paths if names.search(p.read_text()))


def test_the_library_knows_no_unit():
    """tcrformer neither imports the claims' package nor names it or its figures; no chapter
    package, record, report section or figure of the library is the claims'."""
    from tcrformer.figures import CATEGORIES, FIGURES

    assert unit_names(ROOT) == []
    assert not set(UNITS) & {*packages(), *CATEGORIES, *(f.chapter for f in FIGURES)}
    imports = import_graph()
    assert not {m: n for m, names in imports.items() if m.startswith("tcrformer")
                for n in names if n.split(".")[0] in UNITS.values()}  # fmt: skip


def test_the_unit_check_sees_a_figure_row_and_an_import_put_back(tmp_path):
    lib, rules = tmp_path / "workflow/lib/tcrformer", tmp_path / "workflow/rules"
    lib.mkdir(parents=True)
    rules.mkdir(parents=True)
    (lib / "figures.py").write_text('FIGURES = (Figure("figC1_training_arms", "claims"),)\n')
    (rules / "common.smk").write_text("from tcrclaims.settings import JOB_FOLDER\n")
    (rules / "toy.smk").write_text("# the toy chapter: no figure of another's\n")
    assert unit_names(tmp_path) == ["workflow/lib/tcrformer/figures.py",
                                    "workflow/rules/common.smk"]  # fmt: skip


# What loads code without an import statement: the graph above cannot see it.
LOADS_BY_PATH = {"importlib", "runpy", "spec_from_file_location", "SourceFileLoader", "exec"}


def loads_by_path(path: Path) -> list[str]:
    """The names of a Python or rule file that load code by its path, comments aside."""
    with path.open() as handle:
        tokens = list(tokenize.generate_tokens(handle.readline))
    return [t.string for t in tokens if t.type == tokenize.NAME and t.string in LOADS_BY_PATH
            and not (path.suffix == ".py" and t.string == "importlib")]  # fmt: skip


def rule_file_loads(workflow: Path) -> list[str]:
    """What a rule file loads past the layers: code by its path (importlib, runpy, exec), a
    script outside workflow/scripts (a chapter with a folder of its own: its scripts/), a
    string naming bench/ (bench.smk alone runs bench/), an include of a file outside
    workflow/rules (the Snakefile also includes the claims folder's rule file)."""
    found = []
    units = sorted(workflow.glob(f"{APART_FOLDER}/*.smk"))
    for path in sorted([*(workflow / "rules").glob("*.smk"), workflow / "Snakefile", *units]):
        text, name = path.read_text(), path.relative_to(workflow).as_posix()
        found += [f"{name}: {loaded}" for loaded in loads_by_path(path)]
        scripts = "scripts/" if path in units else "../scripts/"
        scripts = "../../bench/" if path.name == "bench.smk" else scripts
        found += [f"{name}: script {script}" for script in
                  re.findall(r'^\s*script:\s*\n\s*"([^"]+)"', text, flags=re.M)
                  if not script.startswith(scripts)]  # fmt: skip
        if path.name != "bench.smk" and re.search(r"[\"'][^\"'\n]*bench/", text):
            found.append(f"{name}: bench/")
        allowed = ("",) if path.suffix == ".smk" else ("rules/", f"{APART_FOLDER}/")
        for target in re.findall(r'^\s*include:\s*f?"([^"]+)"', text, flags=re.M):
            if not any(target.startswith(a) and "/" not in target.removeprefix(a) for a in allowed):
                found.append(f"{name}: include {target}")
    return found


def test_no_rule_file_loads_past_the_layers():
    """The rules run workflow/scripts and import the library; bench.smk alone runs bench/;
    no rule file loads code by its path; every include stays within workflow/rules."""
    assert rule_file_loads(ROOT / "workflow") == []


def test_the_rule_file_check_sees_each_way_past_the_layers(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "Snakefile").write_text('include: "rules/common.smk"\ninclude: "../bench/x.smk"\n')
    (tmp_path / "rules/common.smk").write_text(
        "import importlib.util\n\n"
        'HARNESS = Path("bench/golden_power.py")  # loaded by path\n\n\n'
        'rule power:\n    script:\n        "../../bench/golden_power.py"\n'
    )  # fmt: skip
    bench = 'rule bench:\n    script:\n        "../../bench/b.py"\n'
    (tmp_path / "rules/bench.smk").write_text(bench)
    assert rule_file_loads(tmp_path) == [
        "Snakefile: bench/",
        "Snakefile: include ../bench/x.smk",
        "rules/common.smk: importlib",
        "rules/common.smk: script ../../bench/golden_power.py",
        "rules/common.smk: bench/",
    ]


def test_no_module_loads_code_by_its_path():
    """The library, bench/, tools/ and the scripts import what they use."""
    paths = [*LIB.rglob("*.py"), *CLAIMS_LIB.rglob("*.py"), *BENCH.glob("*.py"),
             *TOOLS.rglob("*.py"), *SCRIPTS.glob("*.py"),
             *(CLAIMS / "scripts").glob("*.py")]  # fmt: skip
    found = {str(p.relative_to(ROOT)): loads_by_path(p) for p in paths}
    assert {path: names for path, names in found.items() if names} == {}


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


def rule_descriptions(listing: str) -> dict[str, str]:
    """{rule: its description} from `snakemake --list-target-rules` ('name (docstring)')."""
    found = {}
    for line in listing.splitlines():
        described = re.fullmatch(r"(\w+)(?: \((.+)\))?", line.strip())
        if described:
            found[described[1]] = described[2] or ""
    return found


def test_every_target_rule_says_in_one_line_what_it_makes(workflow_copy):
    """`snakemake --list-target-rules` gives each target a line of its own."""
    done = snakemake(workflow_copy, "--list-target-rules")
    assert done.returncode == 0, done.stderr[-2000:]
    listed = rule_descriptions(done.stdout)
    assert {"all", "toy", "reversal", "power", "fig03_attention_row"} <= set(listed)
    bare = sorted(name for name, line in listed.items() if not line)
    assert not bare, bare
    assert rule_descriptions("toy (Target: the toy chapter.)\nbench\n") == {
        "toy": "Target: the toy chapter.", "bench": ""}  # fmt: skip


# Each fact defined once --------------------------------------------------------------------


# Names defined more than once on purpose: a protocol every chapter (or CLI) follows, an
# interface two model wrappers share, and the fast model mirroring the reference by contract.
PROTOCOL = {"Settings", "read", "main", "guesses"}
MIRRORED = {"EncoderDecoder", "EncoderLayer", "DecoderLayer", "LayerNorm",
            "scaled_dot_product_attention"}  # NumPy (the toy) and PyTorch (the notes)  # fmt: skip


def public_definitions() -> dict[str, list[str]]:
    """{name: the modules that define it at top level}, for every public function and class
    of the library and the claims' package."""
    places: dict[str, list[str]] = {}
    for package in (LIB, CLAIMS_LIB):
        for path in package.rglob("*.py"):
            module = f"{package.name}/{path.relative_to(package)}"
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name[0] != "_":
                    places.setdefault(node.name, []).append(module)
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
    paths = [*LIB.rglob("*.py"), *CLAIMS_LIB.rglob("*.py")]
    hits = [str(p.relative_to(ROOT)) for p in paths if "pos_sin_" in p.read_text()
            or '"hydropathy", "charge"' in p.read_text()]  # fmt: skip
    assert hits == ["workflow/lib/tcrformer/models/chemistry.py"], hits


def test_the_workflow_reads_nothing_under_tests():
    files = [ROOT / "Snakefile", *RULE_FILES, *SCRIPTS.glob("*.py"), *CLAIMS.rglob("*.py"),
             *LIB.rglob("*.py"), ROOT / "config" / "config.yaml"]  # fmt: skip
    path_literal = re.compile(r"[\"']tests/")  # a path in code, not a mention in prose
    readers = [str(p.relative_to(ROOT)) for p in files if path_literal.search(p.read_text())]
    assert not readers, readers


def test_scripts_and_benches_patch_no_import_path():
    for path in [*SCRIPTS.glob("*.py"), *CLAIMS.rglob("*.py"), *(ROOT / "bench").glob("*.py")]:
        assert "sys.path" not in path.read_text(), path.name


# The rules ask the claims' package, claim by claim ---------------------------------------------


def claim_logic_in_rules(folder: Path) -> list[tuple[str, str]]:
    """(rule file, name) for every string of a .smk file that names a per-arm metric
    (tcrclaims.metrics.METRICS) or a test, direction or manipulation check (tcrclaims.kinds):
    which evaluation an arm needs, and which numbers a claim's job reads, are the package's
    to answer."""
    from tcrclaims import kinds
    from tcrclaims.metrics import METRICS

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
    from tcrclaims.kinds import BENCHMARKS, EVALUATED

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
    for chapter in [*packages(), *UNITS]:
        rules = rule_file(chapter).relative_to(ROOT / "workflow").as_posix()
        assert f"{chapter}/" in page and rules in page, chapter
    for package in UNITS.values():
        assert f"lib/{package}/" in page, package
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
    assert offline_commands(LIB) == offline_commands(CLAIMS_LIB) == []
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "bands.py").write_text("def fit_bands(seeds):\n    return seeds\n")
    assert offline_commands(tmp_path) == ["chapters/bands.py"]
    packages = {p.parent.name for p in TOOLS.glob("*/__init__.py")}
    assert {p.stem for p in TOOLS.glob("*.py")} | packages >= {"golden", "claims_power",
                                                                "claims_archive"}  # fmt: skip


# The code says what it does, not how it came to be -----------------------------------------

# An issue's number, a review's item, a name that carries a version: history, which goes to
# CHANGELOG.md and docs/ (the same as grep -rnE with --include='*.py' --include='*.smk').
HISTORY = re.compile(r"issue [0-9]+|review(er)?'s? item|_ADDED_LATER|v[0-9]+_[a-z_]+")


def history_in(root: Path) -> list[str]:
    """path:line of every line of code under workflow/, tools/ and bench/ that tells history."""
    paths = [p for folder in ("workflow", "tools", "bench") for pattern in ("*.py", "*.smk")
             for p in (root / folder).rglob(pattern)]  # fmt: skip
    return [f"{path.relative_to(root)}:{number}" for path in sorted(paths)
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if HISTORY.search(line)]  # fmt: skip


def test_no_code_tells_its_history():
    assert history_in(ROOT) == []


def test_the_history_check_sees_an_issue_number_and_a_versioned_name(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/a.py").write_text("# the faults of issue 44\nx = 1\n")
    (tmp_path / "workflow/rules").mkdir(parents=True)
    (tmp_path / "workflow/rules/b.smk").write_text("from m import v4_metrics\n")
    assert history_in(tmp_path) == ["bench/a.py:1", "workflow/rules/b.smk:1"]
