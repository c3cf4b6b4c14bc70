"""Rule compare_runs: tcrformer.chapters.compare.compute.compare_runs."""

from pathlib import Path

from tcrformer.core.io import write_named
from tcrformer.core.runner import run


def main(smk):
    from tcrformer.chapters.compare.compute import compare_runs
    from tcrformer.chapters.compare.settings import Settings
    from tcrformer.core.golden_file import load_golden

    folders = [Path(folder) for folder in smk.params.folders]
    config = {"compare": [folder.name for folder in folders]}
    settings = Settings.from_config(config, results=folders[0].parent)
    entries, _ = load_golden(smk.input.golden)
    write_named(smk.output, compare_runs(settings, entries))


run(main, snakemake)
