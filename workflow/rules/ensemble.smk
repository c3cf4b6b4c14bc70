# Chapter ensemble (target `ensemble`, not part of `all`): the reversal recipe named by
# `ensemble.recipe`, trained once per seed of `ensemble.seeds` in jobs of
# `ensemble.group_size` seeds; every seed evaluated exactly as the single run is; every
# stochastic value summarised as a distribution, with the seed document's value placed in it.
# tcrformer.chapters.ensemble: settings, compute.{train,evaluate}_ensemble and
# ensemble_summary, figure_data (Fig. S3, in figures.smk).
#
#   results/<run>/ensemble/group<g>/    weights and losses of the seeds of group g
#   results/<run>/ensemble/seed<s>/     one seed's values.json
#   results/<run>/ensemble/             seeds.csv, ensemble.{csv,md}, loss_bands.csv,
#                                       golden_bands.yaml, figure_data.json


include: "ensemble_common.smk"


wildcard_constraints:
    group="[0-9]+",
    seed="[0-9]+",
    fault="|".join(POWER.FAULTS),


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
        recipes=ensemble_training,
        checkpoints=lambda wc: result("ensemble", f"group{wc.group}/checkpoints"),
        numerics=NUMERICS,
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
        recipe=lambda wc: ensemble_recipe(int(wc.seed)).params(),
        numerics=NUMERICS,
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
            caption="../report/ensemble_table.rst",
            category=CATEGORIES["ensemble"],
        ),
        md=result("ensemble", "ensemble.md"),
        loss_bands=result("ensemble", "loss_bands.csv"),
        bands=result("ensemble", "golden_bands.yaml"),
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
        run=RUN,
        command=f"snakemake --cores 2 ensemble --config run={RUN}",
    script:
        "../scripts/ensemble_summary.py"


rule ensemble:
    """Target: the seed ensemble, its summary table, its figure and its golden bands."""
    input:
        rules.ensemble_summary.output,
        chapter_figures("ensemble"),


# The golden check's power (target `power`, not part of `all`): the paper recipe trained with
# a fault in its code (bench/golden_power.py; never a config option) for POWER.SEEDS, each run
# judged by the committed golden file and bands, as a user's run is.


rule golden_power:
    output:
        values=result("power", "{fault}/seed{seed}/values.json"),
        model=result("power", "{fault}/seed{seed}/model.safetensors"),
        losses=result("power", "{fault}/seed{seed}/losses.csv"),
        numerics=result("power", "{fault}/seed{seed}/numerics.json"),
        timing=result("power", "{fault}/seed{seed}/training_time.json"),
    log:
        log_for("golden_power_{fault}_seed{seed}"),
    benchmark:
        benchmark_for("golden_power_{fault}_seed{seed}")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    resources:
        gpu=0,
        mem_mb=2000,
    params:
        recipe=REVERSAL["reversal"].params(),
        numerics=NUMERICS,
    script:
        "../../bench/golden_power.py"


rule golden_power_summary:
    input:
        values=expand(
            rules.golden_power.output.values, fault=POWER.FAULTS, seed=POWER.SEEDS
        ),
        numerics=expand(
            rules.golden_power.output.numerics, fault=POWER.FAULTS, seed=POWER.SEEDS
        ),
        golden=config["golden"]["file"],
    output:
        csv=result("power", "power.csv"),
        md=result("power", "power.md"),
        yaml=result("power", "power.yaml"),
    log:
        log_for("golden_power_summary"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        command=f"snakemake --cores 2 power --config run={RUN}",
    script:
        "../../bench/golden_power_summary.py"


rule power:
    """Target: how often the golden check FAILs a run with a fault in its training code."""
    input:
        rules.golden_power_summary.output,
