"""Rule claims_cost: tcrformer.chapters.claims.compute.claims_cost (a benchmark, one claim)."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.claims.compute import claims_cost
    from tcrformer.chapters.claims.settings import Settings

    settings = Settings.from_config(smk.params.config)
    write_named(smk.output, claims_cost(settings, settings.claim(smk.wildcards.claim)))


run(main, snakemake)
