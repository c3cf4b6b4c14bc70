"""Rule report_landing: the report's front page for this run."""

from tcrformer.core.io import read_json, write_text
from tcrformer.core.runner import run
from tcrformer.plotting.tables import landing_html


def main(smk):
    page = landing_html(
        smk.params.run, read_json(smk.input.manifest), read_json(smk.input.golden),
        smk.params.chapters,
    )  # fmt: skip
    write_text(smk.output[0], page)


run(main, snakemake)
