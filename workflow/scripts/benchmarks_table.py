"""Rule benchmarks_table: the run's benchmark files as one table (CSV and HTML)."""

from tcrformer.core.benchmarks import read_benchmarks
from tcrformer.core.io import write_csv, write_text
from tcrformer.core.runner import run
from tcrformer.plotting.tables import benchmarks_html


def main(smk):
    frame = read_benchmarks(smk.params.folder)
    write_csv(smk.output.csv, frame)
    write_text(smk.output.html, benchmarks_html(frame, smk.params.title))


run(main, snakemake)
