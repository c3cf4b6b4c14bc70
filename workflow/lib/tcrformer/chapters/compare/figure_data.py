"""What the comparison reads from one finished run's folder (results/<run>/).

The toy files, the merged values and the manifest are in every complete run; the reversal
files are read when they are there (None when not), so a run without them still compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcrformer.core.io import read_csv, read_json, read_npy

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import numpy as np
    import pandas as pd

FILES = {
    "manifest": "manifest.json",
    "values": "values.json",
    "toy_attention": "toy/attention_weights.npy",
    "toy_figure_data": "toy/figure_data.json",
    "losses": "reversal/losses.csv",
    "cross_attention": "reversal/cross_attention.npy",
    "reversal_figure_data": "reversal/figure_data.json",
}
OPTIONAL = ("losses", "cross_attention", "reversal_figure_data")


@dataclass(frozen=True)
class RunData:
    """One run, as the comparison sees it."""

    manifest: dict[str, Any]  # config, git, numerics, files
    values: dict[str, Any]  # the merged values.json
    sequence: str  # the toy's residues
    toy_attention: np.ndarray  # (heads, n, n)
    losses: pd.DataFrame | None  # step, loss of the reversal training; None: not in the run
    cross_attention: np.ndarray | None  # (heads, rows written, source length), or None
    source: str | None  # the CDR3 the reversal model read
    output: str | None  # what it wrote

    @property
    def commit(self) -> str:
        return str((self.manifest.get("git") or {}).get("commit", "unknown"))

    @property
    def dirty(self) -> Any:
        return (self.manifest.get("git") or {}).get("dirty")


def paths(folder: str | Path) -> dict[str, str]:
    """{name: file} of FILES in one run's folder."""
    return {name: str(Path(folder) / file) for name, file in FILES.items()}


def read(paths: Mapping[str, str]) -> RunData:

    present = {name: Path(paths[name]).is_file() for name in OPTIONAL}
    reversal = present["cross_attention"] and present["reversal_figure_data"]
    labels = read_json(paths["reversal_figure_data"]) if reversal else {}
    return RunData(
        manifest=read_json(paths["manifest"]),
        values=read_json(paths["values"]),
        sequence=read_json(paths["toy_figure_data"])["sequence"],
        toy_attention=read_npy(paths["toy_attention"]),
        losses=read_csv(paths["losses"]) if present["losses"] else None,
        cross_attention=read_npy(paths["cross_attention"]) if reversal else None,
        source=labels.get("source"),
        output=labels.get("output"),
    )
