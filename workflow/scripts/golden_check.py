"""Rules golden_check(_chapter): compare values.json with the golden file, write the report."""

from tcrformer.core import golden, golden_file
from tcrformer.core.io import read_json, write_json, write_text
from tcrformer.core.runner import run


def main(smk):
    entries, inputs = golden_file.load_golden(smk.input.golden)
    values = read_json(smk.input.values)
    chapter = smk.wildcards.get("chapter")
    rows, extras = golden.check(
        values, entries, inputs, smk.params.config, chapters={chapter} if chapter else None
    )
    paths = smk.input.get("numerics", [])
    paths = [paths] if isinstance(paths, str) else list(paths)
    numerics = {f"training ({path})": read_json(path) for path in paths}
    method = golden_file.read_method(smk.input.golden)
    write_json(
        smk.output.json, golden.report_json(rows, extras, smk.input.golden, numerics, method)
    )
    report = golden.report_markdown(
        rows, extras, smk.params.title, smk.input.golden, numerics, method
    )
    write_text(smk.output.md, report)


run(main, snakemake)
