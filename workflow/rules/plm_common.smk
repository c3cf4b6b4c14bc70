# Helpers of the plm chapter (kept apart from its rules, as snakemake --lint asks).

from tcrformer.plm.weights import weight_files
from tcrformer.plm.settings import Esm2Options


def esm2_weights(wildcards):
    """Weight files that exist now: new or changed weights make plm_esm2 run again."""
    esm2 = config["plm"]["esm2"]
    return weight_files(
        Esm2Options(esm2["model"], esm2["checkpoint"], esm2["required"])
    )
