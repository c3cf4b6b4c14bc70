"""Rule claims_rnn_speed: tcrclaims.compute.claims_rnn_speed (a benchmark,
one claim)."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrclaims.compute import claims_rnn_speed
    from tcrformer.training.recipe import Recipe

    transformer, gru = (
        Recipe.from_params(smk.params.transformer),
        Recipe.from_params(smk.params.gru),
    )
    write_named(
        smk.output,
        claims_rnn_speed(smk.wildcards.claim, transformer, gru, **smk.params.speed),
    )


run(main, snakemake)
