"""Rule plm_sceptr: SCEPTR's guesses at the configured CDR3beta positions of the receptor."""

from tcrformer.io import write_json
from tcrformer.plm import chapter, settings
from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    write_json(smk.output[0], chapter.sceptr_result(settings.from_config(smk.params.cfg)))


run(main, snakemake)
