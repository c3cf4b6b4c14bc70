# Chapter plm (explainer section 7): hide one CDR3 residue, let a protein language model guess it.
# ESM-2 reads the TCRbeta chain when its weights can be had (otherwise its result says why
# not); SCEPTR, whose weights ship in its wheel, reads the paired receptor; the scan hides
# every CDR3 position in turn with every available model.
# tcrformer.chapters.plm: settings, compute.plm_{esm2,sceptr,scan,values}, figure_data.


include: "plm_common.smk"


rule plm_esm2:
    input:
        weights=esm2_weights,
    output:
        esm2=result("plm", "esm2.json"),
    log:
        log_for("plm_esm2"),
    cache: True
    conda:
        "../../envs/plm.yaml"
    threads: TORCH_THREADS
    params:
        config=params_of("plm", "numerics"),
        code=PLM_CODE,
    script:
        "../scripts/plm_esm2.py"


register(rules.plm_esm2)


rule plm_sceptr:
    output:
        sceptr=result("plm", "sceptr.json"),
    log:
        log_for("plm_sceptr"),
    cache: True
    conda:
        "../../envs/plm.yaml"
    threads: TORCH_THREADS
    params:
        config=params_of("plm", "numerics"),
        code=PLM_CODE,
    script:
        "../scripts/plm_sceptr.py"


register(rules.plm_sceptr)


rule plm_scan:
    input:
        esm2=rules.plm_esm2.output.esm2,
        weights=esm2_weights,
    output:
        table=result("plm", "scan.csv"),
        summary=result("plm", "scan_summary.json"),
    log:
        log_for("plm_scan"),
    cache: True
    conda:
        "../../envs/plm.yaml"
    threads: TORCH_THREADS
    params:
        config=params_of("plm", "numerics"),
        code=PLM_CODE,
    script:
        "../scripts/plm_scan.py"


register(rules.plm_scan)


rule plm_values:
    input:
        esm2=rules.plm_esm2.output.esm2,
        sceptr=rules.plm_sceptr.output.sceptr,
        summary=rules.plm_scan.output.summary,
    output:
        values=result("plm", "values.json"),
    log:
        log_for("plm_values"),
    localrule: True
    conda:
        "../../envs/plm.yaml"
    script:
        "../scripts/plm_values.py"


register(rules.plm_values)


rule plm:
    """Target: the plm chapter (ESM-2, SCEPTR, the CDR3 scan) and its golden check."""
    input:
        rules.plm_values.output,
        rules.plm_scan.output,
        result("plm", "golden.ok"),
