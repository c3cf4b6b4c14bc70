# Figures: one rule per row of the figure table (tcrformer/figures.py), each drawing one
# figure from its chapter's figure data (never from a model) as byte-stable PNG and SVG
# under results/<run>/figures/, marked for the Snakemake report. A figure's id names its
# rule, its files, its caption (workflow/report/figures/<id>.rst) and its draw function.
#
#   snakemake --cores 2 figures
#   snakemake --report results/paper/report.html


include: "figures_common.smk"


for figure in FIGURE_TABLE:

    rule:
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
        script:
            "../scripts/draw_figure.py"

    if figure in FIGURES_OF_ALL:
        register(getattr(rules, figure.id))


# The run's golden report as a table that reads in the report (the JSON is raw text).
rule golden_table:
    input:
        f"{RESULTS}/golden_report.json",
    output:
        report(
            f"{FIGURES}/golden_table.html",
            caption="../report/figures/golden_table.rst",
            category=GOLDEN_CATEGORY,
        ),
    log:
        log_for("golden_table"),
    localrule: True
    conda:
        "../../envs/plotting.yaml"
    params:
        title=f"Golden check of run {RUN}: seed values against regenerated values",
    script:
        "../scripts/golden_table.py"


register(rules.golden_table)


# The manifest as a table. Not registered: the manifest lists every registered file.
rule manifest_table:
    input:
        f"{RESULTS}/manifest.json",
    output:
        report(
            f"{RESULTS}/manifest.html",
            caption="../report/figures/manifest_table.rst",
            category=GOLDEN_CATEGORY,
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


rule figures_toy:
    """Target: the toy chapter's figures (fast: no language model, no training)."""
    input:
        chapter_figures("toy"),


rule figures_notes:
    """Target: the study-notes chapter's figures (fast)."""
    input:
        chapter_figures("notes"),


rule figures_plm:
    """Target: the language-model figures (runs the plm chapter first)."""
    input:
        chapter_figures("plm"),


rule figures_reversal:
    """Target: the training figure (trains the reversal model first, a few minutes)."""
    input:
        chapter_figures("reversal"),


rule figures_schematic:
    """Target: the schematic figures (fast: they read no results)."""
    input:
        chapter_figures(None),


rule figures:
    """Target: every figure of `all`, and the golden table for the report."""
    input:
        [path for f in FIGURES_OF_ALL for path in figure_files(f.id)],
        rules.golden_table.output,
