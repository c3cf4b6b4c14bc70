"""The house keeps its shape: every chapter of one form, rules and scripts named alike, each
fact defined once, and docs/architecture.md naming what is there."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from tcrformer.chapters import CHAPTERS

from conftest import ROOT

LIB = ROOT / "workflow" / "lib" / "tcrformer"
RULES = ROOT / "workflow" / "rules"
SCRIPTS = ROOT / "workflow" / "scripts"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def rules_and_scripts() -> dict[str, str | None]:
    """{rule name: the script it runs, or None} over every rule file."""
    found = {}
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text()
        blocks = re.split(r"^rule (\w+):", text, flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2], strict=True):
            script = re.search(r'script:\s*\n\s*"\.\./(?:\.\./)?[\w/]*?(\w+)\.py"', body)
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


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_is_a_package_of_settings_compute_and_figure_data(chapter):
    settings = importlib.import_module(f"tcrformer.chapters.{chapter}.settings")
    assert inspect.ismethod(settings.Settings.from_config), "Settings.from_config, a classmethod"
    compute = importlib.import_module(f"tcrformer.chapters.{chapter}.compute")
    figure_data = importlib.import_module(f"tcrformer.chapters.{chapter}.figure_data")
    assert isinstance(figure_data.FILES, dict) and callable(figure_data.read)
    assert (RULES / f"{chapter}.smk").exists(), f"one rule file per chapter: {chapter}.smk"
    # Each rule of the chapter runs a script of its own name, which calls compute.<rule>.
    chapter_rules = rules_of(RULES / f"{chapter}.smk")
    assert chapter_rules, chapter
    for rule in chapter_rules:
        assert callable(getattr(compute, rule, None)), f"{chapter}.compute.{rule}"
        script = (SCRIPTS / f"{rule}.py").read_text()
        assert f"import {rule}" in script, f"scripts/{rule}.py calls compute.{rule}"


def rules_of(path: Path) -> list[str]:
    """The rules of a file that run a script of their own name (not targets or benches)."""
    scripts = rules_and_scripts()
    names = re.findall(r"^rule (\w+):", path.read_text(), flags=re.M)
    in_scripts = set(re.findall(r'script:\s*\n\s*"\.\./scripts/(\w+)\.py"', path.read_text()))
    return [name for name in names if scripts.get(name) == name and name in in_scripts]


def test_every_chapter_is_checked_by_the_config_check():
    source = inspect.getsource(importlib.import_module("tcrformer.core.config").check)
    assert "settings_of()" in source  # every chapter in CHAPTERS, nothing by name


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


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        (ast.FunctionDef, "sinusoidal_table"),
        (ast.FunctionDef, "period"),
        (ast.FunctionDef, "causal_mask"),
        (ast.FunctionDef, "padding_mask"),
        (ast.FunctionDef, "block_weights"),
        (ast.FunctionDef, "short"),
        (ast.FunctionDef, "feature_names"),
        (ast.FunctionDef, "flatten"),
    ],
)
def test_each_fact_has_one_definition(kind, name):
    places = defined(kind, name)
    assert len(places) == 1, f"{name} defined in {places}"


def test_the_feature_names_live_in_the_toy_input_alone():
    hits = [str(p.relative_to(LIB)) for p in LIB.rglob("*.py") if "pos_sin_" in p.read_text()
            or '"hydropathy", "charge"' in p.read_text()]  # fmt: skip
    assert hits == ["models/chemistry.py"], hits


def test_gone_for_good():
    """Names the redesign removed: two maps of recipe names, dead helpers, a second count."""
    text = "\n".join(p.read_text() for p in [*LIB.rglob("*.py"), *RULES.glob("*.smk")])
    for name in ("RECIPE_OF", "KEY_PREFIX", "key_prefix", "recipe_dir", "class_legend",
                 "block_parameter_counts", "check_semantics"):  # fmt: skip
        assert name not in text, name
    assert "as_dict" not in (LIB / "chapters/reversal/settings.py").read_text()
    assert "py.typed" not in (ROOT / "pyproject.toml").read_text()


def test_the_workflow_reads_nothing_under_tests():
    files = [ROOT / "Snakefile", *RULES.glob("*.smk"), *SCRIPTS.glob("*.py"),
             *LIB.rglob("*.py"), ROOT / "config" / "config.yaml"]  # fmt: skip
    path_literal = re.compile(r"[\"']tests/")  # a path in code, not a mention in prose
    readers = [str(p.relative_to(ROOT)) for p in files if path_literal.search(p.read_text())]
    assert not readers, readers


def test_scripts_and_benches_patch_no_import_path():
    for path in [*SCRIPTS.glob("*.py"), *(ROOT / "bench").glob("*.py")]:
        assert "sys.path" not in path.read_text(), path.name


# The map ------------------------------------------------------------------------------------


def test_the_architecture_page_names_every_package_and_chapter():
    page = ARCHITECTURE.read_text()
    for folder in ("core/", "models/", "chapters/", "plotting/", "figures.py"):
        assert folder in page, folder
    for chapter in CHAPTERS:
        assert f"{chapter}/" in page and f"rules/{chapter}.smk" in page, chapter
    for path in sorted((LIB / "core").glob("*.py")) + sorted((LIB / "models").glob("*.py")):
        if path.name != "__init__.py":
            assert path.name in page, path.name
