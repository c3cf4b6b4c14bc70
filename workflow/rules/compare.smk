# Chapter compare (target `compare`, not part of `all`): two finished runs side by side,
#   snakemake --cores 2 compare --config compare='[paper, alt]'
# It reads the runs' result files and manifests from their folders (params, never inputs,
# so nothing of a run is ever rebuilt) and reruns when a run's manifest.json changes.
# The runs are checked before any rule runs (tcrformer.chapters.compare.settings).
# tcrformer.chapters.compare: settings, compute.compare_runs, figure_data.
#
#   results/compare/<a>_vs_<b>/   values.csv, config_diff.json, summary.md,
#                                 losses.{png,svg}, attention.{png,svg}


rule compare_runs:
    input:
        golden=config["golden"]["file"],
    output:
        values=compare_report("values.csv", "values"),
        config_diff=compare_file("config_diff.json"),
        summary=compare_file("summary.md"),
        losses_png=compare_report("losses.png", "losses"),
        losses_svg=compare_file("losses.svg"),
        attention_png=compare_report("attention.png", "attention"),
        attention_svg=compare_file("attention.svg"),
    log:
        log_for("compare_runs_{run_a}_vs_{run_b}"),
    wildcard_constraints:
        run_a=compare_constraint(0),
        run_b=compare_constraint(1),
    conda:
        "../../envs/plotting.yaml"
    params:
        folders=lambda wc: [
            str(COMPARE.folder(wc.run_a)),
            str(COMPARE.folder(wc.run_b)),
        ],
        manifest_sha256=lambda wc: COMPARE.manifest_sha256(),
    script:
        "../scripts/compare_runs.py"


rule compare:
    """Target: two finished runs compared (--config compare='[a, b]')."""
    input:
        compare_targets(),
