"""The golden check: regenerated values against the values the explainer prints, read from
the golden file (tcrformer.core.golden_file).

The golden file (config/golden/explainer_values.yaml) lists, for every published number, its
key, the explainer's value, a tolerance and the chapter that produces it. Tolerance kinds:

    exact            equal (lists element by element; 1 == 1.0)
    {abs: x}         |ours - explainer| <= x, element by element
    {min: x}         ours >= x        (a band that encodes a claim, e.g. "above 0.8")
    {max: x}         ours <= x
    exact-first-1    lists whose first element is equal (the rest is shown only)
    report-only      shown, never PASS or FAIL
    ensemble         a statistic of the training (training.judged): inside its band, read
                     from the bands file the golden file names (`bands:`). The bands are
                     prediction bounds for a fresh correct run, made for the golden file's
                     `error_budget` (golden check v3, config/golden/README.md)
    percentile       a printed trained value, one draw of a distribution: shown (REPORT)
                     with its percentile among the bands file's fitting seeds, and the
                     explainer's own value placed there too

A golden key with no regenerated value is a FAIL, unless the chapter says why it could not
be produced (`<prefix>.unavailable` = reason: SKIPPED) or the run's inputs differ from the
explainer's (`inputs:` in the golden file: SKIPPED, there is nothing to compare against).
Produced keys with no golden entry are listed as extras.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tcrformer.core.golden_file import (
    ENSEMBLE,
    PERCENTILE,
    GoldenEntry,
    GoldenFileError,
    Tolerance,
    equal,
    same_shape,
)
from tcrformer.core.text import flatten, is_number, short

PASS, FAIL, SKIPPED, REPORT = "PASS", "FAIL", "SKIPPED", "REPORT"


@dataclass
class Row:
    key: str
    chapter: str
    explainer_value: Any
    value: Any
    tolerance: str
    status: str
    reason: str = ""
    placement: str = ""  # ensemble keys: where the explainer's value falls among our seeds


def compare(value: Any, explainer: Any, tolerance: Tolerance) -> tuple[str, str]:
    """(status, reason) for one regenerated value."""
    kind, bound = tolerance.kind, tolerance.bound
    if kind == "report-only":
        return REPORT, "shown, not checked"
    if kind == "exact":
        return (PASS, "") if equal(value, explainer) else (FAIL, "not equal")
    if kind == PERCENTILE:
        return REPORT, tolerance.reference.place(value, explainer)
    if kind == "exact-first-1":
        ok = isinstance(value, list) and value and isinstance(explainer, list) and explainer
        if ok and equal(value[0], explainer[0]):
            return PASS, ""
        return FAIL, "first element differs"
    values = flatten(value)
    if not all(is_number(v) and math.isfinite(v) for v in values):
        return FAIL, "not a finite number"
    if kind == ENSEMBLE:
        band = tolerance.band
        if all(band.holds(v) for v in values):
            return PASS, f"inside the band of {band.n} seeds"
        worst = next(v for v in values if not band.holds(v))
        return FAIL, f"{worst:.6g} outside the band of {band.n} seeds"
    if kind == "abs":
        if not same_shape(value, explainer):
            return FAIL, "shape differs from the explainer's"
        worst = max(abs(v - s) for v, s in zip(values, flatten(explainer), strict=True))
        return (PASS, f"max abs diff {worst:.3g}") if worst <= bound else (
            FAIL, f"max abs diff {worst:.3g} > {bound:g}"
        )  # fmt: skip
    if kind == "min":
        worst = min(values)
        return (PASS, "") if worst >= bound else (FAIL, f"{worst:.4g} < {bound:g}")
    if kind == "max":
        worst = max(values)
        return (PASS, "") if worst <= bound else (FAIL, f"{worst:.4g} > {bound:g}")
    raise GoldenFileError(f"unknown tolerance kind {kind!r}")


def _prefixes(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def inputs_differ(chapter: str, inputs: Mapping, config: Mapping) -> str:
    """A reason if the run's config differs from the explainer's published inputs, else ''."""
    from tcrformer.core.config import get

    for dotted, published in (inputs.get(chapter) or {}).items():
        try:
            ours = get(config, dotted)
        except (KeyError, TypeError):
            continue
        if ours != published:
            theirs = f"({dotted} = {ours!r}, explainer: {published!r})"
            return f"inputs differ from the explainer's {theirs}"
    return ""


def published(
    entries: list[GoldenEntry], inputs: Mapping[str, Mapping], config: Mapping, chapter: str
) -> dict[str, Any]:
    """{key: the explainer's value} of a chapter; {} when the run's inputs are not its."""
    if inputs_differ(chapter, inputs, config):
        return {}
    return {e.key: e.value for e in entries if e.chapter == chapter}


def check(
    values: Mapping[str, Any],
    entries: list[GoldenEntry],
    inputs: Mapping[str, Mapping] | None = None,
    config: Mapping | None = None,
    chapters: set[str] | None = None,
    report_only: Mapping[str, Any] | None = None,
) -> tuple[list[Row], list[str]]:
    """Compare `values` with the golden entries (of `chapters`, if given).

    `report_only` holds values that are shown but kept out of values.json because they
    vary from run to run (wall-clock times); they only fill report-only entries.
    Returns (rows, extra keys produced without a golden entry).
    """
    inputs, config, report_only = inputs or {}, config or {}, report_only or {}
    selected = [e for e in entries if chapters is None or e.chapter in chapters]
    rows = []
    for entry in selected:
        differ = inputs_differ(entry.chapter, inputs, config)
        if entry.tolerance.kind == "report-only" and entry.key in report_only:
            values = {**values, entry.key: report_only[entry.key]}
        if entry.key in values:
            status, reason = compare(values[entry.key], entry.value, entry.tolerance)
            if differ and (status != REPORT or entry.tolerance.kind == PERCENTILE):
                status, reason = SKIPPED, differ
        else:
            unavailable = next(
                (values[f"{p}.unavailable"] for p in [entry.key, *_prefixes(entry.key)]
                 if f"{p}.unavailable" in values), None,
            )  # fmt: skip
            if entry.tolerance.kind == "report-only":
                status, reason = REPORT, "report-only: varies from run to run, see timings.md"
            elif unavailable is not None:
                status, reason = SKIPPED, str(unavailable)
            elif differ:
                status, reason = SKIPPED, differ
            else:
                status, reason = FAIL, "no regenerated value"
        rows.append(
            Row(
                entry.key,
                entry.chapter,
                entry.value,
                values.get(entry.key),
                str(entry.tolerance),
                status,
                reason,
                entry.placement,
            )  # fmt: skip
        )
    known = {e.key for e in entries}
    extras = sorted(k for k in values if k not in known)
    return rows, extras


def method_line(method: Mapping) -> str:
    """One paragraph: the false-alarm budget of the trained values and how it is kept."""
    return (
        f"Trained values (`tolerance: ensemble`, golden check v{method.get('version', '?')}): "
        f"a correct run of the explainer's recipe FAILs one of them with probability at most "
        f"{method['budget']:.3g} (family-wise, the golden file's error_budget; "
        f"{method.get('per_test', 0):.3g} for each of {method.get('tests', '?')} one-sided "
        f"tests). Bands: {method.get('bounds', '?')}."
    )


def summary(rows: list[Row]) -> dict[str, int]:
    counts = {PASS: 0, FAIL: 0, SKIPPED: 0, REPORT: 0}
    for row in rows:
        counts[row.status] += 1
    return counts


def report_json(
    rows: list[Row],
    extras: list[str],
    golden_file: str,
    numerics: Mapping | None = None,
    method: Mapping | None = None,
) -> dict:
    return {
        "golden_file": golden_file,
        "numerics": dict(numerics or {}),
        "trained_values": dict(method or {}),
        "summary": summary(rows),
        "rows": [asdict(r) for r in rows],
        "extra_keys": extras,
    }


def report_markdown(
    rows: list[Row],
    extras: list[str],
    title: str,
    golden_file: str,
    numerics: Mapping[str, Mapping] | None = None,
    method: Mapping | None = None,
) -> str:
    """The report; `numerics` maps a process to its tcrformer.core.numerics.describe() record,
    `method` is read_method(golden_file): the trained values' budget and how their bands
    were made."""
    from tcrformer.core.numerics import one_line

    counts = summary(rows)
    lines = [
        f"# Golden check: {title}",
        "",
        f"Regenerated values against `{golden_file}`: "
        + ", ".join(f"**{n} {status}**" for status, n in counts.items()),
        "",
        *(f"Numerics of {process}: {one_line(n)}.  " for process, n in (numerics or {}).items()),
        *([method_line(method), ""] if method and method.get("budget") else [""]),
        "| key | explainer value | regenerated | tolerance | status | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.key}` | {short(r.explainer_value)} | {short(r.value)} | {r.tolerance} "
            f"| {r.status} | {r.reason} |"
        )
    placed = [r for r in rows if r.placement]
    if placed:
        lines += ["", "## The explainer's own values in our seed ensemble", ""]
        lines += [
            "A trained value is one draw from a distribution over seeds. The explainer's printed",
            "value is placed among the fitting seeds of the bands file (its provenance says",
            "which); at an extreme percentile, that is a finding about the explainer's run, not a",
            "FAIL of ours.",
            "",
        ]
        for r in placed:
            finding = (
                " (**a finding about the explainer's run**)"
                if r.placement.startswith(("at percentile 0 ", "at percentile 100 "))
                else ""
            )
            value = short(r.explainer_value)
            lines.append(f"- `{r.key}`: published {value} is {r.placement}{finding}")
    skipped = [r for r in rows if r.status == SKIPPED]
    if skipped:
        lines += ["", "## Skipped, and why", ""]
        lines += [f"- `{r.key}`: {r.reason}" for r in skipped]
    if extras:
        lines += ["", f"## Produced without a published value ({len(extras)})", ""]
        lines += [", ".join(f"`{k}`" for k in extras)]
    return "\n".join(lines) + "\n"
