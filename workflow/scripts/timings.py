"""Rule timings: the explainer's wall-clock values (report-only) beside this run's."""

from tcrformer.core import golden, golden_file
from tcrformer.core.io import read_json, write_json, write_text
from tcrformer.core.runner import run


def main(smk):
    entries, _ = golden_file.load_golden(smk.input.golden)
    measured = {key: read_json(path)[field] for key, (path, field) in smk.params.sources.items()}
    rows, _ = golden.check({}, entries, report_only=measured)
    rows = [row for row in rows if row.status == golden.REPORT]
    write_json(smk.output.json, golden.report_json(rows, [], smk.input.golden))
    title = "wall-clock values (machine-dependent, never PASS or FAIL)"
    write_text(smk.output.md, golden.report_markdown(rows, [], title, smk.input.golden))


run(main, snakemake)
