"""The golden check: regenerated values against the values the explainer prints.

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
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core.io import ResultFileError
from tcrformer.core.text import flatten, is_number, short

PASS, FAIL, SKIPPED, REPORT = "PASS", "FAIL", "SKIPPED", "REPORT"
SIMPLE_KINDS = ("exact", "exact-first-1", "report-only")
BOUND_KINDS = ("abs", "min", "max")
ENSEMBLE, PERCENTILE = "ensemble", "percentile"
METHOD_VERSION = 3  # golden check v3; a bands file must say `version: 3`


class GoldenFileError(ResultFileError):
    """The golden file itself is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Band:
    """A trained statistic's band: a correct run lies in [low, high] (a side may be open)."""

    low: float | None
    high: float | None
    n: int  # fitting seeds

    def __str__(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:.6g}"
        high = "inf" if self.high is None else f"{self.high:.6g}"
        return f"ensemble [{low}, {high}] (n={self.n})"

    def holds(self, x: float) -> bool:
        return (self.low is None or x >= self.low) and (self.high is None or x <= self.high)


@dataclass(frozen=True)
class Reference:
    """A printed trained value's distribution over the fitting seeds: its sorted values, or,
    for a right-or-wrong value (the decoded CDR3), how many seeds got it right."""

    n: int
    values: tuple[float, ...] = ()
    right: int | None = None

    def place(self, x: Any, published: Any) -> str:
        if self.right is not None:
            got = "right" if _equal(x, published) else "wrong"
            return f"{got}; right in {self.right} of {self.n} fitting seeds"
        return f"at percentile {self.percentile(x):.0f} of {self.n} fitting seeds"

    def percentile(self, x: float) -> float:
        """Mid-rank percentile: the share of seeds below x, plus half of those equal."""
        below = sum(v < x for v in self.values)
        equal = sum(v == x for v in self.values)
        return 100 * (below + equal / 2) / self.n


@dataclass(frozen=True)
class Tolerance:
    kind: str
    bound: float | None = None
    band: Band | None = None  # ensemble
    reference: Reference | None = None  # percentile

    def __str__(self) -> str:
        if self.band is not None:
            return str(self.band)
        if self.reference is not None:
            return f"percentile (n={self.reference.n})"
        return self.kind if self.bound is None else f"{self.kind} {self.bound:g}"


@dataclass(frozen=True)
class GoldenEntry:
    key: str
    value: Any
    tolerance: Tolerance
    chapter: str
    source: str = ""
    note: str = ""
    placement: str = ""  # ensemble keys: where the explainer's value falls in our distribution


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


def parse_tolerance(
    raw: Any, where: str, bands: Mapping[str, Any] | None = None, key: str = ""
) -> Tolerance:
    if raw in (ENSEMBLE, PERCENTILE):
        found = (bands or {}).get(raw, {}).get(key)
        if found is None:
            raise GoldenFileError(f"{where}: tolerance {raw}, but the bands file has no {key}")
        return Tolerance(raw, **{"band" if raw == ENSEMBLE else "reference": found})
    if isinstance(raw, str) and raw in SIMPLE_KINDS:
        return Tolerance(raw)
    if isinstance(raw, Mapping) and len(raw) == 1:
        ((kind, bound),) = raw.items()
        if kind in BOUND_KINDS and isinstance(bound, int | float) and not isinstance(bound, bool):
            return Tolerance(kind, float(bound))
    kinds = ", ".join([*SIMPLE_KINDS, ENSEMBLE, PERCENTILE, *(f"{{{k}: x}}" for k in BOUND_KINDS)])
    raise GoldenFileError(f"{where}: unknown tolerance {raw!r} (known kinds: {kinds})")


def load_golden(path: str | Path) -> tuple[list[GoldenEntry], dict[str, dict[str, Any]]]:
    """Read the golden file and the bands file it names. Returns (entries, published inputs
    per chapter). Anything missing or malformed is a GoldenFileError naming the file."""
    path = Path(path)
    data = _read_yaml(path, path)
    if not isinstance(data, Mapping) or not isinstance(data.get("values"), list):
        raise GoldenFileError(f"{path}: expected a mapping with a 'values:' list")
    bands = load_bands(path, data.get("bands"), budget_of(path, data))
    entries, seen = [], set()
    for i, raw in enumerate(data["values"]):
        where = f"{path}: values[{i}]"
        if not isinstance(raw, Mapping) or not {"key", "value", "tolerance", "chapter"} <= set(raw):
            raise GoldenFileError(f"{where}: needs key, value, tolerance and chapter")
        if raw["key"] in seen:
            raise GoldenFileError(f"{where}: duplicate key {raw['key']!r}")
        seen.add(raw["key"])
        tolerance = parse_tolerance(raw["tolerance"], f"{path}: {raw['key']}", bands, raw["key"])
        entries.append(
            GoldenEntry(
                key=raw["key"],
                value=raw["value"],
                chapter=raw["chapter"],
                tolerance=tolerance,
                source=raw.get("source", ""),
                note=raw.get("note", ""),
                placement=tolerance.reference.place(raw["value"], raw["value"])
                if tolerance.reference and tolerance.reference.right is None
                else "",
            )  # fmt: skip
        )
    inputs = data.get("inputs") or {}
    if not isinstance(inputs, Mapping):
        raise GoldenFileError(f"{path}: 'inputs:' must map chapters to config values")
    return entries, {chapter: dict(v or {}) for chapter, v in inputs.items()}


