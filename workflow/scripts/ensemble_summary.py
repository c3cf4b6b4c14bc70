"""Rule ensemble_summary: every stochastic value as a distribution over seeds, where the seed
document's value falls in it, the loss bands per step, and the golden bands with provenance."""

import datetime

import pandas as pd
import yaml

from tcrformer import golden
from tcrformer.io import read_json, write_csv, write_text
from tcrformer.manifest import config_digest
from tcrformer.numerics import one_line
from tcrformer.reversal import ensemble
from tcrformer.runner import run


def main(smk):
    per_seed = {
        seed: read_json(path) for seed, path in zip(smk.params.seeds, smk.input.values, strict=True)
    }
    seeds = ensemble.seeds_frame(per_seed)
    losses = pd.concat([pd.read_csv(path) for path in smk.input.losses], ignore_index=True)
    entries, inputs = golden.load_golden(smk.input.golden)
    published = ensemble.published_values(
        golden.published(entries, inputs, smk.config, "reversal"),
        prefix=smk.params.prefix,
        cdr3=smk.config["reversal"]["cdr3"],
        keys=[c for c in seeds.columns if c != "seed"],
    )
    table = ensemble.summary_table(seeds, published)
    write_csv(smk.output.seeds, seeds)
    write_csv(smk.output.table, table)
    title = (
        f"Ensemble: the {smk.params.recipe} recipe over {len(seeds)} seeds (run {smk.params.run})"
    )
    write_text(smk.output.md, ensemble.summary_markdown(table, title))
    write_csv(smk.output.loss_bands, ensemble.loss_bands(losses))
    numerics = read_json(smk.input.numerics)
    provenance = {
        "n": len(seeds),
        "seeds": [int(s) for s in seeds["seed"]],
        "recipe": smk.params.recipe,
        "command": smk.params.command,
        "config_sha256": config_digest(smk.config),
        "numerics": one_line(numerics),
        "date": datetime.date.today().isoformat(),
        "band": "[min, max] of the ensemble",
    }
    bands = ensemble.golden_bands(seeds, published, provenance)
    write_text(smk.output.bands, yaml.safe_dump(bands, sort_keys=False, allow_unicode=True))


run(main, snakemake)
