"""Rule plm_values: the chapter's flat values.json (see tcrformer.plm.values)."""

from tcrformer.io import read_json, write_json
from tcrformer.plm.values import chapter_values
from tcrformer.runner import run


def main(smk):
    inputs = (read_json(smk.input.esm2), read_json(smk.input.sceptr), read_json(smk.input.summary))
    write_json(smk.output[0], chapter_values(*inputs))


run(main, snakemake)
