"""Rule evaluate_reversal: tcrformer.chapters.reversal.compute.evaluate_reversal."""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.reversal.compute import evaluate_reversal
    from tcrformer.training.recipe import Recipe

    recipe = Recipe.from_params(smk.params.recipe)
    results = evaluate_reversal(recipe, smk.input.model, smk.input.losses)
    write_named(smk.output, results)
    values, prefix = results["values"], recipe.name
    logging.getLogger("tcrformer").info(
        "%s: %d/%d held-out strings reversed exactly; %s; anti-diagonal %.3f",
        prefix, values[f"{prefix}.heldout_exact"], recipe.eval_n,
        results["cdr3"].replace("\n", " -> ", 1).strip(),
        values[f"{prefix}.cross_attention_antidiagonal_mean"],
    )  # fmt: skip


run(main, snakemake)
