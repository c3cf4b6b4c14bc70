"""Rule claims_summary: tcrclaims.compute.claims_summary."""

import pandas as pd
import yaml

from tcrclaims.compute import claims_summary
from tcrclaims.settings import Settings
from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run


def main(smk):
    settings = Settings.from_config(smk.params.config)
    metrics, histories = {}, {}
    paths = zip(smk.input.metrics, smk.input.histories, strict=True)
    for (arm, _), (metrics_path, history_path) in zip(smk.params.jobs, paths, strict=True):
        metrics.setdefault(arm, []).append(read_json(metrics_path))
        histories.setdefault(arm, []).append(pd.read_csv(history_path))
    results = claims_summary(
        settings,
        metrics,
        histories,
        read_json(smk.input.analytic),
        {found["claim"]: found for found in map(read_json, smk.input.benchmarks)},
        read_json(smk.input.registration),
        yaml.safe_load(open(smk.input.plan)),
    )
    write_named(smk.output, results)


run(main, snakemake)
