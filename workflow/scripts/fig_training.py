"""Rule fig13_training: Fig. 13, the loss curve and the trained model's cross-attention."""

from pathlib import Path

import pandas as pd

from tcrformer.io import read_json, read_npy
from tcrformer.plotting import reversal, style
from tcrformer.runner import run


def main(smk):
    source, output = reversal.read_decoded(Path(smk.input.decoded).read_text(encoding="utf-8"))
    fig = reversal.draw_training(
        pd.read_csv(smk.input.losses),
        reversal.training_values(read_json(smk.input.values), smk.params.prefix),
        read_npy(smk.input.attention),
        source,
        output,
        smk.params.layer,
    )
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
