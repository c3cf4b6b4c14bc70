"""Rule fig04_heads: Fig. 4, every toy head's attention map side by side."""

from tcrformer.io import read_json, read_npy
from tcrformer.plotting import style, toy
from tcrformer.runner import run


def main(smk):
    sequence = read_json(smk.input.values)["toy.sequence"]
    fig = toy.draw_heads(read_npy(smk.input.weights), sequence, smk.params.head_names)
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
