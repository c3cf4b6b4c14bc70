"""Rule fig09_positional_encoding: Fig. 9, the PE table as a heatmap and three waves."""

from tcrformer.io import read_npy
from tcrformer.plotting import notes, style
from tcrformer.runner import run


def main(smk):
    fig = notes.draw_positional_encoding(read_npy(smk.input.pe_table), smk.params.wave_dims)
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
