"""What the notes chapter's figures draw (Figs. 9, 12 and S2), written by notes_values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tcrformer.core.io import read_csv, read_json, read_npy

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import numpy as np
    import pandas as pd

FILES = {
    "figure_data": "figure_data.json",
    "pe_table": "pe_table.npy",
    "breakdown_csv": "param_breakdown.csv",
}


@dataclass(frozen=True)
class NotesFigures:
    pe_table: np.ndarray  # (positions, d_model)
    breakdown: pd.DataFrame  # key, part, formula, count, share
    teacher_forcing: dict[str, Any]  # decoder input, target and masks of Fig. 12


def read(paths: Mapping[str, str]) -> NotesFigures:
    return NotesFigures(
        pe_table=read_npy(paths["pe_table"]),
        breakdown=read_csv(paths["breakdown_csv"]),
        teacher_forcing=read_json(paths["figure_data"]),
    )
