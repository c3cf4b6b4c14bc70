"""Rule evaluate_claim_arm: tcrformer.chapters.claims.compute.evaluate_claim_arm."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.claims.compute import evaluate_claim_arm
    from tcrformer.training.recipe import Recipe

    recipe = Recipe(**smk.params.recipe)
    results = evaluate_claim_arm(
        recipe, smk.input.model, smk.input.history, smk.params.extras, smk.params.beam_width
    )
    write_named(smk.output, results)


run(main, snakemake)
