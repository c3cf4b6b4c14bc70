"""Rule fig_ensemble: the loss over seeds as bands, held-out exact as a histogram."""

import pandas as pd

from tcrformer.plotting import ensemble, style
from tcrformer.reversal.ensemble import published_losses
from tcrformer.runner import run


def main(smk):
    table = pd.read_csv(smk.input.table)
    seeds = pd.read_csv(smk.input.seeds)
    prefix = smk.params.prefix
    exact = table.set_index("key")["published"].get(f"{prefix}.heldout_exact")
    fig = ensemble.draw_ensemble(
        pd.read_csv(smk.input.loss_bands),
        seeds[f"{prefix}.heldout_exact"].to_numpy(),
        smk.params.eval_n,
        published_losses(table, prefix),
        None if pd.isna(exact) else float(exact),
        smk.params.recipe,
    )
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
