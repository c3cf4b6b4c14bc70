# Helpers of the figure rules (workflow/rules/figures.smk): the table's rows as Snakemake
# inputs, outputs and params.

# The figures of `all`: those of its chapters, and the schematics (they read no results).
FIGURES_OF_ALL = [f for f in FIGURE_TABLE if f.chapter in (*VALUE_CHAPTERS, None)]


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
