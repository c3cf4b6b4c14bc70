# Chapter reversal (explainer section 10.9): train the study-notes encoder-decoder to reverse
# random amino-acid strings, then test it on held-out strings and on the CDR3.
# A recipe's name is its folder and the prefix of its keys: results/<run>/reversal/ holds
# the paper's recipe (`reversal:` keys), results/<run>/speedrun/ the time-to-accuracy
# recipe (target `speedrun`, not part of `all`). Checkpoints go to <folder>/checkpoints/,
# which no rule declares: Snakemake never deletes them, so a killed training resumes.
# tcrformer.chapters.reversal: settings, compute.{train,evaluate}_reversal, figure_data.


from tcrformer.training.recipe import RECIPES

# {recipe name: Recipe}: its folder and the prefix of its keys.
REVERSAL = settings("reversal").recipes


wildcard_constraints:
    recipe="|".join(RECIPES),


rule train_reversal:
    output:
        model=result("{recipe}", "model.safetensors"),
        losses=result("{recipe}", "losses.csv"),
        timing=result("{recipe}", "training_time.json"),
        numerics=result("{recipe}", "numerics.json"),
    log:
        log_for("train_reversal_{recipe}"),
    # Between runs: with --cache, another run name with the same recipe reuses the weights
    # (the key: the script, these params, the training code; no run-specific path). A cached
    # rule can have no benchmark file: its time is in training_time.json instead.
    cache: True
    conda:
        "../../envs/torch.yaml"
    threads: TRAINING_WORKERS
    resources:
        gpu=0,
        mem_mb=2000,
    params:
        recipe=lambda wc: REVERSAL[wc.recipe].training_params(),
        numerics=NUMERICS,
        workers=TRAINING_WORKERS,
        code=TRAINING_CODE,
    script:
        "../scripts/train_reversal.py"


rule evaluate_reversal:
    input:
        model=rules.train_reversal.output.model,
        losses=rules.train_reversal.output.losses,
    output:
        values=result("{recipe}", "values.json"),
        attention=result("{recipe}", "cross_attention.npy"),
        cdr3=result("{recipe}", "cdr3_decoded.txt"),
        figure_data=result("{recipe}", "figure_data.json"),
    log:
        log_for("evaluate_reversal_{recipe}"),
    benchmark:
        benchmark_for("evaluate_reversal_{recipe}")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    resources:
        mem_mb=2000,
    params:
        recipe=lambda wc: REVERSAL[wc.recipe].params(),
        numerics=NUMERICS,
    script:
        "../scripts/evaluate_reversal.py"


# The manifest lists the chapter's files; the speedrun stays out of `all`.
register(rules.train_reversal, recipe="reversal")
register(rules.evaluate_reversal, recipe="reversal")


rule reversal:
    """Target: train and evaluate the reversal chapter's recipe, and its golden check."""
    input:
        expand(rules.evaluate_reversal.output, recipe="reversal"),
        result("reversal", "golden.ok"),


rule speedrun:
    """Target: the time-to-accuracy recipe (keys speedrun.*; its time in training_time.json)."""
    input:
        expand(rules.evaluate_reversal.output, recipe="speedrun"),
