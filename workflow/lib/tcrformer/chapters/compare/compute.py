"""Chapter compare's rule, returning its outputs by name.

compare_runs  two finished runs: every key of their merged values.json with both values,
              the difference and whether the golden file's tolerance tells them apart; the
              difference of their configs (and git state, numerics) from the manifests; the
              training losses overlaid; the attention maps side by side; a summary
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from tcrformer.chapters.compare import figure_data
from tcrformer.core import golden, golden_file
from tcrformer.core.io import sha256
from tcrformer.core.text import flatten, is_number, short

# Tolerance kinds that tell two runs apart: the values differ where one run, taken as the
# seed, would not pass against the other. The rest (one-sided bounds, report-only, ensemble
# bands) say nothing about two runs, so their keys differ where they are not exactly equal.
PAIRWISE_KINDS = ("exact", "exact-first-1", "abs")
EXACT = golden_file.Tolerance("exact")
COLUMNS = ("key", "value_a", "value_b", "difference", "differs", "rule")
MANIFEST_SECTIONS = ("config", "git", "numerics")


# The value table ------------------------------------------------------------------------------


def _shape(x: Any) -> Any:
    return tuple(_shape(item) for item in x) if isinstance(x, list | tuple) else None


def difference(a: Any, b: Any) -> Any:
    """b - a of numbers; the max abs difference of numeric lists of one shape; else whether
    they are equal ('equal', 'not equal', 'shape differs' of lists)."""
    if is_number(a) and is_number(b):
        return b - a
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if _shape(a) != _shape(b):
            return "shape differs"
        flat_a, flat_b = flatten(a), flatten(b)
        if flat_a and all(is_number(v) for v in flat_a + flat_b):
            return max(abs(y - x) for x, y in zip(flat_a, flat_b, strict=True))
    same = golden.compare(b, a, EXACT)[0] == golden.PASS
    return "equal" if same else "not equal"


def tolerance_rule(entry: golden_file.GoldenEntry | None) -> tuple[golden_file.Tolerance, str]:
    """The tolerance that decides whether a key differs, and the rule in words."""
    if entry is None:
        return EXACT, "exact: no golden entry"
    tolerance = entry.tolerance
    if tolerance.kind in PAIRWISE_KINDS:
        return tolerance, f"golden {tolerance}"
    why = {
        "min": "a one-sided bound",
        "max": "a one-sided bound",
        "report-only": "report-only",
        golden_file.ENSEMBLE: "an ensemble band",
        golden_file.PERCENTILE: "a place among the fitting seeds",
    }[tolerance.kind]
    return EXACT, f"exact: golden {tolerance.kind} is {why}"


def _cell(value: Any) -> Any:
    """A value as one CSV cell: numbers and strings as they are, anything else as JSON."""
    import json

    if is_number(value) or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def value_table(
    values_a: Mapping[str, Any],
    values_b: Mapping[str, Any],
    entries: Sequence[golden_file.GoldenEntry],
    names: tuple[str, str] = ("a", "b"),
) -> pd.DataFrame:
    """One row per key of either run: both values, the difference, differs, the rule used."""
    by_key = {entry.key: entry for entry in entries}
    rows = []
    for key in sorted(set(values_a) | set(values_b)):
        if key not in values_a or key not in values_b:
            only = names[0] if key in values_a else names[1]
            a, b = values_a.get(key), values_b.get(key)
            rows.append(
                {
                    "key": key,
                    "value_a": "" if key not in values_a else _cell(a),
                    "value_b": "" if key not in values_b else _cell(b),
                    "difference": "",
                    "differs": True,
                    "rule": f"only in {only}",
                }
            )
            continue
        a, b = values_a[key], values_b[key]
        tolerance, rule = tolerance_rule(by_key.get(key))
        status, _ = golden.compare(b, a, tolerance)
        rows.append(
            {
                "key": key,
                "value_a": _cell(a),
                "value_b": _cell(b),
                "difference": difference(a, b),
                "differs": status not in (golden.PASS, golden.REPORT),
                "rule": rule,
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


# The config diff ------------------------------------------------------------------------------


def dotted(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as {dotted key: value}; lists are values, an empty mapping is one."""
    if isinstance(node, Mapping) and node:
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(dotted(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: node}


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{dotted key: {"a": value, "b": value}} of every key whose value differs; a key in one
    mapping only has that side and "only_in"."""
    flat_a, flat_b = dotted(a), dotted(b)
    differing = {}
    for key in sorted(set(flat_a) | set(flat_b)):
        if key in flat_a and key in flat_b:
            if golden.compare(flat_b[key], flat_a[key], EXACT)[0] != golden.PASS:
                differing[key] = {"a": flat_a[key], "b": flat_b[key]}
        elif key in flat_a:
            differing[key] = {"a": flat_a[key], "only_in": "a"}
        else:
            differing[key] = {"b": flat_b[key], "only_in": "b"}
    return differing


def config_diff(
    manifest_a: Mapping[str, Any], manifest_b: Mapping[str, Any], names: tuple[str, str]
) -> dict[str, Any]:
    """The difference of two manifests' config, git state and numerics, section by section."""
    result: dict[str, Any] = {"a": names[0], "b": names[1]}
    for section in MANIFEST_SECTIONS:
        result[section] = diff(manifest_a.get(section) or {}, manifest_b.get(section) or {})
    result["differ"] = {section: len(result[section]) for section in MANIFEST_SECTIONS}
    return result


# The summary ----------------------------------------------------------------------------------


def _md(value: Any, limit: int = 48) -> str:
    """A value as one Markdown table cell (an empty string as "")."""
    if isinstance(value, str) and not value:
        return '""'
    return short(value, limit).replace("|", "\\|").replace("\n", " ")


def _side(row: Mapping[str, Any], side: str) -> str:
    return _md(row[side]) if side in row else "(absent)"


def _value(values: Mapping[str, Any], key: str) -> str:
    return _md(values[key]) if key in values else "(absent)"


def compare_markdown(
    names: tuple[str, str],
    runs: Mapping[str, figure_data.RunData],
    folders: Mapping[str, str],
    manifest_sha256: Mapping[str, str],
    table: pd.DataFrame,
    diffs: Mapping[str, Any],
) -> str:
    a, b = names
    differing = table[table["differs"]]
    only = int(table["rule"].str.startswith("only in ").sum())

    def commit(run: str) -> str:
        data = runs[run]
        dirty = {True: " (uncommitted changes)", False: "", None: ""}.get(data.dirty, "")
        return f"`{data.commit[:12]}`{dirty}"

    lines = [
        f"# Compare: run {a} against run {b}",
        "",
        f"| | {a} | {b} |",
        "|---|---|---|",
        f"| folder | `{folders[a]}/` | `{folders[b]}/` |",
        f"| commit | {commit(a)} | {commit(b)} |",
        "| config sha256 | "
        + " | ".join(f"`{str(runs[r].manifest.get('config_sha256', '—'))[:12]}`" for r in names)
        + " |",
        "| manifest sha256 | " + " | ".join(f"`{manifest_sha256[r][:12]}`" for r in names) + " |",
        "",
        f"**{len(differing)} of {len(table)} keys differ** ({only} in one run only). A key "
        "differs where the golden file's tolerance would tell the two values apart (exact, "
        "exact-first-1, abs), and otherwise where they are not exactly equal (no golden "
        "entry, or a min/max bound, report-only or ensemble tolerance); the `rule` column "
        "says which.",
        "",
        "## Config diff",
        "",
        "From the two manifests, every dotted key whose value differs: "
        + ", ".join(f"{n} in {s}" for s, n in diffs["differ"].items())
        + ".",
        "",
    ]
    for section in MANIFEST_SECTIONS:
        rows = diffs[section]
        lines += [f"### {section}", ""]
        if not rows:
            lines += ["The same in both runs.", ""]
            continue
        lines += [f"| key | {a} | {b} |", "|---|---|---|"]
        lines += [f"| `{k}` | {_side(r, 'a')} | {_side(r, 'b')} |" for k, r in rows.items()]
        lines.append("")
    agree = table[~table["differs"]]
    for title, part in (("Values that differ", differing), ("Values that agree", agree)):
        lines += [f"## {title} ({len(part)})", ""]
        if part.empty:
            lines += ["None.", ""]
            continue
        lines += [f"| key | {a} | {b} | difference | rule |", "|---|---|---|---|---|"]
        for row in part.itertuples(index=False):
            difference = "—" if row.difference == "" else _md(row.difference)  # one run only
            lines.append(
                f"| `{row.key}` | {_value(runs[a].values, row.key)} "
                f"| {_value(runs[b].values, row.key)} | {difference} | {row.rule} |"
            )
        lines.append("")
    return "\n".join(lines)


# The rule -------------------------------------------------------------------------------------


def compare_runs(settings, entries: Sequence[golden_file.GoldenEntry]) -> dict[str, Any]:
    """Two finished runs (settings.a, settings.b) side by side, read from their folders;
    `entries` are the golden file's (golden_file.load_golden)."""
    from tcrformer.plotting import compare as plotting

    names = (settings.a, settings.b)
    folders = {run: str(settings.folder(run)) for run in names}
    runs = {run: figure_data.read(figure_data.paths(folders[run])) for run in names}
    manifest_sha256 = {run: sha256(settings.manifest(run)) for run in names}
    table = value_table(runs[names[0]].values, runs[names[1]].values, entries, names)
    diffs = config_diff(runs[names[0]].manifest, runs[names[1]].manifest, names)
    return {
        "values": table,
        "config_diff": {**diffs, "manifest_sha256": manifest_sha256},
        "summary": compare_markdown(names, runs, folders, manifest_sha256, table, diffs),
        **plotting.writers("losses", plotting.draw_losses(runs)),
        **plotting.writers("attention", plotting.draw_attention(runs)),
    }
