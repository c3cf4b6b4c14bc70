# Seed ensembles (target `ensemble`, not part of `all`): the recipe the reversal keys define,
# trained once per seed of `ensemble.seeds`, in jobs of `ensemble.group_size` seeds; every
# seed evaluated exactly as the single run is; every stochastic value summarised as a
# distribution, with the seed document's value placed in it.
#
#   results/<run>/ensemble/group<g>/    weights and losses of the seeds of group g
#   results/<run>/ensemble/seed<s>/     one seed's values.json
#   results/<run>/ensemble/             seeds.csv, ensemble.{csv,md}, loss_bands.csv,
#                                       golden_bands.yaml, ensemble.{png,svg}

ENSEMBLE_CATEGORY = "6. Seed ensembles"


wildcard_constraints:
    group="[0-9]+",
    seed="[0-9]+",


rule train_ensemble:
    output:
        models=result("ensemble", "group{group}/models.safetensors"),
        losses=result("ensemble", "group{group}/losses.csv"),
        numerics=result("ensemble", "group{group}/numerics.json"),
        timing=result("ensemble", "group{group}/training_time.json"),
    log:
        log_for("train_ensemble_group{group}"),
    benchmark:
        benchmark_for("train_ensemble_group{group}")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    resources:
        gpu=0,
        mem_mb=2000,
    params:
        seeds=lambda wc: list(ENSEMBLE_GROUPS[int(wc.group)]),
        training=ensemble_training,
        checkpoints=lambda wc: result("ensemble", f"group{wc.group}/checkpoints"),
    script:
        "../scripts/train_ensemble.py"


rule evaluate_ensemble:
    input:
        models=ensemble_group_file("models.safetensors"),
        losses=ensemble_group_file("losses.csv"),
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
        evaluation=lambda wc: ENSEMBLE.recipe_for(
            config["reversal"], int(wc.seed)
        ).evaluation_params(),
    script:
        "../scripts/evaluate_ensemble.py"


rule ensemble_summary:
    input:
        values=expand(rules.evaluate_ensemble.output.values, seed=ENSEMBLE.seeds),
        losses=expand(
            rules.train_ensemble.output.losses, group=range(len(ENSEMBLE_GROUPS))
        ),
        numerics=expand(rules.train_ensemble.output.numerics, group=0)[0],
        golden=config["golden"]["file"],
    output:
        seeds=result("ensemble", "seeds.csv"),
        table=report(
            result("ensemble", "ensemble.csv"),
            caption="../report/ensemble/ensemble_table.rst",
            category=ENSEMBLE_CATEGORY,
        ),
        md=result("ensemble", "ensemble.md"),
        loss_bands=result("ensemble", "loss_bands.csv"),
        bands=result("ensemble", "golden_bands.yaml"),
    log:
        log_for("ensemble_summary"),
    conda:
        "../../envs/numeric.yaml"
    params:
        seeds=ENSEMBLE.seeds,
        recipe=ENSEMBLE.recipe,
        prefix=ENSEMBLE_PREFIX,
        run=RUN,
        command="snakemake --cores 2 ensemble"
        + (f" --config run={RUN}" if RUN != "paper" else ""),
    script:
        "../scripts/ensemble_summary.py"


rule fig_ensemble:
    input:
        table=rules.ensemble_summary.output.table,
        seeds=rules.ensemble_summary.output.seeds,
        loss_bands=rules.ensemble_summary.output.loss_bands,
    output:
        png=report(
            result("ensemble", "ensemble.png"),
            caption="../report/ensemble/fig_ensemble.rst",
            category=ENSEMBLE_CATEGORY,
        ),
        svg=result("ensemble", "ensemble.svg"),
    log:
        log_for("fig_ensemble"),
    conda:
        "../../envs/plotting.yaml"
    params:
        prefix=ENSEMBLE_PREFIX,
        recipe=ENSEMBLE.recipe,
        eval_n=config["reversal"]["eval_n"],
    script:
        "../scripts/fig_ensemble.py"


rule ensemble:
    """Target: the seed ensemble, its summary table, figure and golden bands."""
    input:
        rules.ensemble_summary.output,
        rules.fig_ensemble.output,
