"""Rule claims_cost: tcrclaims.compute.claims_cost (a benchmark, one claim)."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrclaims.compute import claims_cost
    from tcrclaims.settings import Settings

    settings = Settings.from_config(smk.params.config)
    write_named(smk.output, claims_cost(settings, settings.claim(smk.wildcards.claim)))


run(main, snakemake)
