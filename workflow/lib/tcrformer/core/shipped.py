"""The files the workflow ships in its repository (the schema, the golden file and its
bands), found from whatever folder a run works in.

A run works in its own folder: results and Snakemake's records go there, and a relative
path in its config is read there first, so a user's own copy of a shipped file (the config/
folder that `snakedeploy deploy-workflow` copies) wins. A relative path that is not there is
read from the workflow's repository, where the default config points: a folder that uses
the workflow as a module needs no copy at all.
"""

from __future__ import annotations

from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[4]
"""The workflow's repository: this file is workflow/lib/tcrformer/core/shipped.py in it."""


def shipped(path: str | Path) -> Path:
    """`path` where it is found: as given (absolute, or relative to the working folder), else
    the repository's file of that relative path; `path` unchanged when neither exists, for
    the caller to report."""
    path = Path(path)
    if path.is_absolute() or path.exists():
        return path
    in_repository = REPOSITORY / path
    return in_repository if in_repository.exists() else path
