# Provenance: the manifest of a run (versions, git state, config digest, a sha256 per file).


rule manifest:
    """The run's provenance: versions, git state, config digest, a sha256 per file."""
    input:
        files=lambda wc: sorted(PRODUCED_BY),
        gate=f"{RESULTS}/golden.ok",
    output:
        report(
            f"{RESULTS}/manifest.json",
            caption="../report/manifest.rst",
            category=CATEGORIES["golden"],
        ),
    log:
        log_for("manifest"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        produced_by=lambda wc: dict(PRODUCED_BY),
        numerics=lambda wc: numerics_records(),
        config=config,
    script:
        "../scripts/manifest.py"


# Not in the manifest, which it reads.
rule benchmarks_table:
    """Every benchmark file of the run as one table, for the report."""
    input:
        f"{RESULTS}/manifest.json",
    output:
        csv=f"{RESULTS}/benchmarks.csv",
        html=report(
            f"{RESULTS}/benchmarks.html",
            caption="../report/benchmarks.rst",
            category=CATEGORIES["golden"],
        ),
    log:
        log_for("benchmarks_table"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        folder=lambda wc, output: os.path.join(
            os.path.dirname(output.csv), "benchmarks"
        ),
        title=f"Benchmarks of run {RUN}",
    script:
        "../scripts/benchmarks_table.py"


rule report_landing:
    """The report's front page: the run, its commit and config, the golden counts."""
    input:
        manifest=f"{RESULTS}/manifest.json",
        golden=f"{RESULTS}/golden_report.json",
    output:
        report(
            f"{RESULTS}/landing.html",
            caption="../report/landing.rst",
            category=CATEGORIES["run"],
        ),
    log:
        log_for("report_landing"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        run=RUN,
        chapters=report_sections(),
    script:
        "../scripts/report_landing.py"
