"""Rule fig12_teacher_forcing: Fig. 12, teacher forcing and the causal and padding masks."""

from tcrformer.io import read_json
from tcrformer.plotting import notes, style
from tcrformer.runner import run


def main(smk):
    fig = notes.draw_teacher_forcing(read_json(smk.input.masks))
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
