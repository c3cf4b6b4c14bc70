"""Rules golden_gate(_chapter): fail the run on any FAIL in the golden report (golden.strict)."""

from pathlib import Path

from tcrformer.core.io import read_json, write_text
from tcrformer.core.runner import UserError, run


def main(smk):
    report = read_json(smk.input[0])
    failed = [row["key"] for row in report["rows"] if row["status"] == "FAIL"]
    counts = ", ".join(f"{n} {status}" for status, n in report["summary"].items())
    where = Path(smk.input[0]).with_suffix(".md")
    if failed and smk.params.strict:
        shown = ", ".join(failed[:6]) + (", ..." if len(failed) > 6 else "")
        raise UserError(f"golden check failed: {counts} ({shown}); see {where}")
    write_text(smk.output[0], f"{counts}\n")


run(main, snakemake)
