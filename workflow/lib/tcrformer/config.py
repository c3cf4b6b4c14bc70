"""Config validation with errors a user can act on.

`snakemake.utils.validate` checks the schema and fills in defaults, but its messages are
long. `first_schema_error` runs the same schema first and turns the first problem into one
line that names the key and the offending value; `check_semantics` adds the checks a JSON
schema cannot express. Both are called from workflow/rules/common.smk before any rule runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


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


def load_schema(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


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


def first_schema_error(config: Mapping, schema: Mapping) -> ConfigError | None:
    """The first schema violation in `config` as a ConfigError, or None if it is valid."""
    import jsonschema

    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), e.path))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    # Descend into oneOf/anyOf to the most specific cause.
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    path = list(error.absolute_path)
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
    if kind == "minLength" and expected == 1:
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


def check_semantics(config: Mapping) -> None:
    """Checks that need more than one value at a time. Raises ConfigError."""
    for check in (_check_toy, _check_notes, _check_reversal, _check_plm, _check_figures):
        check(config)


def _check_toy(config: Mapping) -> None:
    toy = config.get("toy") or {}
    if not toy:
        return
    sequence, focus = toy["sequence"], toy["focus_position"]
    if focus > len(sequence):
        raise ConfigError(
            "toy.focus_position", focus, f"outside toy.sequence (length {len(sequence)})"
        )
    width, heads = 4 + toy["pe_dims"], len(toy["heads"])
    if 2 * heads != width:
        raise ConfigError(
            "toy.heads", f"{heads} heads",
            f"{heads} heads of width 2 must fill the {width} input columns (4 + toy.pe_dims)",
        )  # fmt: skip


def _check_model_shape(section: Mapping, prefix: str) -> None:
    """d_model must split evenly into heads, and be even for the sin/cos table."""
    d_model, heads = section.get("d_model"), section.get("num_heads")
    if d_model is None or heads is None:
        return
    if d_model % 2:
        raise ConfigError(f"{prefix}.d_model", d_model, "must be even (sin/cos pairs)")
    if d_model % heads:
        raise ConfigError(
            f"{prefix}.d_model", d_model, f"not divisible by {prefix}.num_heads = {heads}"
        )


def _check_notes(config: Mapping) -> None:
    notes = config.get("notes") or {}
    if not notes:
        return
    _check_model_shape(notes, "notes")
    d_model, pe = notes.get("d_model"), notes.get("pe") or {}
    if d_model is not None:
        for i, dim in enumerate(pe.get("period_dims", [])):
            if dim >= d_model:
                raise ConfigError(
                    f"notes.pe.period_dims[{i}]", dim, f"not below notes.d_model = {d_model}"
                )
        if pe.get("probe_dims", 0) > d_model:
            raise ConfigError(
                "notes.pe.probe_dims", pe["probe_dims"], f"more than notes.d_model = {d_model}"
            )
    max_len, shapes = notes.get("max_len"), notes.get("shapes") or {}
    for key in ("src_len", "tgt_len"):
        if max_len is not None and shapes.get(key, 0) > max_len:
            raise ConfigError(
                f"notes.shapes.{key}", shapes[key], f"longer than notes.max_len = {max_len}"
            )
    page2 = notes.get("page2") or {}
    width, heads = page2.get("d_model"), page2.get("nhead")
    if width is not None and width % 2:
        raise ConfigError("notes.page2.d_model", width, "must be even (sin/cos pairs)")
    if width is not None and heads and width % heads:
        raise ConfigError(
            "notes.page2.d_model", width, f"not divisible by notes.page2.nhead = {heads}"
        )


def _check_reversal(config: Mapping) -> None:
    rev = config.get("reversal") or {}
    if not rev:
        return
    _check_model_shape(rev, "reversal")
    if "min_len" in rev and "max_len" in rev and rev["min_len"] > rev["max_len"]:
        raise ConfigError(
            "reversal.min_len", rev["min_len"], f"greater than reversal.max_len = {rev['max_len']}"
        )


def _check_plm(config: Mapping) -> None:
    plm = config.get("plm") or {}
    cdr3 = (plm.get("chain") or {}).get("cdr3")
    if not cdr3:
        return
    for i, position in enumerate(plm.get("positions", [])):
        if not 1 <= position <= len(cdr3):
            raise ConfigError(
                f"plm.positions[{i}]", position, f"outside plm.chain.cdr3 (length {len(cdr3)})"
            )


def _check_figures(config: Mapping) -> None:
    figures, notes = config.get("figures") or {}, config.get("notes") or {}
    d_model = notes.get("d_model")
    for i, dim in enumerate(figures.get("wave_dims", [])):
        if d_model is not None and dim >= d_model:
            raise ConfigError(
                f"figures.wave_dims[{i}]", dim, f"not below notes.d_model = {d_model}"
            )
