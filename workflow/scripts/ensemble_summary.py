"""Rule ensemble_summary: tcrformer.chapters.ensemble.compute.ensemble_summary."""

import pandas as pd

from tcrformer.chapters.ensemble.compute import ensemble_summary
from tcrformer.core import golden, golden_file
from tcrformer.core.io import read_json, write_named
from tcrformer.core.runner import run


def main(smk):
    seeds, paths = smk.params.seeds, smk.input.values
    per_seed = {seed: read_json(path) for seed, path in zip(seeds, paths, strict=True)}
    losses = pd.concat([pd.read_csv(path) for path in smk.input.losses], ignore_index=True)
    entries, inputs = golden_file.load_golden(smk.input.golden)
    results = ensemble_summary(
        smk.params.recipe,
        per_seed,
        losses,
        golden.published(entries, inputs, smk.config, "reversal"),
        cdr3=smk.params.cdr3,
        eval_n=smk.params.eval_n,
    )
    write_named(smk.output, results)


run(main, snakemake)
