"""Rule train_reversal: tcrformer.chapters.reversal.compute.train_reversal.

Its checkpoints go beside its outputs (<folder>/checkpoints/, declared by no rule), found
from the output path: a run-specific path stays out of the params the cache keys on.
"""

import logging
from pathlib import Path

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics
from tcrformer.training.recipe import Recipe


def main(smk):
    recipe = Recipe.from_params(smk.params.recipe)
    workers = smk.params.workers
    checkpoints = Path(smk.output.model).parent / "checkpoints"
    numerics = torch_numerics(smk)
    from tcrformer.chapters.reversal.compute import train_reversal

    log = logging.getLogger("tcrformer")
    log.info(
        "%s: seed %d, %d steps, impl %s, %d worker(s), checkpoints in %s",
        recipe.name, recipe.seed, recipe.steps, recipe.impl, workers, checkpoints,
    )  # fmt: skip
    results = train_reversal(recipe, checkpoints, numerics, workers)
    write_named(smk.output, results)
    log.info("%s: trained in %.1f s", recipe.name, results["timing"]["train_seconds"])


run(main, snakemake)