def budget_of(path: Path, data: Mapping) -> float | None:
    """The golden file's `error_budget`: the family-wise false-alarm rate of the trained keys."""
    budget = data.get("error_budget")
    if budget is None:
        return None
    if not is_number(budget) or not 0 < budget < 1:
        raise GoldenFileError(f"{path}: error_budget = {budget!r}: a probability in (0, 1)")
    return float(budget)


def read_method(golden_path: str | Path) -> dict[str, Any]:
    """The budget (golden file) and how the bands were made (the bands file's `method:`)."""
    golden_path = Path(golden_path)
    data = _read_yaml(golden_path, golden_path)
    if not isinstance(data, Mapping) or data.get("bands") is None:
        return {}
    bands_file = _read_yaml(golden_path.parent / str(data["bands"]), golden_path)
    return {"budget": budget_of(golden_path, data), **(bands_file.get("method") or {})}


def _read_yaml(path: Path, named_by: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        where = "golden file" if path == named_by else f"bands file named by {named_by}"
        raise GoldenFileError(f"{path}: {where} not found") from None
    except yaml.YAMLError as err:
        mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = problem or "unreadable"
        raise GoldenFileError(f"{path}: not valid YAML ({where}{problem})") from None


def load_bands(golden_path: Path, name: Any, budget: float | None) -> dict[str, dict]:
    """{ENSEMBLE: {key: Band}, PERCENTILE: {key: Reference}} from the bands file the golden
    file's `bands:` names (a path beside it), or {} when it names none. It must be of this
    method's version and made for the golden file's budget."""
    if name is None:
        return {}
    path = golden_path.parent / str(name)
    data = _read_yaml(path, golden_path)
    if not isinstance(data, Mapping) or not isinstance(data.get("bands"), Mapping):
        raise GoldenFileError(f"{path}: expected a mapping with a 'bands:' mapping")
    if data.get("version") != METHOD_VERSION:
        raise GoldenFileError(
            f"{path}: bands of method version {data.get('version')!r}, this code judges "
            f"version {METHOD_VERSION}: fit them again (config/golden/README.md)"
        )
    made_for = (data.get("method") or {}).get("budget")
    if budget is not None and made_for != budget:
        raise GoldenFileError(
            f"{path}: bands made for error_budget {made_for}, the golden file's is {budget}: "
            "fit them again (config/golden/README.md)"
        )
    return {
        ENSEMBLE: {k: parse_band(path, k, raw) for k, raw in data["bands"].items()},
        PERCENTILE: {k: parse_reference(path, k, raw)
                     for k, raw in (data.get("reference") or {}).items()},
    }  # fmt: skip


def parse_band(path: Path | str, key: str, raw: Any) -> Band:
    """One entry of a bands file's `bands:` as a Band."""
    try:
        low, high = raw.get("low"), raw.get("high")
        band = Band(None if low is None else float(low), None if high is None else float(high),
                    int(raw["n"]))  # fmt: skip
    except (AttributeError, KeyError, TypeError, ValueError):
        raise GoldenFileError(f"{path}: {key}: a band needs low and/or high, and n") from None
    if band.low is None and band.high is None:
        raise GoldenFileError(f"{path}: {key}: a band needs low, high or both")
    if band.low is not None and band.high is not None and not band.low <= band.high:
        raise GoldenFileError(f"{path}: {key}: low {band.low:g} is above high {band.high:g}")
    return band


def parse_reference(path: Path | str, key: str, raw: Any) -> Reference:
    """One entry of a bands file's `reference:` as a Reference."""
    try:
        if "right" in raw:
            return Reference(int(raw["n"]), right=int(raw["right"]))
        values = tuple(float(v) for v in raw["values"])
    except (AttributeError, KeyError, TypeError, ValueError):
        raise GoldenFileError(f"{path}: {key}: a reference needs n and values (or right)") from None
    if len(values) != int(raw.get("n", -1)):
        raise GoldenFileError(f"{path}: {key}: n = {raw.get('n')!r}, {len(values)} values")
    return Reference(len(values), values)


def _same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b, strict=True))
    return not isinstance(a, list | tuple) and not isinstance(b, list | tuple)


def _equal(a: Any, b: Any) -> bool:
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        if not _same_shape(a, b):
            return False
        return all(_equal(x, y) for x, y in zip(flatten(a), flatten(b), strict=True))
    return type(a) is type(b) and a == b


def compare(value: Any, explainer: Any, tolerance: Tolerance) -> tuple[str, str]:
    """(status, reason) for one regenerated value."""
    kind, bound = tolerance.kind, tolerance.bound
    if kind == "report-only":
        return REPORT, "shown, not checked"
    if kind == "exact":
        return (PASS, "") if _equal(value, explainer) else (FAIL, "not equal")
    if kind == PERCENTILE:
        return REPORT, tolerance.reference.place(value, explainer)
    if kind == "exact-first-1":
        ok = isinstance(value, list) and value and isinstance(explainer, list) and explainer
        if ok and _equal(value[0], explainer[0]):
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
        if not _same_shape(value, explainer):
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
