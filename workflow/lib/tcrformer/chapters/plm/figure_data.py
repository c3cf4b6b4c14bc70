"""What the plm chapter's figures draw (Fig. 7 and the CDR3 scan): the rules' own outputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcrformer.core.io import read_csv, read_json

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import pandas as pd

FILES = {
    "esm2": "esm2.json",
    "sceptr": "sceptr.json",
    "scan": "scan.csv",
    "scan_summary": "scan_summary.json",
}


@dataclass(frozen=True)
class PlmFigures:
    esm2: dict[str, Any]  # plm_esm2's result: guesses, or why ESM-2 is unavailable
    sceptr: dict[str, Any]
    scan: pd.DataFrame  # one row per model and CDR3 position
    scan_summary: dict[str, Any]

    @property
    def cdr3(self) -> str:
        """The CDR3, letter by letter from the scan's true residues."""
        first = self.scan[self.scan["model"] == self.scan["model"].iloc[0]]
        return "".join(first.sort_values("position")["true_residue"])


def read(paths: Mapping[str, str]) -> PlmFigures:
    return PlmFigures(
        esm2=read_json(paths["esm2"]),
        sceptr=read_json(paths["sceptr"]),
        scan=read_csv(paths["scan"]),
        scan_summary=read_json(paths["scan_summary"]),
    )
