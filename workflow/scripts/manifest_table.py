"""Rule manifest_table: the run's manifest as an HTML table for the Snakemake report."""

from tcrformer.core.io import read_json, write_text
from tcrformer.core.runner import run
from tcrformer.plotting.tables import manifest_html


def main(smk):
    write_text(smk.output[0], manifest_html(read_json(smk.input[0]), smk.params.title))


run(main, snakemake)
