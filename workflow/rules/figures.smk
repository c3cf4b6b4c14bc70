# Figures: one rule per row of the figure table (tcrformer/figures.py), each drawing one
# figure from its chapter's figure data (never from a model) as byte-stable PNG and SVG
# under results/<run>/figures/, marked for the Snakemake report. A figure's id names its
# rule, its files, its caption (workflow/report/figures/<id>.rst) and its draw function.
#
#   snakemake --cores 2 figures
#   snakemake --report results/paper/report.html


for figure in FIGURE_TABLE:

    rule:
        f"""Figure {figure.id}: drawn from {figure.chapter or 'the config'} as PNG and SVG."""
        name:
            figure.id
        input:
            **figure_inputs(figure),
        output:
            png=figure_png(figure),
            svg=figure_files(figure.id)[1],
        log:
            log_for(figure.id),
        localrule: True
        conda:
            "../../envs/plotting.yaml"
        params:
            figure=figure.id,
            options=figure.options(config),
            drawn_from=figure.drawn_from(),  # the caption's list of what it reads
        script:
            "../scripts/draw_figure.py"

    if figure in FIGURES_OF_ALL:
        register(getattr(rules, figure.id))


# The JSON is raw text in the report; the table reads.
rule golden_table:
    """The run's golden report as a table for the Snakemake report."""
    input:
        f"{RESULTS}/golden_report.json",
    output:
        report(
            f"{FIGURES}/golden_table.html",
            caption="../report/figures/golden_table.rst",
            category=CATEGORIES["golden"],
        ),
    log:
        log_for("golden_table"),
    localrule: True
    conda:
        "../../envs/plotting.yaml"
    params:
        title=f"Golden check of run {RUN}: explainer values against regenerated values",
    script:
        "../scripts/golden_table.py"


register(rules.golden_table)


# Not registered: the manifest lists every registered file.
rule manifest_table:
    """The provenance manifest as a table for the Snakemake report."""
    input:
        f"{RESULTS}/manifest.json",
    output:
        report(
            f"{RESULTS}/manifest.html",
            caption="../report/figures/manifest_table.rst",
            category=CATEGORIES["golden"],
        ),
    log:
        log_for("manifest_table"),
    localrule: True
    conda:
        "../../envs/plotting.yaml"
    params:
        title=f"Provenance manifest of run {RUN}",
    script:
        "../scripts/manifest_table.py"


# One target per chapter of `all`, from the table: figures_toy, figures_notes, ...,
# figures_schematic (the figures that read no results).
for group in dict.fromkeys(f.chapter for f in FIGURES_OF_ALL):

    rule:
        f"""Target: the figures of {group or 'no chapter (the schematics)'}."""
        name:
            f"figures_{group or 'schematic'}"
        input:
            chapter_figures(group),


rule figures:
    """Target: every figure of `all`, and the golden table for the report."""
    input:
        [path for f in FIGURES_OF_ALL for path in figure_files(f.id)],
        rules.golden_table.output,
