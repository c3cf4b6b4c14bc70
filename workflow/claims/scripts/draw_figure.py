"""Every figure rule of the claims (claims.smk, tcrclaims.figures): the claims' figure data
in, the figure's PNG and SVG out."""

from tcrformer.core.runner import run


def main(smk):
    from tcrclaims.figures import BY_ID
    from tcrformer.plotting import style

    figure = BY_ID[smk.params.figure].draw(dict(smk.input.items()), smk.params.options)
    style.save(figure, smk.output.png, smk.output.svg)


run(main, snakemake)
