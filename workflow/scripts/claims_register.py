"""Rule claims_register: tcrformer.chapters.claims.compute.claims_register."""

import hashlib
from pathlib import Path

from tcrformer.chapters.claims.compute import claims_register
from tcrformer.chapters.claims.settings import Settings
from tcrformer.core.io import write_named
from tcrformer.core.manifest import git_state
from tcrformer.core.runner import run


def main(smk):
    settings = Settings.from_config(smk.config)
    claims_file = hashlib.sha256(Path(smk.params.claims_file).read_bytes()).hexdigest()
    write_named(smk.output, claims_register(settings, claims_file, git_state()["commit"]))


run(main, snakemake)
