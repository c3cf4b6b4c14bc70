"""The golden file: the values the explainer prints, each with its tolerance, and the bands
file of the trained values that it names (golden check v3, config/golden/README.md).

Reading it checks it: a malformed entry is a GoldenFileError naming the file and the key.
The check itself (regenerated values against these) is tcrformer.core.golden.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core.io import ResultFileError
from tcrformer.core.text import flatten, is_number

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
            got = "right" if equal(x, published) else "wrong"
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


def same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_shape(x, y) for x, y in zip(a, b, strict=True))
    return not isinstance(a, list | tuple) and not isinstance(b, list | tuple)


def equal(a: Any, b: Any) -> bool:
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        if not same_shape(a, b):
            return False
        return all(equal(x, y) for x, y in zip(flatten(a), flatten(b), strict=True))
    return type(a) is type(b) and a == b
