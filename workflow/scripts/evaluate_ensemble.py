"""Rule evaluate_ensemble: one seed of an ensemble, evaluated exactly as the single run is."""

import logging

from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    import pandas as pd

    from tcrformer.io import ResultFileError, write_json
    from tcrformer.reversal.ensemble import EnsembleSettings, seed_values
    from tcrformer.reversal.evaluate import evaluate_recipe
    from tcrformer.reversal.model import load_seed_model

    seed = int(smk.wildcards.seed)
    recipe = EnsembleSettings.from_config(smk.config).recipe_for(smk.config["reversal"], seed)
    model = load_seed_model(smk.input.models, seed, recipe.impl)
    losses = pd.read_csv(smk.input.losses)
    losses = losses[losses["seed"] == seed][["step", "loss"]].reset_index(drop=True)
    if len(losses) != recipe.steps:
        raise ResultFileError(f"{smk.input.losses}: expected {recipe.steps} steps of seed {seed}")
    evaluation = evaluate_recipe(model, recipe)
    values = seed_values(recipe, losses, evaluation)
    write_json(smk.output.values, values)
    logging.getLogger("tcrformer").info(
        "ensemble seed %d: %d/%d held out; %s -> %s",
        seed, evaluation.heldout_exact, evaluation.heldout_n,
        evaluation.cdr3_input, evaluation.cdr3_output,
    )  # fmt: skip


run(main, snakemake)
