"""Rule train_ensemble: tcrformer.chapters.ensemble.compute.train_ensemble."""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    numerics = torch_numerics(smk)
    from tcrformer.chapters.ensemble.compute import train_ensemble
    from tcrformer.training.recipe import Recipe

    recipes = [Recipe(**params) for params in smk.params.recipes]
    seeds = [recipe.seed for recipe in recipes]
    log = logging.getLogger("tcrformer")
    log.info("ensemble: %s recipe, seeds %s, %d steps", recipes[0].name, seeds, recipes[0].steps)
    results = train_ensemble(recipes, smk.params.checkpoints, numerics)
    write_named(smk.output, results)
    log.info("ensemble: seeds %s trained in %.1f s", seeds, results["timing"]["train_seconds"])


run(main, snakemake)
