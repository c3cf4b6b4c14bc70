"""Rule notes_values: the study-notes chapter's values, PE table and parameter breakdown."""

import logging

from tcrformer.io import write_csv, write_json, write_npy, write_text
from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    from tcrformer import counting, notes

    cfg = smk.params.cfg
    breakdown = counting.breakdown_table(notes.dims_of(cfg))
    write_npy(smk.output.pe_table, notes.pe_table(cfg))
    write_csv(smk.output.breakdown_csv, breakdown)
    write_text(smk.output.breakdown_md, counting.breakdown_markdown(breakdown))
    values = notes.chapter_values(cfg)  # raises if a formula disagrees with the modules
    write_json(smk.output.values, values)
    logging.getLogger("tcrformer").info(
        "notes: %d values; %s parameters, formulas and modules agree",
        len(values), f"{values['params.total']:,}",
    )  # fmt: skip


run(main, snakemake)
