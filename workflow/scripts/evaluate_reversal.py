"""Rule evaluate_reversal: held-out exact reversals, the CDR3, its cross-attention map."""

import logging

from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.io import write_json, write_npy, write_text
    from tcrformer.reversal.evaluate import evaluate_recipe
    from tcrformer.reversal.model import load_model
    from tcrformer.reversal.recipe import recipe_from_config
    from tcrformer.reversal.values import chapter_values, read_losses

    recipe = recipe_from_config(smk.config["reversal"], smk.params.recipe)
    model, _ = load_model(smk.input.model, recipe.impl)
    losses = read_losses(smk.input.losses, recipe.steps)
    evaluation = evaluate_recipe(model, recipe)
    write_npy(smk.output.attention, evaluation.cross_attention)
    write_text(smk.output.cdr3, f"{evaluation.cdr3_input}\n{evaluation.cdr3_output}\n")
    write_json(smk.output.values, chapter_values(recipe, losses, evaluation, smk.params.prefix))
    logging.getLogger("tcrformer").info(
        "%s: %d/%d held-out strings reversed exactly; %s -> %s; anti-diagonal %.3f",
        smk.params.prefix,
        evaluation.heldout_exact,
        evaluation.heldout_n,
        evaluation.cdr3_input,
        evaluation.cdr3_output,
        evaluation.antidiagonal_mean,
    )


run(main, snakemake)
