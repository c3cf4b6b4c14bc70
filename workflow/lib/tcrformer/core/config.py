"""Config validation with errors a user can act on.

`snakemake.utils.validate` checks the schema and fills in defaults, but its messages are
long. `first_schema_error` runs the same schema first and turns the first problem into one
line that names the key and the offending value; `check` adds the checks a JSON schema
cannot express (the ones it is handed: each chapter's `Settings.from_config`, the figures').
Both are called from workflow/rules/common.smk before any rule runs. The schema is parsed
once per process.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core.shipped import REPOSITORY, shipped

SCHEMA_PATH = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"
"""The config schema, defaults included."""

SHIPPED_FILES = ("golden.file",)
"""The config keys that name a file the workflow ships: the default config's paths."""


class ConfigError(ValueError):
    """A config value that cannot be used; str() is one line naming the key and the value."""

    def __init__(self, key: str, value: Any, problem: str):
        self.key, self.value, self.problem = key, value, problem
        super().__init__(f"config error: {key} = {_show(value)}: {problem}")


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dotted(path) -> str:
    return (
        ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[")
        or "<config>"
    )


@functools.cache
def _parsed_schema(path: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where it was built
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader)  # noqa: S506 (a safe loader)


def load_schema(path: str | Path) -> dict:
    """The schema at `path`, parsed once per process: one shared object, read only."""
    return _parsed_schema(Path(path).resolve())


def _validator(schema: Mapping, section: str | None = None):
    """A jsonschema validator of the schema, or of one of its sections, made once."""
    key = (id(schema), section)
    cached = _VALIDATORS.get(key)
    if cached is None or cached[0] is not schema:  # the id of a schema since freed: rebuild
        import jsonschema

        node = (
            schema
            if section is None
            else {**schema["properties"][section], "$defs": schema.get("$defs", {})}
        )
        cached = _VALIDATORS[key] = (schema, jsonschema.validators.validator_for(node)(node))
    return cached[1]


_VALIDATORS: dict = {}


def _resolve(node: Mapping, schema: Mapping) -> Mapping:
    while isinstance(node, Mapping) and "$ref" in node:
        node = {**schema["$defs"][node["$ref"].split("/")[-1]],
                **{k: v for k, v in node.items() if k != "$ref"}}  # fmt: skip
    return node


def _from_text(text: str, kinds: list[str]) -> Any:
    """The number or boolean a command-line string stands for, or the string itself."""
    if "boolean" in kinds and text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind, parse in (("integer", int), ("number", float)):
        if kind in kinds:
            try:
                return parse(text)
            except ValueError:
                pass
    return text


def coerce_cli_strings(config: dict, schema: Mapping) -> dict:
    """Turn strings into the numbers and booleans the schema asks for, in place.

    Snakemake reads nested `--config key={...}` values as strings ("1024", "false"), so
    without this `--config "notes={'d_model': 1024}"` would be refused. Strings that do
    not parse stay strings, and the schema then names them.
    """

    def walk(value: Any, node: Mapping) -> Any:
        node = _resolve(node, schema)
        if isinstance(value, dict):
            props = node.get("properties", {})
            for key in value:
                if key in props:
                    value[key] = walk(value[key], props[key])
            return value
        if isinstance(value, list) and isinstance(node.get("items"), Mapping):
            return [walk(v, node["items"]) for v in value]
        if isinstance(value, str):
            kinds = node.get("type", [])
            kinds = [kinds] if isinstance(kinds, str) else list(kinds)
            if "string" not in kinds:
                return _from_text(value, kinds)
        return value

    return walk(config, schema)


def fill_defaults(config: dict, schema: Mapping) -> dict:
    """The schema's defaults for every key the config leaves out, in place (what
    snakemake.utils.validate(..., set_default=True) does, on the schema already parsed:
    Snakemake's own reads the file again through its template engine, half a second)."""

    def walk(value: Any, node: Mapping) -> None:
        node = _resolve(node, schema)
        if not isinstance(value, dict):
            return
        for key, child in node.get("properties", {}).items():
            child = _resolve(child, schema)
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                walk(value[key], child)

    walk(config, schema)
    return config


def first_schema_error(
    config: Mapping, schema: Mapping, section: str | None = None
) -> ConfigError | None:
    """The first schema violation in `config` as a ConfigError, or None if it is valid.
    With `section`, `config` is that section alone, checked against its part of the schema."""
    import jsonschema

    validator = _validator(schema, section)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), e.path))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    # Descend into oneOf/anyOf to the most specific cause.
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    path = ([section] if section else []) + list(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        key = _dotted([*path, extra[0]]) if extra else _dotted(path)
        value = error.instance.get(extra[0]) if extra else error.instance
        return ConfigError(key, value, f"unknown key (allowed here: {', '.join(allowed)})")
    hint = error.schema.get("description") if isinstance(error.schema, Mapping) else None
    problem = _problem(error)
    if hint:
        problem += f" ({hint})"
    return ConfigError(_dotted(path), error.instance, problem)


def _problem(error) -> str:
    kind, expected = error.validator, error.validator_value
    if kind == "type":
        return f"must be of type {expected}"
    if kind == "pattern":
        return f"must match the pattern {expected}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {
            "minimum": ">=",
            "exclusiveMinimum": ">",
            "maximum": "<=",
            "exclusiveMaximum": "<",
        }
        return f"must be {words[kind]} {expected}"
    if kind in ("minLength", "minItems") and expected == 1:
        return "must not be empty"
    if kind == "enum":
        return f"must be one of {', '.join(map(str, expected))}"
    if kind == "required":
        return error.message
    if kind == "multipleOf":
        return f"must be a multiple of {expected}"
    return error.message


