"""Every config key rejects a bad value with one line naming the key.

The invalid values are generated from the schema itself (wrong type, out of range, empty,
not in the enum, an unknown key in every section), so a key added to the schema is covered
without touching this file. All cases run through the same functions the Snakefile calls
(tcrformer.core.config); a sample of them also runs through `snakemake` to prove the wiring:
exit code 1, one line, no traceback, nothing under results/.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
import yaml

from tcrformer.core.config import ConfigError, load_schema
from tcrformer.validation import validate as validate_config

from conftest import ROOT, default_config, snakemake, write_config

SCHEMA_PATH = ROOT / "workflow/schemas/config.schema.yaml"
SCHEMA = load_schema(SCHEMA_PATH)


def resolve(node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].split("/")[-1]
        node = {**SCHEMA["$defs"][name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def bad_values(node: dict) -> Iterator[tuple[str, object]]:
    """(what is wrong, a value) pairs that `node` must reject."""
    node = resolve(node)
    if "oneOf" in node:
        yield "matches no alternative", 12345
        return
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if "enum" in node:
        yield "not one of the choices", "no-such-choice"
    if kinds and "string" not in kinds:
        yield "wrong type", "not-a-number" if "array" not in kinds else "not-a-list"
    elif kinds and "object" not in kinds:
        yield "wrong type", {"a": 1}
    if "integer" in kinds or "number" in kinds:
        if "minimum" in node:
            yield "below the minimum", node["minimum"] - 1
        if "exclusiveMinimum" in node:
            yield "at the exclusive minimum", node["exclusiveMinimum"]
        if "maximum" in node:
            yield "above the maximum", node["maximum"] + 1
        if "exclusiveMaximum" in node:
            yield "at the exclusive maximum", node["exclusiveMaximum"]
    if "integer" in kinds and "number" not in kinds:
        yield "not an integer", 1.5
    if "string" in kinds:
        if node.get("minLength", 0) >= 1:
            yield "empty", ""
        if "pattern" in node:
            yield "against the pattern", "../../etc/passwd !"
    if "array" in kinds and node.get("minItems", 0) >= 1:
        yield "empty list", []
    if "boolean" in kinds:
        yield "wrong type", "yes"


def leaf_keys(node: dict, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    node = resolve(node)
    props = node.get("properties")
    if props:
        yield (*path, "no_such_key"), {"__unknown__": True}
        for name, child in props.items():
            yield from leaf_keys(child, (*path, name))
    else:
        yield path, node


def cases() -> Iterator:
    for path, node in leaf_keys(SCHEMA):
        if node.get("__unknown__"):
            yield pytest.param(path, "unknown key", "x", id=".".join(path))
            continue
        for why, value in bad_values(node):
            yield pytest.param(path, why, value, id=f"{'.'.join(path)}-{why}")


def with_value(config: dict, path: tuple, value) -> dict:
    config = copy.deepcopy(config)
    node = config
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return config


def validate(config: dict) -> ConfigError | None:
    """What workflow/rules/common.smk calls (tcrformer.validation), minus sys.exit."""
    try:
        validate_config(copy.deepcopy(config), SCHEMA_PATH)
    except ConfigError as err:
        return err
    return None


ALL_CASES = list(cases())


def test_the_default_config_is_valid():
    assert validate(default_config()) is None


def test_every_section_and_leaf_has_cases():
    covered = {case.values[0] for case in ALL_CASES}
    leaves = {path for path, node in leaf_keys(SCHEMA) if not node.get("__unknown__")}
    assert leaves <= covered, sorted(leaves - covered)


@pytest.mark.parametrize(("path", "why", "value"), ALL_CASES)
def test_bad_value_names_its_key(path, why, value):
    error = validate(with_value(default_config(), path, value))
    assert error is not None, f"{'.'.join(path)} accepted a value that is {why}: {value!r}"
    message = str(error)
    assert "\n" not in message
    assert message.startswith("config error: ")
    dotted = ".".join(path)
    # The error names the key (or, for a list or a section, the first bad element in it).
    assert error.key == dotted or error.key.startswith(dotted), (error.key, dotted)


SEMANTIC_CASES = [
    ({"toy": {"focus_position": 14}}, "toy.focus_position"),
    ({"notes": {"d_model": 500}}, "notes.d_model"),
    ({"notes": {"d_model": 511, "num_heads": 1}}, "notes.d_model"),
    ({"figures": {"wave_dims": [0, 512]}}, "figures.wave_dims[1]"),
]


@pytest.mark.parametrize(("override", "key"), SEMANTIC_CASES)
def test_cross_key_checks(override, key):
    config = default_config()
    for section, values in override.items():
        config[section].update(values)
    error = validate(config)
    assert error is not None and error.key == key


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"golden": {"strict": "yes"}}, "golden.strict"),  # the schema
        ({"notes": {"d_model": 500}}, "notes.d_model"),  # a chapter's own check
    ],
    ids=["schema", "chapter check"],
)
def test_snakemake_stops_before_any_rule(workflow_copy, override, key):
    bad = write_config(workflow_copy / "bad.yaml", override)
    before = yaml.safe_load((workflow_copy / "config/config.yaml").read_text())
    proc = snakemake(workflow_copy, "--configfile", str(bad))
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("config error")]
    assert len(errors) == 1 and errors[0].startswith(f"config error: {key} = "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (workflow_copy / "results").exists()
    assert yaml.safe_load((workflow_copy / "config/config.yaml").read_text()) == before


def test_command_line_strings_become_the_types_the_schema_asks_for():
    from tcrformer.core.config import coerce_cli_strings

    config = default_config()
    config["notes"].update(d_model="1024", num_heads="16", dropout="0.2")
    config["golden"]["strict"] = "False"
    config["toy"]["sequence"] = "123"  # a string key stays a string
    coerce_cli_strings(config, SCHEMA)
    assert config["notes"]["d_model"] == 1024 and config["notes"]["dropout"] == 0.2
    assert config["golden"]["strict"] is False
    assert config["toy"]["sequence"] == "123"
    config["toy"]["sequence"] = "CASSIRSSYEQYF"
    config["notes"]["d_model"] = "big"
    coerce_cli_strings(config, SCHEMA)
    assert str(validate(config)).startswith("config error: notes.d_model = 'big'")


# The cases tests/test_pipeline_toy.py sends through Snakemake, one per family, all here.
BAD_CONFIGS = [
    ({"toy": {"sequence": "CASSXZ"}}, "toy.sequence"),
    ({"toy": {"sequence": ""}}, "toy.sequence"),
    ({"toy": {"focus_position": 40}}, "toy.focus_position"),
    ({"toy": {"focus_position": "six"}}, "toy.focus_position"),
    ({"toy": {"colour": "red"}}, "toy.colour"),
    ({"run": "../escape"}, "run"),
    # Files the config names are checked before any rule runs, not when first read.
    (
        {"plm": {"esm2": {"checkpoint": "/nonexistent/esm2.pt", "required": True}}},
        "plm.esm2.checkpoint",
    ),
    ({"golden": {"file": "/nonexistent/golden.yaml"}}, "golden.file"),
]


def merged_with(override: dict) -> dict:
    config = default_config()
    for section, values in override.items():
        if isinstance(values, dict):
            for key, value in values.items():
                if isinstance(value, dict):
                    config[section][key] = {**config[section][key], **value}
                else:
                    config[section][key] = value
        else:
            config[section] = values
    return config


@pytest.mark.parametrize(("override", "key"), BAD_CONFIGS)
def test_the_cases_the_snakemake_tests_sample_are_refused_in_process(override, key):
    """What the workflow checks before any rule runs (tcrformer.validation), in-process."""
    error = validate(merged_with(override))
    assert error is not None
    message = str(error)
    assert message.startswith(f"config error: {key} = ") and "\n" not in message
    if "nonexistent" in str(override):
        assert "/nonexistent/" in message  # the line names the path


@pytest.mark.parametrize("start", ["empty", "default"])
def test_the_defaults_filled_in_are_snakemakes(start):
    """tcrformer.core.config.fill_defaults does what snakemake.utils.validate(set_default=
    True) does, without reading the schema file a second time."""
    from snakemake.utils import validate as snakemake_validate

    from tcrformer.core.config import fill_defaults

    config = {} if start == "empty" else default_config()
    ours, theirs = copy.deepcopy(config), copy.deepcopy(config)
    fill_defaults(ours, SCHEMA)
    snakemake_validate(theirs, str(SCHEMA_PATH), set_default=True)
    assert ours == theirs and ours["reversal"]["steps"] == 3000


# --- the receptor block ---------------------------------------------------------------------


def test_the_receptor_block_fills_every_chapter_key_left_null():
    from tcrformer.core.config import RECEPTOR_KEYS

    config = default_config(receptor=False)
    config["receptor"] = {**config["receptor"], "cdr3b": "CASSIRSSYEQYW"}  # another F/W end
    config["plm"]["germline"]["j_cdr3"] = "SYEQYW"
    settings = validate_config(config, SCHEMA_PATH)
    assert config["toy"]["sequence"] == config["plm"]["chain"]["cdr3"] == "CASSIRSSYEQYW"
    assert settings["reversal"].recipes["reversal"].cdr3 == "CASSIRSSYEQYW"
    assert settings["plm"].receptor.cdr3b == "CASSIRSSYEQYW"
    for path, field in RECEPTOR_KEYS.items():  # every key it names now holds the receptor's
        node = config
        for part in path:
            node = node[part]
        assert node == config["receptor"][field], path


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"receptor": {"cdr3b": "CASSLAPGATNEKLFF"}}, "plm.germline.v_cdr3"),  # CASSI ends
        ({"plm": {"germline": {"j_cdr3": "TNEKLFF"}}}, "plm.germline.j_cdr3"),
        ({"plm": {"germline": {"v_cdr3": "CASSIRS", "j_cdr3": "SSYEQYF"}}}, "plm.germline.j_cdr3"),
    ],
    ids=["receptor without its germline ends", "J end not the CDR3's", "ends overlap"],
)
def test_a_cdr3_that_disagrees_with_its_germline_ends_is_refused(override, key):
    config = default_config(receptor=False)
    for section, values in override.items():
        for name, value in values.items():
            if isinstance(value, dict):
                config[section][name].update(value)
            else:
                config[section][name] = value
    error = validate(config)
    assert error is not None and error.key == key, error


@pytest.mark.slow
def test_snakemake_stops_before_any_rule_on_bands_of_another_version(workflow_copy):
    """The golden file's bands file is read before any rule: one line naming it, exit 1."""
    bands = workflow_copy / "config/golden/v3/bands.yaml"
    committed = bands.read_text()
    bands.write_text(committed.replace("\nversion: 3\n", "\nversion: 2\n"))
    try:
        proc = snakemake(workflow_copy, "-n")
    finally:
        bands.write_text(committed)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("golden file error")]
    assert len(errors) == 1 and "config/golden/v3/bands.yaml" in errors[0], proc.stderr
    assert "version 2" in errors[0] and "Traceback" not in proc.stderr + proc.stdout
    assert not (workflow_copy / "results").exists()
