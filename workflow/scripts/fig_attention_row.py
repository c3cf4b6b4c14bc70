"""Rule fig03_attention_row: Fig. 3, the focus residue's head-1 attention row as bars."""

from tcrformer.io import read_json, read_npy
from tcrformer.plotting import style, toy
from tcrformer.runner import run


def main(smk):
    values = read_json(smk.input.values)
    fig = toy.draw_attention_row(
        read_npy(smk.input.weights)[0],
        values["toy.sequence"],
        values["toy.head1.focus_position"],
        values["toy.head1.partner_position"],
    )
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
