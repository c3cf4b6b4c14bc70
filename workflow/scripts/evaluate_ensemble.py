"""Rule evaluate_ensemble: tcrformer.chapters.ensemble.compute.evaluate_ensemble."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.ensemble.compute import evaluate_ensemble
    from tcrformer.training.recipe import Recipe

    recipe = Recipe.from_params(smk.params.recipe)
    write_named(smk.output, evaluate_ensemble(recipe, smk.input.models, smk.input.losses))


run(main, snakemake)
