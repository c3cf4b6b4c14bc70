"""Rule train_reversal: tcrformer.chapters.reversal.compute.train_reversal.

Its checkpoints go beside its outputs (<folder>/checkpoints/, declared by no rule), found
from the output path: a run-specific path stays out of the params the cache keys on.
Over several ranks, ranks 1..R-1 start before this process imports torch (training.ranks).
"""

import logging
from pathlib import Path

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics, torch_threads
from tcrformer.training.ranks import Workers
from tcrformer.training.recipe import Recipe


def main(smk):
    recipe = Recipe.from_params(smk.params.recipe)
    ranks = smk.params.numerics["ranks"]
    checkpoints = Path(smk.output.model).parent / "checkpoints"
    workers = Workers.start(recipe, ranks, torch_threads(smk), checkpoints) if ranks > 1 else None
    try:
        numerics = torch_numerics(smk)
        from tcrformer.chapters.reversal.compute import train_reversal

        log = logging.getLogger("tcrformer")
        log.info(
            "%s: seed %d, %d steps, impl %s, %d rank(s), checkpoints in %s",
            recipe.name, recipe.seed, recipe.steps, recipe.impl, ranks, checkpoints,
        )  # fmt: skip
        results = train_reversal(recipe, checkpoints, numerics, ranks, workers)
    finally:
        if workers is not None:
            workers.close(timeout=0)  # any rank still running once rank 0 is done or failed
    write_named(smk.output, results)
    log.info("%s: trained in %.1f s", recipe.name, results["timing"]["train_seconds"])


run(main, snakemake)
