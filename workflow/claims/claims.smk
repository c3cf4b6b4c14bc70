# Chapter claims (target `claims`, not part of `all`): what the explainer says in prose,
# tested. This folder is the chapter, a unit of its own (README.md): these rules and their
# figures' rules, their scripts, the claims file (config/claims.yaml), whose every claim,
# experiment and criterion is written before the run (read by workflow/Snakefile, before the
# config check), and the package that computes the verdicts (lib/tcrclaims).
# Each (arm, seed) is its own training job, so the SLURM and GPU profiles fan it out.
#
#   results/<run>/claims/arms/<arm>/seed<s>/   history, metrics of one arm and seed
#   results/<run>/claims/benchmarks/           one benchmark job per claim that reads one
#   results/<run>/claims/                      claims.{csv,md}, analytic.json, ...


include: "helpers.smk"


wildcard_constraints:
    arm="|".join(CLAIMS.arms),


# Before any arm trains: every claim's digest, the decision code's and the claims file's
# sha256. No inputs, and params that name files without holding them, so a later change to a
# claim never rewrites it; the summary compares against it.
rule claims_register:
    """The claims, their tests and the decision code's digest, written before any arm trains."""
    output:
        registration=result("claims", "registration.json"),
    log:
        log_for("claims_register"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        claims_file=os.path.relpath(CLAIMS_FILE),
        reviews=list(CLAIMS.reviews),
    script:
        "scripts/claims_register.py"


# One job trains an arm's seed and evaluates it: what a run keeps of it (history, metrics)
# is written together, so a run stopped between jobs loses no training, and the archive
# (tools/claims_archive.py) carries every finished job to the next machine.
rule train_claim_arm:
    input:
        registration=ancient(rules.claims_register.output.registration),
    output:
        history=result("claims", f"{JOB_FOLDER}/history.csv"),
        numerics=result("claims", f"{JOB_FOLDER}/numerics.json"),
        timing=result("claims", f"{JOB_FOLDER}/training_time.json"),
        metrics=result("claims", f"{JOB_FOLDER}/metrics.json"),
    log:
        log_for("train_claim_arm_{arm}_seed{seed}"),
    benchmark:
        benchmark_for("train_claim_arm_{arm}_seed{seed}")
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    resources:
        gpu=0,
        mem_mb=2000,
    params:
        recipe=claim_recipe,
        evaluation=lambda wc: CLAIMS.recipe(wc.arm, int(wc.seed)).params(),
        extras=lambda wc: CLAIMS.extras_of(wc.arm),
        beam_width=CLAIMS.beam_width,
        excess_strings=lambda wc: CLAIMS.excess_strings_of(wc.arm),
        checkpoints=lambda wc: result(
            "claims", f"{JOB_FOLDER.format(arm=wc.arm, seed=wc.seed)}/checkpoints"
        ),
        numerics=NUMERICS,
    script:
        "scripts/train_claim_arm.py"


rule claims_analytic:
    """The analytic claims, measured on random vectors (no training)."""
    output:
        analytic=result("claims", "analytic.json"),
    log:
        log_for("claims_analytic"),
    localrule: True
    conda:
        "../../envs/torch.yaml"
    params:
        config=params_of("claims", "toy", "notes", "reversal", "figures"),
    script:
        "scripts/claims_analytic.py"


# The benchmarks: one job per claim whose test reads one (its numbers from its own test).
rule claims_cost:
    output:
        table=result("claims", "benchmarks/{claim}.csv"),
        summary=result("claims", "benchmarks/{claim}.json"),
    log:
        log_for("claims_cost_{claim}"),
    benchmark:
        benchmark_for("claims_cost_{claim}")
    wildcard_constraints:
        claim=one_of(CLAIMS.benchmarked_by("claims_cost")),
    conda:
        "../../envs/torch.yaml"
    threads: TORCH_THREADS
    params:
        config=params_of("claims", "reversal", "toy", "notes", "figures", "numerics"),
    script:
        "scripts/claims_cost.py"


rule claims_rnn_speed:
    output:
        speed=result("claims", "benchmarks/{claim}.json"),
    log:
        log_for("claims_rnn_speed_{claim}"),
    benchmark:
        benchmark_for("claims_rnn_speed_{claim}")
    wildcard_constraints:
        claim=one_of(CLAIMS.benchmarked_by("claims_rnn_speed")),
    conda:
        "../../envs/torch.yaml"
    threads: max(TORCH_THREADS, CLAIMS.speed["threads"])
    params:
        transformer=benchmark_recipe("reference"),
        gru=benchmark_recipe("arm"),
        speed=CLAIMS.speed,
        numerics=CLAIMS.benchmark_numerics(NUMERICS),
    script:
        "scripts/claims_rnn_speed.py"


rule claims_summary:
    """Every claim's measured value, exact test and verdict, as a table and figure data."""
    input:
        metrics=claim_files("metrics.json"),
        histories=claim_files("history.csv"),
        registration=rules.claims_register.output.registration,
        analytic=rules.claims_analytic.output.analytic,
        benchmarks=expand(
            rules.claims_cost.output.summary,
            claim=CLAIMS.benchmarked_by("claims_cost"),
        )
        + expand(
            rules.claims_rnn_speed.output.speed,
            claim=CLAIMS.benchmarked_by("claims_rnn_speed"),
        ),
        plan=os.path.relpath(CLAIMS_PLAN),
    output:
        table=report(
            result("claims", "claims.csv"),
            caption="report/claims_table.rst",
            category=CLAIMS_SECTION,
        ),
        md=result("claims", "claims.md"),
        figure_data=result("claims", "figure_data.json"),
    log:
        log_for("claims_summary"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        config=params_of("claims", "reversal", "toy", "notes", "figures"),
        jobs=claim_jobs(),
    script:
        "scripts/claims_summary.py"


# The claims' figures (tcrclaims.figures): one rule each, as rules/figures.smk makes the
# library's, drawn by this folder's scripts/draw_figure.py, captions in report/figures/.
for figure in CLAIMS_FIGURES:

    rule:
        f"""Figure {figure.id}: drawn from the claims as PNG and SVG."""
        name:
            figure.id
        input:
            **figure_inputs(figure),
        output:
            png=figure_png(figure, "report/figures"),
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
            "scripts/draw_figure.py"


rule claims_arms:
    """Target: every arm the claims read, each seed trained and evaluated (what a pilot reads)."""
    input:
        claim_files("metrics.json", CLAIMS.tested_arms()),


rule claims:
    """Target: every claim's measured value and verdict, the figures and the table."""
    input:
        rules.claims_summary.output,
        claims_figure_files(),
