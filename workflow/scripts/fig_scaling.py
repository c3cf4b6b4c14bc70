"""Rule figS1_sqrt_dk_scaling: random scores and their softmax, without and with sqrt(d_k)."""

from tcrformer.io import read_json, read_npy
from tcrformer.plotting import style, toy
from tcrformer.runner import run


def main(smk):
    fig = toy.draw_scaling(
        read_npy(smk.input.raw),
        read_npy(smk.input.unscaled),
        read_npy(smk.input.scaled),
        read_json(smk.input.values)["scaling.d_k"],
    )
    style.save(fig, smk.output.png, smk.output.svg)


run(main, snakemake)
