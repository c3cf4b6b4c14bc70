"""Rule claims_sweep_grid: tcrformer.chapters.claims.compute.claims_sweep_grid."""

from tcrformer.chapters.claims.compute import claims_sweep_grid
from tcrformer.chapters.claims.settings import Settings
from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run


def main(smk):
    sweep = Settings.from_config(smk.config).sweeps[smk.wildcards.sweep]
    paths = iter(smk.input.metrics)  # candidates in order, each over the sweep's seeds
    results = {arm: [read_json(next(paths)) for _ in sweep.seeds] for arm in sweep.candidates}
    write_named(smk.output, claims_sweep_grid(sweep, results, smk.params.values))


run(main, snakemake)
