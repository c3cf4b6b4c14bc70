"""Rule fig01_toy_input: Fig. 1, the toy input matrix as an annotated heatmap."""

from tcrformer.io import read_json, read_npy
from tcrformer.plotting import style, toy
from tcrformer.runner import run


def main(smk):
    sequence = read_json(smk.input.values)["toy.sequence"]
    fig = toy.draw_toy_input(read_npy(smk.input.X), sequence)
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
