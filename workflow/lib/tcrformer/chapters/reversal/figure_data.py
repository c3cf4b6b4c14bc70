"""What Fig. 13 draws (the loss and the cross-attention), written by evaluate_reversal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tcrformer.core.io import read_csv, read_json, read_npy

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import numpy as np
    import pandas as pd

FILES = {
    "figure_data": "figure_data.json",
    "losses": "losses.csv",
    "attention": "cross_attention.npy",
}


@dataclass(frozen=True)
class ReversalFigures:
    losses: pd.DataFrame  # step, loss
    attention: np.ndarray  # (heads, rows written, source length)
    source: str  # the CDR3 read
    output: str  # what the model wrote
    layer: int  # the decoder layer (1-based) of the cross-attention
    floor: float  # the loss label smoothing allows at best
    report_losses: dict[int, float]  # {step: loss} of the reported steps
    antidiagonal_mean: float


def training_labels(recipe, values: Mapping, evaluation) -> dict:
    """Fig. 13's labels and scalars, from the recipe and its evaluation."""
    prefix = recipe.name
    return {
        "source": evaluation.cdr3_input,
        "output": evaluation.cdr3_output,
        "layer": recipe.cross_attention_layer,
        "floor": values[f"{prefix}.label_smoothing_floor"],
        "report_losses": {str(s): values[f"{prefix}.loss_step{s}"] for s in recipe.report_steps()},
        "antidiagonal_mean": evaluation.antidiagonal_mean,
    }


def read(paths: Mapping[str, str]) -> ReversalFigures:

    data = read_json(paths["figure_data"])
    data["report_losses"] = {int(step): loss for step, loss in data["report_losses"].items()}
    return ReversalFigures(
        losses=read_csv(paths["losses"]), attention=read_npy(paths["attention"]), **data
    )
