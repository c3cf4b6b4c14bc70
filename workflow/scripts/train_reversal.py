"""Rule train_reversal: tcrformer.chapters.reversal.compute.train_reversal."""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    numerics = torch_numerics(smk)
    from tcrformer.chapters.reversal.compute import train_reversal
    from tcrformer.chapters.reversal.settings import Recipe

    recipe = Recipe(**smk.params.recipe)
    log = logging.getLogger("tcrformer")
    log.info(
        "%s: seed %d, %d steps, impl %s, checkpoints in %s",
        recipe.name, recipe.seed, recipe.steps, recipe.impl, smk.params.checkpoints,
    )  # fmt: skip
    results = train_reversal(recipe, smk.params.checkpoints, numerics)
    write_named(smk.output, results)
    log.info("%s: trained in %.1f s", recipe.name, results["timing"]["train_seconds"])


run(main, snakemake)
