"""Rule train_claim_arm: tcrclaims.compute.train_claim_arm."""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    numerics = torch_numerics(smk)
    from tcrclaims.compute import train_claim_arm
    from tcrformer.training.recipe import Recipe

    recipe = Recipe.from_params(smk.params.recipe)
    log = logging.getLogger("tcrformer")
    log.info("claims arm %s, seed %d: %d steps", smk.wildcards.arm, recipe.seed, recipe.steps)
    evaluation = Recipe.from_params(smk.params.evaluation)
    params = smk.params
    results = train_claim_arm(recipe, evaluation, params.checkpoints, numerics, params.extras,
                              params.beam_width, params.excess_strings)  # fmt: skip
    write_named(smk.output, results)


run(main, snakemake)
