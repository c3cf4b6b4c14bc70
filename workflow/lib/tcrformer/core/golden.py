"""The golden check: regenerated values against the values the seeds print.

The golden file (config/golden/seed_values.yaml) lists, for every published number, its
key, the seed's value, a tolerance and the chapter that produces it. Tolerance kinds:

    exact            equal (lists element by element; 1 == 1.0)
    {abs: x}         |ours - seed| <= x, element by element
    {min: x}         ours >= x        (a band that encodes a claim, e.g. "above 0.8")
    {max: x}         ours <= x
    exact-first-1    lists whose first element is equal (the rest is shown only)
    report-only      shown, never PASS or FAIL
    ensemble         a trained (stochastic) value: inside the band a measured seed ensemble
                     gives it, read from the bands file the golden file names (`bands:`),
                     which also places the seed's value in it. The bands are prediction
                     intervals for a fresh draw, made for the golden file's `error_budget`
                     (chapters/ensemble/bands.py). A right-or-wrong key (the decoded CDR3)
                     fails only where its measured rate allows; a key with `given` is judged
                     only when that key passes.

A golden key with no regenerated value is a FAIL, unless the chapter says why it could not
be produced (`<prefix>.unavailable` = reason: SKIPPED) or the run's inputs differ from the
seed's (`inputs:` in the golden file: SKIPPED, there is nothing to compare against).
Produced keys with no golden entry are listed as extras.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core.io import ResultFileError
from tcrformer.core.text import flatten, is_number, short

PASS, FAIL, SKIPPED, REPORT = "PASS", "FAIL", "SKIPPED", "REPORT"
SIMPLE_KINDS = ("exact", "exact-first-1", "report-only")
BOUND_KINDS = ("abs", "min", "max")
ENSEMBLE = "ensemble"


class GoldenFileError(ResultFileError):
    """The golden file itself is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Band:
    """One key's band from a seed ensemble, and where the seed's own value falls in it.

    A numeric key: [low, high]. A right-or-wrong key (`outcome`): `wrong` of `n` seeds were
    wrong, and a wrong value FAILs only when `judged`. `given`: another key that must PASS
    before this one is judged (the anti-diagonal is measured on the CDR3's decoding).
    """

    low: float | None
    high: float | None
    n: int
    placement: str = ""  # "at percentile 40 of 32 seeds", "below all 32 seeds"
    false_alarm: float | None = None  # how often a correct draw falls outside
    given: str | None = None
    outcome: bool = False
    wrong: int = 0
    judged: bool = True


@dataclass(frozen=True)
class Tolerance:
    kind: str
    bound: float | None = None
    band: Band | None = None  # ensemble

    def __str__(self) -> str:
        band = self.band
        if band is None:
            return self.kind if self.bound is None else f"{self.kind} {self.bound:g}"
        if band.outcome:
            return f"ensemble: right ({band.wrong} of {band.n} seeds wrong)"
        if not band.judged:
            return f"ensemble (n={band.n}: no band)"
        rate = f", {band.false_alarm:.2g} false alarms" if band.false_alarm else ""
        return f"ensemble [{band.low:.6g}, {band.high:.6g}] (n={band.n}{rate})"


@dataclass(frozen=True)
class GoldenEntry:
    key: str
    value: Any
    tolerance: Tolerance
    chapter: str
    source: str = ""
    note: str = ""
    placement: str = ""  # ensemble keys: where the seed's value falls in our distribution


@dataclass
class Row:
    key: str
    chapter: str
    seed_value: Any
    value: Any
    tolerance: str
    status: str
    reason: str = ""
    placement: str = ""  # ensemble keys: where the seed's value falls among our seeds


def parse_tolerance(raw: Any, where: str, band: Band | None = None) -> Tolerance:
    if raw == ENSEMBLE:
        if band is None:
            raise GoldenFileError(f"{where}: tolerance ensemble, but the bands file has no band")
        return Tolerance(ENSEMBLE, band=band)
    if isinstance(raw, str) and raw in SIMPLE_KINDS:
        return Tolerance(raw)
    if isinstance(raw, Mapping) and len(raw) == 1:
        ((kind, bound),) = raw.items()
        if kind in BOUND_KINDS and isinstance(bound, int | float) and not isinstance(bound, bool):
            return Tolerance(kind, float(bound))
    kinds = ", ".join([*SIMPLE_KINDS, ENSEMBLE, *(f"{{{k}: x}}" for k in BOUND_KINDS)])
    raise GoldenFileError(f"{where}: unknown tolerance {raw!r} (known kinds: {kinds})")


