"""Rule claims_register: tcrclaims.compute.claims_register."""

import hashlib
from pathlib import Path

from tcrclaims.compute import claims_register
from tcrclaims.settings import Settings
from tcrformer.core.io import write_named
from tcrformer.core.manifest import git_state
from tcrformer.core.runner import run


def sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main(smk):
    settings = Settings.from_config(smk.config)
    reviews = {path: sha256(path) for path in smk.params.reviews}
    registered = claims_register(settings, sha256(smk.params.claims_file), git_state()["commit"],
                                 reviews)  # fmt: skip
    write_named(smk.output, registered)


run(main, snakemake)
