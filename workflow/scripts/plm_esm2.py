"""Rule plm_esm2: tcrformer.chapters.plm.compute.plm_esm2."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.plm.compute import plm_esm2
    from tcrformer.chapters.plm.settings import Settings

    write_named(smk.output, plm_esm2(Settings.from_config(smk.params.config)))


run(main, snakemake)
