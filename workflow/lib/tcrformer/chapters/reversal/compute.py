"""Chapter reversal's rules, each returning its outputs by name.

train_reversal      train one recipe (resuming from its checkpoint), its weights and losses
evaluate_reversal   held-out exact reversals, the CDR3, its cross-attention, Fig. 13's data
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tcrformer.chapters.reversal import figure_data
from tcrformer.training import judged
from tcrformer.training.evaluate import evaluate_recipe
from tcrformer.training.loop import train
from tcrformer.training.model import load_model, save_model
from tcrformer.training.recipe import Recipe
from tcrformer.training.values import losses_frame, read_losses, recipe_values


def train_reversal(
    recipe: Recipe, checkpoints: str | Path, numerics: dict, workers: int = 1, on_loss=None
) -> dict[str, Any]:
    """Train `recipe` on `workers` processes (the bits do not depend on how many); a run
    killed before the end resumes from its last checkpoint. `on_loss(step, loss)` sees each
    step's loss (the notebook's live curve)."""
    trained = train(recipe, checkpoints, workers=workers, on_loss=on_loss)
    return {
        "model": lambda path: save_model(path, trained.model, trained.recipe.architecture()),
        "losses": losses_frame(trained.losses.numpy()),
        "numerics": training_record(numerics, trained, recipe),
        "timing": {**trained.timing, "recipe": recipe.name, "fingerprint": recipe.fingerprint()},
    }


def training_record(numerics: dict, trained, recipe: Recipe) -> dict[str, Any]:
    """The numerics a training ran under, with the step that trained it: the hand-written
    one (its chunks, its workers) or autograd, and why; and the GPU it ran on, if any."""
    return {**numerics, "step": trained.step, "chunks": recipe.chunks,
            "workers": trained.timing["workers"], "gpu": trained.gpu}  # fmt: skip


def curve_values(recipe: Recipe, losses, values, evaluation) -> dict[str, float]:
    """What the golden check judges of this run (training.judged): <recipe>.curve.<key>."""
    right = evaluation.cdr3_output == evaluation.cdr3_input[::-1]
    antidiagonal = values[f"{recipe.name}.cross_attention_antidiagonal_mean"] if right else None
    curve = losses.sort_values("step")["loss"].to_numpy(float)
    found = judged.run_statistics(curve, evaluation.heldout_exact, recipe.eval_n, antidiagonal)
    values = {k: round(v, 6) for k, v in judged.judged_values(recipe.name, found).items()}
    if not right:
        why = f"the CDR3 came back as {evaluation.cdr3_output}, not reversed: no anti-diagonal"
        values[f"{recipe.name}.{judged.PREFIX}.antidiagonal.unavailable"] = why
    return values


def evaluate_reversal(recipe: Recipe, model_path: str, losses_path: str) -> dict[str, Any]:
    """The trained model on held-out strings and on the CDR3."""
    model, _ = load_model(model_path, recipe.impl)
    losses = read_losses(losses_path, recipe.steps)
    evaluation = evaluate_recipe(model, recipe)
    values = recipe_values(recipe, losses, evaluation)
    values.update(curve_values(recipe, losses, values, evaluation))
    return {
        "values": values,
        "attention": evaluation.cross_attention,
        "cdr3": f"{evaluation.cdr3_input}\n{evaluation.cdr3_output}\n",
        "figure_data": figure_data.training_labels(recipe, values, evaluation),
    }
