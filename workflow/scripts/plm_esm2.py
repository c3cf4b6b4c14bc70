"""Rule plm_esm2: ESM-2's guesses at the configured CDR3 positions, or why it is unavailable."""

from tcrformer.io import write_json
from tcrformer.plm import chapter, settings
from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    write_json(smk.output[0], chapter.esm2_result(settings.from_config(smk.params.cfg)))


run(main, snakemake)
