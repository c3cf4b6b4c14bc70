"""Rule train_ensemble: tcrformer.chapters.ensemble.compute.train_ensemble (one worker:
the seeds' jobs run side by side)."""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    from tcrformer.training.recipe import Recipe

    recipe = Recipe.from_params(smk.params.recipe)
    numerics = torch_numerics(smk)
    from tcrformer.chapters.ensemble.compute import train_ensemble

    log = logging.getLogger("tcrformer")
    log.info("ensemble: %s recipe, seed %d, %d steps", recipe.name, recipe.seed, recipe.steps)
    results = train_ensemble(recipe, smk.params.checkpoints, numerics)
    write_named(smk.output, results)
    log.info("ensemble: seed %d trained in %.1f s", recipe.seed, results["timing"]["train_seconds"])


run(main, snakemake)
