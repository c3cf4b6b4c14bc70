"""The workflow deployed as the Snakemake workflow catalog deploys it: a folder of the user's
own that holds a Snakefile using the workflow as a module (`module tcrformer:` and `use rule
* from tcrformer`) and a config of its own, and nothing else. The files the workflow ships
are read from the workflow's repository, and everything the run writes lands in the user's
folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tcrformer.core import manifest
from tcrformer.core.config import (
    SCHEMA_PATH,
    ConfigError,
    load_schema,
    locate_shipped_files,
    run_checks,
)

from conftest import ROOT, snakemake

RUN = "deployed"  # a run name no other test writes, in the user's folder or the repository

# What `snakedeploy deploy-workflow` writes, with the workflow's local path for github(...).
MODULE_SNAKEFILE = """\
configfile: "config/config.yaml"


module tcrformer:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from tcrformer
"""


def deploy(folder: Path) -> Path:
    """The user's folder: the module Snakefile, and the .test config as its own config."""
    (folder / "config").mkdir(parents=True)
    snakefile = ROOT / "workflow" / "Snakefile"
    (folder / "Snakefile").write_text(MODULE_SNAKEFILE.format(snakefile=snakefile))
    config = yaml.safe_load((ROOT / ".test/config/config.yaml").read_text())
    config["run"] = RUN
    (folder / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder


def repository_changes() -> str:
    """What git sees changed in the repository: tracked files, and untracked ones it does not
    ignore."""
    done = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                          text=True, check=True, timeout=60)  # fmt: skip
    return done.stdout


def default_golden_file() -> str:
    return load_schema(SCHEMA_PATH)["properties"]["golden"]["properties"]["file"]["default"]


# The config's paths, from any folder ----------------------------------------------------------


def test_a_shipped_file_is_read_from_the_workflow_when_the_folder_has_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = locate_shipped_files({"golden": {"file": default_golden_file()}})
    assert Path(config["golden"]["file"]) == ROOT / default_golden_file()
    run_checks(config)


def test_the_folders_own_copy_of_a_shipped_file_wins(tmp_path, monkeypatch):
    """As after `snakedeploy deploy-workflow`, which copies config/ into the user's folder."""
    monkeypatch.chdir(tmp_path)
    own = tmp_path / default_golden_file()
    own.parent.mkdir(parents=True)
    own.write_text("entries: []\n")
    config = locate_shipped_files({"golden": {"file": default_golden_file()}})
    assert config["golden"]["file"] == default_golden_file()


def test_a_file_in_neither_place_is_named_with_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = locate_shipped_files({"golden": {"file": "config/golden/none.yaml"}})
    with pytest.raises(ConfigError) as error:
        run_checks(config)
    message = str(error.value)
    assert message.startswith("config error: golden.file = 'config/golden/none.yaml'")
    assert str(tmp_path / "config/golden/none.yaml") in message
    assert str(ROOT / "config/golden/none.yaml") in message


def test_the_manifest_names_the_workflows_commit_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert manifest.git_state()["commit"] == git_head()


# The module, from a fresh folder --------------------------------------------------------------


def test_the_module_plans_every_job_from_a_fresh_folder(tmp_path):
    user = deploy(tmp_path / "analysis")
    done = snakemake(user, "-n")
    assert done.returncode == 0, done.stderr[-3000:]
    for rule in ("train_reversal", "golden_check", "manifest"):
        assert f"rule {rule}:" in done.stdout, rule
    assert f"results/{RUN}/golden.ok" in done.stdout


# The whole .test run from the user's folder, killed and recovered on the way:
# test_reliability.test_a_deployed_run_killed_three_times_recovers_to_the_clones_bytes.


def git_head() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True, timeout=60)  # fmt: skip
    return done.stdout.strip()
