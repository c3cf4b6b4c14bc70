"""Chapter ensemble's rules, each returning its outputs by name.

train_ensemble     one seed: exactly the single run of that seed, on ensemble.ranks ranks
evaluate_ensemble  one seed, evaluated exactly as the single run is
ensemble_summary   every stochastic value as a distribution over seeds, the seed
                   document's value placed in it, the loss bands, the golden bands
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from tcrformer.chapters.ensemble import bands, curves, distributions
from tcrformer.core.io import ResultFileError, read_csv
from tcrformer.core.numerics import one_line


def seed_values(recipe, losses: pd.DataFrame, evaluation) -> dict[str, Any]:
    """The chapter's values for one seed, plus whether its CDR3 came back reversed."""
    from tcrformer.training.values import recipe_values

    values = recipe_values(recipe, losses, evaluation)
    values[f"{recipe.name}.cdr3_correct"] = int(
        evaluation.cdr3_output == evaluation.cdr3_input[::-1]
    )
    return values


def train_ensemble(
    recipe, checkpoints: str | Path, numerics: dict, ranks: int = 1, workers=None
) -> dict[str, Any]:
    """One seed (the recipe's), trained as the single run is, over `ranks` data-parallel
    ranks (ranks 1..R-1 in `workers` when the caller started them, training.ranks)."""
    from tcrformer.training.loop import train
    from tcrformer.training.model import save_models
    from tcrformer.training.values import losses_frame

    trained = train(recipe, checkpoints, ranks=ranks, workers=workers)
    models = {recipe.seed: trained.model}
    return {
        "models": lambda path: save_models(path, models, trained.recipe.architecture()),
        "losses": losses_frame(trained.losses.numpy(), recipe.seed),
        "numerics": {**numerics, "ranks": ranks},  # the bits depend on the rank count too
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
    numerics: Mapping[str, Any],
    provenance: Mapping[str, Any],
    cdr3: str,
    eval_n: int,
    budget: float,
) -> dict[str, Any]:
    """`golden` holds the seed document's values of the recipe's chapter ({} when the
    run's inputs differ from the seed's); `provenance` what the bands record about the run;
    `budget` the golden file's family-wise false-alarm rate the bands are made for."""
    seeds = distributions.seeds_frame(per_seed)
    keys = [c for c in seeds.columns if c != "seed"]
    published = distributions.published_values(golden, recipe_name, cdr3, keys)
    table = distributions.summary_table(seeds, published)
    title = f"Ensemble: the {recipe_name} recipe over {len(seeds)} seeds"
    floor = next(iter(per_seed.values()))[f"{recipe_name}.label_smoothing_floor"]
    fit = {"prefix": recipe_name, "floor": floor, "eval_n": eval_n}
    bands = golden_bands(
        seeds,
        table,
        budget,
        fit,
        {
            "n": len(seeds),
            "seeds": [int(s) for s in seeds["seed"]],
            "recipe": recipe_name,
            **provenance,
            "numerics": one_line(numerics),
            "date": datetime.date.today().isoformat(),
        },
    )
    exact = published.get(f"{recipe_name}.heldout_exact")
    wide = curves.curves_table(losses)
    return {
        "seeds": seeds,
        "curves": wide,
        "statistics_v2": curves.statistics_table(wide, per_seed, recipe_name, eval_n),
        "table": table,
        "md": distributions.summary_markdown(table, title),
        "loss_bands": distributions.loss_bands(losses),
        "bands": yaml.safe_dump(bands, sort_keys=False, allow_unicode=True),
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


def golden_bands(
    seeds: pd.DataFrame,
    table: pd.DataFrame,
    budget: float,
    fit: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """The bands file: how the bands were made, each key's band with the seed document's
    value placed in our distribution, and the leave-one-out false-alarm check."""
    fitted = bands.fit_bands(seeds, fit["prefix"], budget, fit["floor"], fit["eval_n"])
    placed = table.set_index("key")
    output_key = f"{fit['prefix']}.{bands.CDR3_OUTPUT}"
    for key, band in fitted.items():
        column = f"{fit['prefix']}.{bands.CDR3_CORRECT}" if key == output_key else key
        published = placed.loc[column, "published"] if column in placed.index else None
        if published is not None and not pd.isna(published):
            band["published_percentile"] = round(
                float(placed.loc[column, "published_percentile"]), 1
            )
            band["published_placement"] = placed.loc[column, "published_placement"]
    return {
        "provenance": dict(provenance),
        "method": bands.method(budget, len(fitted), len(seeds)),
        "fit": dict(fit),
        "bands": fitted,
    }
