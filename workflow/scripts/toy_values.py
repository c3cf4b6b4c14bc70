"""Rule toy_values: tcrformer.chapters.toy.compute.toy_values."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.toy.compute import toy_values
    from tcrformer.chapters.toy.settings import Settings

    write_named(smk.output, toy_values(Settings.from_config(smk.params.config)))


run(main, snakemake)
