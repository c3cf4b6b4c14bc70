"""Rule notes_values: tcrformer.chapters.notes.compute.notes_values."""

import logging

from tcrformer.core.io import write_named
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer.chapters.notes.compute import notes_values
    from tcrformer.chapters.notes.settings import Settings

    results = notes_values(Settings.from_config(smk.params.config))  # raises if counts disagree
    write_named(smk.output, results)
    logging.getLogger("tcrformer").info(
        "notes: %d values; %s parameters, formulas and modules agree",
        len(results["values"]), f"{results['values']['params.total']:,}",
    )  # fmt: skip


run(main, snakemake)
