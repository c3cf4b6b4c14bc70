# Provenance: the manifest of a run (versions, git state, config digest, a sha256 per file).


rule manifest:
    input:
        files=lambda wc: sorted(PRODUCED_BY),
        gate=f"{RESULTS}/golden.ok",
    output:
        report(
            f"{RESULTS}/manifest.json",
            caption="../report/manifest.rst",
            category="0. Golden check",
        ),
    log:
        f"{LOGS}/manifest.log",
    conda:
        "../../envs/numeric.yaml"
    params:
        produced_by=lambda wc: dict(PRODUCED_BY),
        numerics=lambda wc: numerics_records(),
        config=config,
    script:
        "../scripts/manifest.py"
