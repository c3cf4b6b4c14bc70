"""Rule claims_sweep: tcrformer.chapters.claims.compute.claims_sweep."""

from tcrformer.chapters.claims.compute import claims_sweep
from tcrformer.chapters.claims.settings import Settings
from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run


def main(smk):
    sweep = Settings.from_config(smk.config).sweeps[smk.wildcards.sweep]
    arms = [*sweep.candidates, *read_json(smk.input.grid)["extend"]]
    paths = iter(smk.input.metrics)  # as sweep_final_metrics lists them
    results = {arm: [read_json(next(paths)) for _ in sweep.seeds] for arm in arms}
    write_named(smk.output, claims_sweep(sweep, results, smk.params.values))


run(main, snakemake)
