# Helpers of the plm chapter (kept apart from its rules, as snakemake --lint asks).

from tcrformer.chapters.plm.weights import weight_files

PLM = settings("plm")


def esm2_weights(wildcards):
    """Weight files that exist now: new or changed weights make plm_esm2 run again."""
    return weight_files(PLM.esm2)