def get(config: Mapping, dotted: str) -> Any:
    """config['a']['b'] for 'a.b'."""
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node


def locate_shipped_files(config: dict) -> dict:
    """Each key of SHIPPED_FILES set, in place, to where its file is found (core.shipped):
    in the working folder, else in the workflow's repository. A file found in neither is
    left as given, for the file check to name."""
    for dotted in SHIPPED_FILES:
        section, key = _parent(config, dotted)
        if section.get(key):
            section[key] = str(shipped(section[key]))
    return config


def _parent(config: Mapping, dotted: str) -> tuple[Mapping, str]:
    """The section holding a dotted key ({} when a section is missing), and the key."""
    *sections, key = dotted.split(".")
    node = config
    for name in sections:
        node = node.get(name) or {}
    return node, key


def run_checks(config: Mapping, checks: Iterable[Callable[[Mapping], Any]] = ()) -> None:
    """Every check a schema cannot express. Raises ConfigError.

    The files the config names must exist; then each of `checks` reads the config (the
    workflow hands in every chapter's `Settings.from_config` and the figures' check: core
    knows no chapter).
    """
    _check_files(config)
    for one in checks:
        one(config)


def _check_files(config: Mapping) -> None:
    """Files the config names must exist now, not when a rule first reads them."""
    for dotted in SHIPPED_FILES:
        section, key = _parent(config, dotted)
        path = section.get(key)
        if path and not Path(path).is_file():
            places = [Path(path).resolve()]
            if not Path(path).is_absolute():
                places.append(REPOSITORY / path)
            raise ConfigError(dotted, path, f"file not found ({' or '.join(map(str, places))})")


def sections(config: Mapping, *names: str) -> dict[str, Any]:
    """The named top-level sections of the config, for a rule's params (tracked by Snakemake)."""
    return {name: config[name] for name in names if name in config}


def section_error(section: str, values: Mapping, named_as: str) -> ConfigError | None:
    """The first schema error of `values` read as the config section `section`, named
    under `named_as` instead (a claims arm's reversal keys, say), or None."""
    error = first_schema_error(dict(values), load_schema(SCHEMA_PATH), section)
    if error is None:
        return None
    key = error.key.replace(section, named_as, 1)
    return ConfigError(key, error.value, error.problem)


# The keys that read the `receptor:` block when left null: (section, ..., key) -> its field.
RECEPTOR_KEYS = {
    ("toy", "sequence"): "cdr3b",
    ("plm", "chain", "cdr3"): "cdr3b",
    ("reversal", "cdr3"): "cdr3b",
    ("plm", "tcr", "trbv"): "trbv",
    ("plm", "germline", "v_gene"): "trbv",
    ("plm", "germline", "j_gene"): "trbj",
    ("plm", "tcr", "cdr3a"): "cdr3a",
    ("plm", "tcr", "trav"): "trav",
}


def apply_receptor(config: dict) -> dict:
    """Every chapter key left null takes the receptor's value, in place: the workflow's
    config check does it, and so does any tool that reads config/config.yaml itself."""
    for path, field in RECEPTOR_KEYS.items():
        *sections, key = path
        node = config
        for section in sections:
            node = node[section]
        if node[key] is None:
            node[key] = config["receptor"][field]
    return config
