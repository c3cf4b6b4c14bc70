"""The golden check's power plan: the code faults a run is trained with, and the seeds.

The plan is data (config/golden/v3/faults.yaml), read by the `power` rules, the harness that
injects the faults (bench/golden_power.py) and the tool that judges the runs
(tools/golden.py): none of them loads another's code to learn it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from tcrformer.core.golden_file import GoldenFileError

FAULTS_FILE = "golden/v3/faults.yaml"  # under the workflow's config/ folder


@dataclass(frozen=True)
class PowerPlan:
    faults: dict[str, str]  # fault name -> what it breaks
    seeds: tuple[int, ...]  # each fault trains the paper recipe once per seed


def read_power_plan(path: str | Path) -> PowerPlan:
    """The plan in `path`; a missing or malformed file is a GoldenFileError naming it."""
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
    return PowerPlan({str(k): str(v) for k, v in faults.items()}, tuple(int(s) for s in seeds))
