"""Rule claims_analytic: tcrclaims.compute.claims_analytic."""

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrclaims.compute import claims_analytic
    from tcrclaims.settings import Settings
    from tcrformer.chapters.toy.settings import Settings as ToySettings

    config = smk.params.config
    d_model = config["notes"]["d_model"]
    results = claims_analytic(
        Settings.from_config(config), ToySettings.from_config(config), d_model
    )
    write_named(smk.output, results)


run(main, snakemake)
