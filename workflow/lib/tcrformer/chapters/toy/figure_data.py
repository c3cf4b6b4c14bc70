"""What the toy chapter's figures draw (Figs. 1-4 and S1), written by toy_values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tcrformer.core.io import read_json, read_npy

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import numpy as np

FILES = {
    "figure_data": "figure_data.json",
    "X": "X.npy",
    "attention_weights": "attention_weights.npy",
    "head1_queries": "head1_queries.npy",
    "head1_keys": "head1_keys.npy",
    "scaling_raw_scores": "scaling_raw_scores.npy",
    "scaling_weights_unscaled": "scaling_weights_unscaled.npy",
    "scaling_weights_scaled": "scaling_weights_scaled.npy",
}


@dataclass(frozen=True)
class ToyFigures:
    sequence: str
    columns: list[str]  # names of the columns of X
    focus_position: int  # 1-based: the residue whose head-1 row is drawn
    head_names: list[str]
    head1_dimensions: list[str]  # the feature feeding each of head 1's query columns, or ""
    scaling_d_k: int
    X: np.ndarray  # (n, width)
    attention_weights: np.ndarray  # (h, n, n)
    head1_queries: np.ndarray  # (n, 2)
    head1_keys: np.ndarray  # (n, 2)
    scaling_raw_scores: np.ndarray  # (n_keys, n_keys)
    scaling_weights_unscaled: np.ndarray
    scaling_weights_scaled: np.ndarray


def toy_labels(settings, columns: list[str]) -> dict:
    """The figures' labels and scalars (the arrays are toy_values' other outputs)."""
    query = settings.heads[0].Q
    dimensions = ["", ""]  # a rotation query has no single feature per column
    if not isinstance(query, Mapping):
        for feature, column, _ in query:
            dimensions[column] = feature
    return {
        "sequence": settings.sequence,
        "columns": columns,
        "focus_position": settings.focus_position,
        "head_names": [head.name for head in settings.heads],
        "head1_dimensions": dimensions,
        "scaling_d_k": settings.scaling.d_k,
    }


def read(paths: Mapping[str, str]) -> ToyFigures:
    arrays = {name: read_npy(paths[name]) for name in FILES if name != "figure_data"}
    return ToyFigures(**read_json(paths["figure_data"]), **arrays)
