# Chapter ensemble (target `ensemble`, not part of `all`): the reversal recipe named by
# `ensemble.recipe`, trained once per seed of `ensemble.seeds`, one job each, by the same
# loop as the single run; every seed evaluated exactly as the single run is; every
# stochastic value summarised as a distribution, with the explainer's value placed in it.
# tcrformer.chapters.ensemble: settings, compute.{train,evaluate}_ensemble and
# ensemble_summary, figure_data (Fig. S3, in figures.smk).
#
#   results/<run>/ensemble/seed<s>/     one seed's weights, losses and values.json
#   results/<run>/ensemble/             seeds.csv, ensemble.{csv,md}, loss_bands.csv,
#                                       curves.csv, statistics.csv, figure_data.json
#
# The golden check's bands are fitted from such ensembles offline (tools/golden/).


ENSEMBLE = settings("ensemble")


wildcard_constraints:
    seed="[0-9]+",


rule train_ensemble:
    output:
        models=result("ensemble", "seed{seed}/models.safetensors"),
        losses=result("ensemble", "seed{seed}/losses.csv"),
        numerics=result("ensemble", "seed{seed}/numerics.json"),
        timing=result("ensemble", "seed{seed}/training_time.json"),
    log:
        log_for("train_ensemble_seed{seed}"),
    benchmark:
        benchmark_for("train_ensemble_seed{seed}")
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        gpu=0,
        mem_mb=2000,
    params:
        recipe=lambda wc: ENSEMBLE.recipe_for(
            config["reversal"], int(wc.seed)
        ).training_params(),
        checkpoints=lambda wc: result("ensemble", f"seed{wc.seed}/checkpoints"),
        numerics=NUMERICS,
    script:
        "../scripts/train_ensemble.py"


rule evaluate_ensemble:
    input:
        models=rules.train_ensemble.output.models,
        losses=rules.train_ensemble.output.losses,
    output:
        values=result("ensemble", "seed{seed}/values.json"),
    log:
        log_for("evaluate_ensemble_seed{seed}"),
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    resources:
        mem_mb=2000,
    params:
        recipe=lambda wc: ENSEMBLE.recipe_for(config["reversal"], int(wc.seed)).params(),
        numerics=NUMERICS,
    script:
        "../scripts/evaluate_ensemble.py"


rule ensemble_summary:
    """The seed ensemble as distributions: tables, curves, statistics, figure data."""
    input:
        values=expand(rules.evaluate_ensemble.output.values, seed=ENSEMBLE.seeds),
        losses=expand(rules.train_ensemble.output.losses, seed=ENSEMBLE.seeds),
        golden=config["golden"]["file"],
    output:
        seeds=result("ensemble", "seeds.csv"),
        curves=result("ensemble", "curves.csv"),
        statistics=result("ensemble", "statistics.csv"),
        table=report(
            result("ensemble", "ensemble.csv"),
            caption="../report/ensemble_table.rst",
            category=CATEGORIES["ensemble"],
        ),
        md=result("ensemble", "ensemble.md"),
        loss_bands=result("ensemble", "loss_bands.csv"),
        figure_data=result("ensemble", "figure_data.json"),
    log:
        log_for("ensemble_summary"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        seeds=ENSEMBLE.seeds,
        recipe=ENSEMBLE.recipe,
        cdr3=config["reversal"]["cdr3"],
        eval_n=config["reversal"]["eval_n"],
    script:
        "../scripts/ensemble_summary.py"


rule ensemble:
    """Target: the seed ensemble, its summary table, its figure, its curves and statistics."""
    input:
        rules.ensemble_summary.output,
        chapter_figures("ensemble"),
