# Chapter plm (explainer section 7): hide one CDR3 residue, let a protein language model guess it.
# ESM-2 reads the TCRbeta chain when its weights can be had (otherwise its result says why
# not); SCEPTR, whose weights ship in its wheel, reads the paired receptor; the scan hides
# every CDR3 position in turn with every available model.
# tcrformer.chapters.plm: settings, compute.plm_{esm2,sceptr,scan,values}, figure_data.


from tcrformer.chapters.plm.weights import weight_files

PLM = settings("plm")


rule plm_esm2:
    """ESM-2's guesses for the hidden CDR3 residue (or why it could not run)."""
    input:
        weights=lambda wc: weight_files(PLM.esm2),  # new or changed weights rerun it
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
    """SCEPTR's guesses for the hidden CDR3 residue, on the paired receptor."""
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
    """Every CDR3 position hidden in turn, with every available model."""
    input:
        esm2=rules.plm_esm2.output.esm2,
        weights=lambda wc: weight_files(PLM.esm2),  # new or changed weights rerun it
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
    """The plm chapter's values.json, from its guesses and its scan."""
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
