"""Rule figS2_param_breakdown: where the base model's 57 million weights sit."""

import pandas as pd

from tcrformer.plotting import notes, style
from tcrformer.runner import run


def main(smk):
    fig = notes.draw_param_breakdown(pd.read_csv(smk.input.breakdown))
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
