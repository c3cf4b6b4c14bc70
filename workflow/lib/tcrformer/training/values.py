"""A recipe's values: training losses at the report steps, and the evaluation; the reversal
chapter's values.json and each ensemble seed's row.

Keys are `<recipe>.<name>`: `reversal.*` for the chapter's (the paper's) recipe, `speedrun.*`
for the speedrun target. Wall-clock times are not values; they go to training_time.json.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tcrformer.core.io import ResultFileError, read_csv
from tcrformer.training.evaluate import Evaluation
from tcrformer.training.recipe import Recipe
from tcrformer.training.schedule import label_smoothing_floor

LOSS_DIGITS = 6


def losses_frame(losses: np.ndarray, seed: int | None = None) -> pd.DataFrame:
    """One row per training step: step (1-based), loss; with a seed column first if given."""
    steps = np.arange(1, len(losses) + 1)
    frame = pd.DataFrame({"step": steps, "loss": np.round(losses.astype(np.float64), LOSS_DIGITS)})
    if seed is not None:
        frame.insert(0, "seed", seed)
    return frame


def read_losses(path: str, steps: int) -> pd.DataFrame:
    frame = read_csv(path)
    if list(frame.columns) != ["step", "loss"] or len(frame) != steps:
        raise ResultFileError(f"{path}: expected columns step, loss and {steps} rows")
    return frame


def recipe_values(recipe: Recipe, losses: pd.DataFrame, evaluation: Evaluation) -> dict[str, Any]:
    prefix = recipe.name
    loss_at = dict(zip(losses["step"], losses["loss"], strict=True))
    values: dict[str, Any] = {
        f"{prefix}.loss_step{step}": round(float(loss_at[step]), LOSS_DIGITS)
        for step in recipe.report_steps()
    }
    values.update(
        {
            f"{prefix}.label_smoothing_floor": round(
                label_smoothing_floor(recipe.label_smoothing), LOSS_DIGITS
            ),
            f"{prefix}.heldout_exact": evaluation.heldout_exact,
            f"{prefix}.cdr3_output": evaluation.cdr3_output,
            f"{prefix}.cross_attention_antidiagonal_mean": round(evaluation.antidiagonal_mean, 4),
        }
    )
    return values
