"""Rule plm_scan: every CDR3 position hidden in turn with every available model."""

from tcrformer.io import read_json, write_csv, write_json
from tcrformer.plm import chapter, settings
from tcrformer.runner import run, torch_numerics


def main(smk):
    torch_numerics(smk)
    esm2_available = read_json(smk.input.esm2)["available"]
    table, summary = chapter.scan_result(settings.from_config(smk.params.cfg), esm2_available)
    write_csv(smk.output.table, table)
    write_json(smk.output.summary, summary)


run(main, snakemake)
