"""Rules fig05/06/08/10/11: the seed's schematic figures, labelled with the configured sizes."""

from tcrformer.plotting import schematics, style
from tcrformer.runner import run


def main(smk):
    draw = getattr(schematics, smk.params.draw)
    style.save(draw(**smk.params.sizes), smk.output.png, smk.output.svg)


run(main, snakemake)
