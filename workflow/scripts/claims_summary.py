"""Rule claims_summary: tcrformer.chapters.claims.compute.claims_summary."""

import pandas as pd

from tcrformer.chapters.claims.compute import claims_summary
from tcrformer.chapters.claims.settings import Settings
from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run


def main(smk):
    settings = Settings.from_config(smk.params.config)
    arms, seeds = smk.params.arms, smk.params.seeds
    metrics, histories = {arm: [] for arm in arms}, {arm: [] for arm in arms}
    paths = zip(smk.input.metrics, smk.input.histories, strict=True)
    pairs = [(arm, seed) for arm in arms for seed in seeds]  # expand's order: arm, then seed
    for (arm, _), (metrics_path, history_path) in zip(pairs, paths, strict=True):
        metrics[arm].append(read_json(metrics_path))
        histories[arm].append(pd.read_csv(history_path))
    results = claims_summary(
        settings,
        metrics,
        histories,
        read_json(smk.input.analytic),
        read_json(smk.input.cost),
        pd.read_csv(smk.input.cost_table),
        read_json(smk.input.speed),
    )
    write_named(smk.output, results)


run(main, snakemake)