def load_golden(path: str | Path) -> tuple[list[GoldenEntry], dict[str, dict[str, Any]]]:
    """Read the golden file. Returns (entries, published inputs per chapter)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldenFileError(f"{path}: golden file not found") from None
    except yaml.YAMLError as err:
        raise GoldenFileError(f"{path}: not valid YAML ({err})") from None
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
        where = f"{path}: {raw['key']}"
        band = bands.get(raw["key"])
        entries.append(
            GoldenEntry(
                key=raw["key"],
                value=raw["value"],
                chapter=raw["chapter"],
                tolerance=parse_tolerance(raw["tolerance"], where, band),
                source=raw.get("source", ""),
                note=raw.get("note", ""),
                placement=band.placement if band and raw["tolerance"] == ENSEMBLE else "",
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


def bands_v2_file(golden_path: str | Path) -> Path | None:
    """Where the golden file's `bands_v2:` puts golden check v2's bands (beside it), or None
    when it names none. The file itself may not exist yet."""
    golden_path = Path(golden_path)
    data = _read_yaml(golden_path, golden_path)
    name = data.get("bands_v2") if isinstance(data, Mapping) else None
    return golden_path.parent / str(name) if name else None


def _read_yaml(path: Path, named_by: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldenFileError(f"{named_by}: {path} not found") from None
    except yaml.YAMLError as err:
        raise GoldenFileError(f"{path}: not valid YAML ({err})") from None


def load_bands(golden_path: Path, name: Any, budget: float | None = None) -> dict[str, Band]:
    """The bands file named by the golden file's `bands:` (a path beside it), or {}.

    Its bands must have been made for the golden file's budget."""
    if name is None:
        return {}
    path = golden_path.parent / str(name)
    data = _read_yaml(path, golden_path)
    if not isinstance(data, Mapping) or not isinstance(data.get("bands"), Mapping):
        raise GoldenFileError(f"{path}: expected a mapping with a 'bands:' mapping")
    made_for = (data.get("method") or {}).get("budget")
    if budget is not None and made_for != budget:
        raise GoldenFileError(
            f"{path}: bands made for error_budget {made_for}, the golden file's is {budget}: "
            "regenerate them (config/golden/README.md)"
        )
    return {key: parse_band(path, key, raw) for key, raw in data["bands"].items()}


def parse_band(path: Path | str, key: str, raw: Any) -> Band:
    """One entry of a bands file (or of chapters.ensemble.bands.fit_bands) as a Band."""
    placement = str((raw or {}).get("published_placement", ""))
    try:
        if raw.get("outcome"):
            return Band(
                None, None, int(raw["n"]), placement, raw.get("false_alarm"),
                outcome=True, wrong=int(raw["wrong"]), judged=bool(raw["judged"]),
            )  # fmt: skip
        if raw.get("judged") is False:  # too few seeds for a band: shown, not judged
            return Band(None, None, int(raw["n"]), placement, judged=False)
        low, high, n = float(raw["low"]), float(raw["high"]), int(raw["n"])
    except (AttributeError, KeyError, TypeError, ValueError):
        raise GoldenFileError(f"{path}: {key}: a band needs numbers low, high and n") from None
    if not low <= high:
        raise GoldenFileError(f"{path}: {key}: low {low:g} is above high {high:g}")
    return Band(low, high, n, placement, raw.get("false_alarm"), given=raw.get("given"))


def with_bands(entries: list[GoldenEntry], bands: Mapping[str, Band]) -> list[GoldenEntry]:
    """The entries with their ensemble tolerances taken from `bands` (a band fitted in memory,
    as the leave-one-out check does)."""
    return [
        replace(e, tolerance=Tolerance(ENSEMBLE, band=bands[e.key]))
        if e.tolerance.kind == ENSEMBLE
        else e
        for e in entries
    ]


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


def compare(value: Any, seed: Any, tolerance: Tolerance) -> tuple[str, str]:
    """(status, reason) for one regenerated value."""
    kind, bound = tolerance.kind, tolerance.bound
    if kind == "report-only":
        return REPORT, "shown, not checked"
    if kind == "exact":
        return (PASS, "") if _equal(value, seed) else (FAIL, "not equal")
    if kind == ENSEMBLE and tolerance.band.outcome:
        return _outcome(value, seed, tolerance.band)
    if kind == ENSEMBLE and not tolerance.band.judged:
        return REPORT, f"not judged: {tolerance.band.n} seeds are too few for a band"
    if kind == "exact-first-1":
        ok = isinstance(value, list) and value and isinstance(seed, list) and seed
        if ok and _equal(value[0], seed[0]):
            return PASS, ""
        return FAIL, "first element differs"
    values = flatten(value)
    if not all(is_number(v) and math.isfinite(v) for v in values):
        return FAIL, "not a finite number"
    if kind == ENSEMBLE:
        band = tolerance.band
        worst = min(values) if min(values) < band.low else max(values)
        if band.low <= min(values) and max(values) <= band.high:
            return PASS, f"inside the band of {band.n} seeds"
        return (
            FAIL,
            f"{worst:.6g} outside the band of {band.n} seeds [{band.low:.6g}, {band.high:.6g}]",
        )
    if kind == "abs":
        if not _same_shape(value, seed):
            return FAIL, "shape differs from the seed's"
        worst = max(abs(v - s) for v, s in zip(values, flatten(seed), strict=True))
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


