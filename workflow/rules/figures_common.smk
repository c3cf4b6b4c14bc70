# Paths, report categories and helpers of the figure rules (workflow/rules/figures.smk).

FIGURES = f"{RESULTS}/figures"

TOY_CATEGORY = "1. Toy Transformer"
PLM_CATEGORY = "2. Protein language models"
NOTES_CATEGORY = "3. Study notes"
REVERSAL_CATEGORY = "4. Reversal training"
SCHEMATIC_CATEGORY = "5. Schematics"
GOLDEN_CATEGORY = "0. Golden check"


def figure_png(name, category):
    """The PNG of a figure, shown in the report under its chapter with its caption."""
    return report(
        f"{FIGURES}/{name}.png",
        caption=f"../report/figures/{name}.rst",
        category=category,
    )


def figure_svg(name):
    return f"{FIGURES}/{name}.svg"


def head1_dimension_names():
    """The feature feeding each of head 1's two query columns (blank for a rotation query)."""
    names = ["", ""]
    query = config["toy"]["heads"][0]["Q"]
    if isinstance(query, list):
        for feature, column, _ in query:
            if column < len(names):
                names[column] = feature
    return names


def outputs(figure_rules):
    return [figure_rule.output for figure_rule in figure_rules]
