# Helpers of the figure rules (workflow/rules/figures.smk): the table's rows as Snakemake
# inputs, outputs and params.

GOLDEN_CATEGORY = "0. Golden check"
# The figures of `all`: those of its chapters, and the schematics (they read no results).
FIGURES_OF_ALL = [f for f in FIGURE_TABLE if f.chapter in (*CHAPTERS, None)]


def figure_inputs(figure):
    """{name: result file} of the chapter data the figure draws."""
    return {name: result(figure.chapter, file) for name, file in figure.files().items()}


def figure_png(figure):
    """The PNG of a figure, shown in the report under its chapter with its caption."""
    return report(
        figure_files(figure.id)[0],
        caption=f"../report/figures/{figure.id}.rst",
        category=figure.category,
    )


def figures_of(group):
    """The PNG and SVG of every figure of `all` drawn from a chapter (None: schematics)."""
    return [
        path
        for f in FIGURES_OF_ALL
        if f.chapter == group
        for path in figure_files(f.id)
    ]