def _outcome(value: Any, seed: Any, band: Band) -> tuple[str, str]:
    """A right-or-wrong key: right PASSes; wrong FAILs only if the ensemble allows it."""
    seen = f"wrong in {band.wrong} of {band.n} seeds of the ensemble"
    if _equal(value, seed):
        return PASS, f"right ({seen})"
    if band.judged:
        return FAIL, f"wrong ({seen})"
    return REPORT, (
        f"wrong, not judged: {seen}, a rate the budget cannot tell from a fault's, "
        "so a wrong value is no FAIL"
    )


def _prefixes(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def inputs_differ(chapter: str, inputs: Mapping, config: Mapping) -> str:
    """A reason if the run's config differs from the seed's published inputs, else ''."""
    from tcrformer.core.config import get

    for dotted, published in (inputs.get(chapter) or {}).items():
        try:
            ours = get(config, dotted)
        except (KeyError, TypeError):
            continue
        if ours != published:
            return f"inputs differ from the seed's ({dotted} = {ours!r}, seed: {published!r})"
    return ""


def published(
    entries: list[GoldenEntry], inputs: Mapping[str, Mapping], config: Mapping, chapter: str
) -> dict[str, Any]:
    """{key: the seed's value} of a chapter, or {} when the run's inputs differ from the seed's."""
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
    by_key = {e.key: e for e in entries}
    rows = []
    for entry in selected:
        differ = inputs_differ(entry.chapter, inputs, config)
        if entry.tolerance.kind == "report-only" and entry.key in report_only:
            values = {**values, entry.key: report_only[entry.key]}
        given = _given_fails(entry, by_key, values)
        if entry.key in values and given:
            status, reason = (SKIPPED, differ) if differ else (REPORT, given)
        elif entry.key in values:
            status, reason = compare(values[entry.key], entry.value, entry.tolerance)
            if differ and status != REPORT:
                status, reason = SKIPPED, differ
        else:
            unavailable = next(
                (values[f"{p}.unavailable"] for p in _prefixes(entry.key)
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


def _given_fails(entry: GoldenEntry, by_key: Mapping[str, GoldenEntry], values: Mapping) -> str:
    """Why an entry whose band holds only when another key passes is not judged, or ''."""
    band = entry.tolerance.band
    if band is None or not band.given:
        return ""
    other = by_key.get(band.given)
    if other is not None and band.given in values:
        if compare(values[band.given], other.value, other.tolerance)[0] == PASS:
            return ""
    return f"not judged: its band holds when {band.given} is right, and it is not"


def method_line(method: Mapping) -> str:
    """One paragraph: the false-alarm budget of the trained values and how it is kept."""
    return (
        f"Trained values (`tolerance: ensemble`): a correct run of the seed's recipe FAILs one "
        f"of them with probability at most {method['budget']:.3g} (family-wise, the golden "
        f"file's error_budget), {method.get('per_key', 0):.3g} per key over "
        f"{method.get('keys', '?')} keys. Bands: {method.get('interval', '?')}."
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
        "| key | seed value | regenerated | tolerance | status | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.key}` | {short(r.seed_value)} | {short(r.value)} | {r.tolerance} "
            f"| {r.status} | {r.reason} |"
        )
    placed = [r for r in rows if r.placement]
    if placed:
        lines += ["", "## The seed's own values in our seed ensemble", ""]
        lines += [
            "A trained value is one draw from a distribution over seeds. Its band is the range",
            "of a measured ensemble (the bands file's provenance says which); the seed's own",
            "printed value is placed in that distribution. Outside our range, that is a",
            "finding about the seed's run, not a FAIL of ours.",
            "",
        ]
        for r in placed:
            finding = (
                " (**a finding about the seed**)"
                if r.placement.startswith(("below", "above"))
                else ""
            )
            lines.append(f"- `{r.key}`: published {short(r.seed_value)} is {r.placement}{finding}")
    skipped = [r for r in rows if r.status == SKIPPED]
    if skipped:
        lines += ["", "## Skipped, and why", ""]
        lines += [f"- `{r.key}`: {r.reason}" for r in skipped]
    if extras:
        lines += ["", f"## Produced without a published value ({len(extras)})", ""]
        lines += [", ".join(f"`{k}`" for k in extras)]
    return "\n".join(lines) + "\n"
