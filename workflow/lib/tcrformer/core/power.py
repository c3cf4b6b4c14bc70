"""The golden check's power plan: the code faults a run is trained with, and the seeds.

The plan is data (config/golden/v4/faults.yaml), read by the `power` rules, the harness that
injects the faults (bench/golden_power.py) and the tool that judges the runs
(tools/golden/power.py): none of them loads another's code to learn it.

A fault is either a line saying what it breaks (v3's plan, still read: it is the record of
v3's power runs) or a mapping {breaks: what it breaks, predicted: {key: the key expected to
move most, shift_sd: by how many fitting SDs, signed}} (v4's, predicted before any run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core.golden_file import GoldenFileError
from tcrformer.core.text import is_number

FAULTS_FILE = "golden/v4/faults.yaml"  # under the workflow's config/ folder


@dataclass(frozen=True)
class Prediction:
    key: str  # the judged key expected to move most
    shift_sd: float  # by how many fitting SDs (signed; + is up)


@dataclass(frozen=True)
class Fault:
    breaks: str  # what it breaks
    predicted: Prediction | None = None  # None where the plan predicted nothing (v3)


@dataclass(frozen=True)
class PowerPlan:
    faults: dict[str, Fault]  # fault name -> what it breaks and its predicted shift
    seeds: tuple[int, ...]  # each fault trains the paper recipe once per seed


def read_power_plan(path: str | Path) -> PowerPlan:
    """The plan in `path`; a missing or malformed file is a GoldenFileError naming it (and
    the fault, where one is malformed)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldenFileError(f"{path}: power faults file not found") from None
    except yaml.YAMLError:
        raise GoldenFileError(f"{path}: not valid YAML") from None
    data = data if isinstance(data, Mapping) else {}
    faults, seeds = data.get("faults"), data.get("seeds")
    if not isinstance(faults, Mapping) or not faults or not isinstance(seeds, list) or not seeds:
        raise GoldenFileError(f"{path}: expected 'faults:' (name: what it breaks) and 'seeds:'")
    return PowerPlan(
        {str(name): _fault(path, str(name), entry) for name, entry in faults.items()},
        tuple(int(s) for s in seeds),
    )


def _fault(path: Path, name: str, entry: Any) -> Fault:
    """One fault of the plan: a line (v3), or {breaks: ..., predicted: {key, shift_sd}}."""
    if isinstance(entry, str):
        return Fault(entry)
    entry = entry if isinstance(entry, Mapping) else {}
    breaks, predicted = entry.get("breaks"), entry.get("predicted")
    if isinstance(breaks, str) and predicted is None:
        return Fault(breaks)
    predicted = predicted if isinstance(predicted, Mapping) else {}
    key, shift_sd = predicted.get("key"), predicted.get("shift_sd")
    if isinstance(breaks, str) and isinstance(key, str) and is_number(shift_sd):
        return Fault(breaks, Prediction(key, float(shift_sd)))
    raise GoldenFileError(
        f"{path}: fault {name!r}: expected what it breaks, or "
        "{breaks: what it breaks, predicted: {key: a judged key, shift_sd: a number}}"
    )
