# The golden check: regenerated values against the values the explainer prints.
# Per chapter (part of each chapter's target) and for the whole run (part of `all`).
# The report rules never fail, so a report is always there to read; the gate rules
# fail the run on any FAIL when golden.strict is true.


wildcard_constraints:
    chapter="|".join(VALUE_CHAPTERS),


rule golden_check_chapter:
    input:
        values=result("{chapter}", "values.json"),
        golden=config["golden"]["file"],
        numerics=lambda wc: training_numerics([wc.chapter]),
    output:
        json=result("{chapter}", "golden_report.json"),
        md=result("{chapter}", "golden_report.md"),
    log:
        log_for("golden_check_{chapter}"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        config=config,
        title=lambda wc: f"{wc.chapter} chapter, run {RUN}",
    script:
        "../scripts/golden_check.py"


rule golden_gate_chapter:
    input:
        result("{chapter}", "golden_report.json"),
    output:
        result("{chapter}", "golden.ok"),
    log:
        log_for("golden_gate_{chapter}"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        strict=config["golden"]["strict"],
    script:
        "../scripts/golden_gate.py"


rule merge_values:
    """Every value chapter's values.json merged into the run's."""
    input:
        [result(chapter, "values.json") for chapter in VALUE_CHAPTERS],
    output:
        f"{RESULTS}/values.json",
    log:
        log_for("merge_values"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    script:
        "../scripts/merge_values.py"


rule golden_check:
    """The run's golden report: every regenerated value against the explainer's."""
    input:
        values=rules.merge_values.output[0],
        golden=config["golden"]["file"],
        numerics=training_numerics(VALUE_CHAPTERS),
    output:
        json=report(
            f"{RESULTS}/golden_report.json",
            caption="../report/golden_report.rst",
            category=CATEGORIES["golden"],
        ),
        md=f"{RESULTS}/golden_report.md",
    log:
        log_for("golden_check"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        config=config,
        title=f"run {RUN}",
    script:
        "../scripts/golden_check.py"


rule golden_gate:
    """Fails the run on any FAIL of its golden report when golden.strict is true."""
    input:
        rules.golden_check.output.json,
    output:
        f"{RESULTS}/golden.ok",
    log:
        log_for("golden_gate"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        strict=config["golden"]["strict"],
    script:
        "../scripts/golden_gate.py"


register(rules.merge_values)
register(rules.golden_check)


# Wall-clock values the explainer prints (report-only) beside this run's: they vary from run to
# run, so they live in their own clearly named file, outside values.json, the golden
# reports and the manifest's checksums.
rule timings:
    """Wall-clock values the explainer prints, beside this run's (report only)."""
    input:
        report_only_files(),
        golden=config["golden"]["file"],
    output:
        json=f"{RESULTS}/timings.json",
        md=f"{RESULTS}/timings.md",
    log:
        log_for("timings"),
    localrule: True
    conda:
        "../../envs/numeric.yaml"
    params:
        sources=report_only_sources(),
    script:
        "../scripts/timings.py"
