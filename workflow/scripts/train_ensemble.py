"""Rule train_ensemble: tcrformer.chapters.ensemble.compute.train_ensemble.

Over several ranks (ensemble.ranks), ranks 1..R-1 start before this process imports torch
(training.ranks), as in rule train_reversal.
"""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics, torch_threads
from tcrformer.training.ranks import Workers


def main(smk):
    from tcrformer.training.recipe import Recipe

    recipe = Recipe.from_params(smk.params.recipe)
    ranks = smk.params.ranks
    checkpoints = smk.params.checkpoints
    workers = Workers.start(recipe, ranks, torch_threads(smk), checkpoints) if ranks > 1 else None
    try:
        numerics = torch_numerics(smk)
        from tcrformer.chapters.ensemble.compute import train_ensemble

        log = logging.getLogger("tcrformer")
        log.info(
            "ensemble: %s recipe, seed %d, %d steps, %d rank(s)",
            recipe.name, recipe.seed, recipe.steps, ranks,
        )  # fmt: skip
        results = train_ensemble(recipe, checkpoints, numerics, ranks, workers)
    finally:
        if workers is not None:
            workers.close(timeout=0)
    write_named(smk.output, results)
    log.info("ensemble: seed %d trained in %.1f s", recipe.seed, results["timing"]["train_seconds"])


run(main, snakemake)
