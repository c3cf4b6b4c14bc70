"""Rule manifest_table: the run's provenance manifest as an HTML table for the report."""

from tcrformer.io import read_json, write_text
from tcrformer.plotting.tables import manifest_html
from tcrformer.runner import run


def main(smk):
    write_text(smk.output[0], manifest_html(read_json(smk.input[0]), smk.params.title))


run(main, snakemake)
