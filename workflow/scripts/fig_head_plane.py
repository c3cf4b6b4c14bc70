"""Rule fig02_head_plane: Fig. 2, the focus residue's query and head 1's keys as arrows."""

from tcrformer.io import read_json, read_npy
from tcrformer.plotting import style, toy
from tcrformer.runner import run


def main(smk):
    values = read_json(smk.input.values)
    fig = toy.draw_head_plane(
        read_npy(smk.input.head1_queries),
        read_npy(smk.input.head1_keys),
        values["toy.sequence"],
        values["toy.head1.focus_position"],
        smk.params.dim_names,
    )
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
