"""Every figure rule of the table (workflow/rules/figures.smk, tcrformer/figures.py): the
figure's chapter data in, its PNG and SVG out."""

from tcrformer.core.runner import run


def main(smk):
    from tcrformer.figures import draw
    from tcrformer.plotting import style

    figure = draw(smk.params.figure, dict(smk.input.items()), smk.params.options)
    style.save(figure, smk.output.png, smk.output.svg)


run(main, snakemake)
