"""Rule plm_scan: tcrformer.chapters.plm.compute.plm_scan."""

from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.plm.compute import plm_scan
    from tcrformer.chapters.plm.settings import Settings

    settings = Settings.from_config(smk.params.config)
    write_named(smk.output, plm_scan(settings, read_json(smk.input.esm2)))


run(main, snakemake)
