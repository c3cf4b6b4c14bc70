"""Rule manifest: versions, git state, config digest and the sha256 of every result file."""

from tcrformer import manifest
from tcrformer.io import write_json
from tcrformer.runner import run


def main(smk):
    write_json(smk.output[0], manifest.build(smk.params.produced_by, smk.params.config))


run(main, snakemake)
