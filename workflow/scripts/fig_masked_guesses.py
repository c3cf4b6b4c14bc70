"""Rule fig07_masked_guesses: Fig. 7, each model's top guesses for each hidden residue."""

import pandas as pd

from tcrformer.io import read_json
from tcrformer.plotting import plm, style
from tcrformer.runner import run


def main(smk):
    cdr3 = plm.cdr3_of(pd.read_csv(smk.input.scan))
    fig = plm.draw_masked_guesses(read_json(smk.input.esm2), read_json(smk.input.sceptr), cdr3)
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
