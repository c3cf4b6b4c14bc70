"""Rule fig07_cdr3_scan: Fig. 7 (scan), p(true residue) per CDR3 position by segment."""

import pandas as pd

from tcrformer.io import read_json
from tcrformer.plotting import plm, style
from tcrformer.runner import run


def main(smk):
    details = plm.model_details(read_json(smk.input.esm2), read_json(smk.input.sceptr))
    fig = plm.draw_cdr3_scan(pd.read_csv(smk.input.scan), read_json(smk.input.summary), details)
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
