"""Chapter ensemble's rules, each returning its outputs by name.

train_ensemble     one seed: exactly the single run of that seed, on one worker
evaluate_ensemble  one seed, evaluated exactly as the single run is
ensemble_summary   every stochastic value as a distribution over seeds, the explainer's
                   value placed in it, the loss bands, every seed's curve and
                   the statistics golden check v3 judges (training.judged)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tcrformer.chapters.ensemble import distributions
from tcrformer.core.io import ResultFileError, read_csv
from tcrformer.training import judged


def seed_values(recipe, losses: pd.DataFrame, evaluation) -> dict[str, Any]:
    """The chapter's values for one seed, plus whether its CDR3 came back reversed."""
    from tcrformer.training.values import recipe_values

    values = recipe_values(recipe, losses, evaluation)
    values[f"{recipe.name}.cdr3_correct"] = int(
        evaluation.cdr3_output == evaluation.cdr3_input[::-1]
    )
    return values


def train_ensemble(recipe, checkpoints: str | Path, numerics: dict) -> dict[str, Any]:
    """One seed (the recipe's), trained as the single run is, on one worker: the same bits
    as the single run of that seed on any number of workers."""
    from tcrformer.chapters.reversal.compute import training_record
    from tcrformer.training.loop import train
    from tcrformer.training.model import save_models
    from tcrformer.training.values import losses_frame

    trained = train(recipe, checkpoints)
    models = {recipe.seed: trained.model}
    return {
        "models": lambda path: save_models(path, models, trained.recipe.architecture()),
        "losses": losses_frame(trained.losses.numpy(), recipe.seed),
        "numerics": training_record(numerics, trained, recipe),
        "timing": {**trained.timing, "seed": recipe.seed},
    }


def evaluate_ensemble(recipe, models: str, losses: str) -> dict[str, Any]:
    """One seed (the recipe's), evaluated exactly as the single run is."""
    from tcrformer.training.evaluate import evaluate_recipe
    from tcrformer.training.model import load_seed_model

    seed = recipe.seed
    model = load_seed_model(models, seed, recipe.impl)
    frame = read_csv(losses)
    frame = frame[frame["seed"] == seed][["step", "loss"]].reset_index(drop=True)
    if len(frame) != recipe.steps:
        raise ResultFileError(f"{losses}: expected {recipe.steps} steps of seed {seed}")
    return {"values": seed_values(recipe, frame, evaluate_recipe(model, recipe))}


def ensemble_summary(
    recipe_name: str,
    per_seed: Mapping[int, Mapping[str, Any]],
    losses: pd.DataFrame,
    golden: Mapping[str, Any],
    cdr3: str,
    eval_n: int,
) -> dict[str, Any]:
    """`golden` holds the explainer's values of the recipe's chapter ({} when the
    run's inputs differ from the explainer's)."""
    seeds = distributions.seeds_frame(per_seed)
    keys = [c for c in seeds.columns if c != "seed"]
    published = distributions.published_values(golden, recipe_name, cdr3, keys)
    table = distributions.summary_table(seeds, published)
    title = f"Ensemble: the {recipe_name} recipe over {len(seeds)} seeds"
    exact = published.get(f"{recipe_name}.heldout_exact")
    wide = judged.curves_table(losses)
    return {
        "seeds": seeds,
        "curves": wide,
        "statistics": judged.statistics_table(wide, per_seed, recipe_name, eval_n),
        "table": table,
        "md": distributions.summary_markdown(table, title),
        "loss_bands": distributions.loss_bands(losses),
        "figure_data": {
            "recipe": recipe_name,
            "eval_n": eval_n,
            "published_losses": {
                str(step): loss
                for step, loss in distributions.published_losses(table, recipe_name).items()
            },
            "published_exact": exact,
        },
    }
