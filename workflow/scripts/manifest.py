"""Rule manifest: versions, git state, config digest, numerics and every file's sha256."""

from tcrformer.core import manifest
from tcrformer.core.io import read_json, write_json
from tcrformer.core.runner import run, torch_numerics


def main(smk):
    numerics = {rule: read_json(path) for rule, path in smk.params.numerics.items()}
    numerics["manifest"] = torch_numerics(smk)
    built = manifest.build(smk.params.produced_by, smk.params.config, numerics=numerics)
    write_json(smk.output[0], built)


run(main, snakemake)
