"""Rule plm_values: tcrformer.chapters.plm.compute.plm_values."""

from tcrformer.chapters.plm.compute import plm_values
from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run


def main(smk):
    inputs = (read_json(smk.input.esm2), read_json(smk.input.sceptr), read_json(smk.input.summary))
    write_named(smk.output, plm_values(*inputs))


run(main, snakemake)
