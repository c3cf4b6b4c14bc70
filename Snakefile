# tcrformer: regenerate every number and figure of "What is a Transformer?, told with one
# T-cell receptor" from code. One chapter per rule file; see README.md and
# docs/architecture.md.
#
#   snakemake --cores 2            everything, then the golden check and the manifest
#   snakemake --cores 2 toy        one chapter (toy, notes, reversal, plm, figures)

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"
configfile: "config/claims.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/toy.smk"
include: "workflow/rules/notes.smk"
include: "workflow/rules/plm.smk"
include: "workflow/rules/reversal.smk"
include: "workflow/rules/ensemble.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/golden.smk"
include: "workflow/rules/provenance.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/compare.smk"


rule all:
    default_target: True
    input:
        f"{RESULTS}/golden.ok",
        f"{RESULTS}/manifest.json",
        f"{RESULTS}/timings.md",
        [result(chapter, "golden.ok") for chapter in CHAPTERS],
        rules.figures.input,
        rules.manifest_table.output,
        rules.benchmarks_table.output,
        rules.report_landing.output,
