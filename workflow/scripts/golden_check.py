"""Rules golden_check(_chapter): compare values.json with the golden file, write the report."""

from tcrformer import golden
from tcrformer.io import read_json, write_json, write_text
from tcrformer.runner import run


def main(smk):
    entries, inputs = golden.load_golden(smk.input.golden)
    values = read_json(smk.input.values)
    chapter = smk.wildcards.get("chapter")
    rows, extras = golden.check(
        values, entries, inputs, smk.params.config, chapters={chapter} if chapter else None
    )
    write_json(smk.output.json, golden.report_json(rows, extras, smk.input.golden))
    write_text(
        smk.output.md, golden.report_markdown(rows, extras, smk.params.title, smk.input.golden)
    )


run(main, snakemake)
