"""The `compare:` config key, typed: two finished runs, each checked before any rule runs.

Every problem is a ConfigError on the key `compare` naming the run: one run named or three,
a run named twice, a run with no folder under results/, a run without its manifest, or one
whose manifest lists a file that is gone. An empty list (the default) checks nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcrformer.core.config import ConfigError

KEY = "compare"
RESULTS = "results"
FOLDER = "compare"  # results/compare/<a>_vs_<b>/: never a run's own folder
MANIFEST = "manifest.json"
EXAMPLE = "snakemake --cores 2 compare --config compare='[paper, alt]'"


@dataclass(frozen=True)
class Settings:
    """The `compare:` key: no runs (nothing to compare) or two, and the results folder."""

    runs: tuple[str, ...]
    results: str = RESULTS

    @classmethod
    def from_config(cls, config: Mapping[str, Any], results: str | Path = RESULTS) -> Settings:
        runs = config.get(KEY) or []
        if isinstance(runs, str):
            runs = [runs]
        settings = cls(runs=tuple(str(run) for run in runs), results=str(results))
        if not settings.runs:
            return settings
        if len(settings.runs) != 2:
            raise ConfigError(
                KEY, list(settings.runs), f"name two runs, not {len(settings.runs)} ({EXAMPLE})"
            )
        if settings.runs[0] == settings.runs[1]:
            raise ConfigError(KEY, settings.runs[0], "the same run named twice: name two runs")
        for run in settings.runs:
            settings.check_run(run)
        return settings

    # The two runs ----------------------------------------------------------------------------

    @property
    def a(self) -> str:
        self.require_pair()
        return self.runs[0]

    @property
    def b(self) -> str:
        self.require_pair()
        return self.runs[1]

    def require_pair(self) -> None:
        """What the `compare` target asks of an empty key."""
        if len(self.runs) != 2:
            raise ConfigError(KEY, list(self.runs), f"name two runs to compare: {EXAMPLE}")

    @property
    def name(self) -> str:
        return f"{self.a}_vs_{self.b}"

    @property
    def root(self) -> Path:
        """The folder the manifests' paths are relative to (the workflow's directory)."""
        return Path(self.results).parent

    def folder(self, run: str) -> Path:
        return Path(self.results) / run

    def manifest(self, run: str) -> Path:
        return self.folder(run) / MANIFEST

    def output(self) -> Path:
        return Path(self.results) / FOLDER / self.name

    # The checks ------------------------------------------------------------------------------

    def check_run(self, run: str) -> None:
        """The run's folder, its manifest and every file the manifest lists are there."""
        folder, manifest = self.folder(run), self.manifest(run)
        if run == FOLDER:
            raise ConfigError(KEY, run, f"{folder}/ holds the comparisons, it is not a run")
        if not folder.is_dir():
            raise ConfigError(KEY, run, f"no such run: {folder}/ does not exist")
        finish = f"finish it: snakemake --cores 2 --config run={run}"
        if not manifest.is_file():
            raise ConfigError(KEY, run, f"run {run} is incomplete: no {manifest} ({finish})")
        try:
            files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError, TypeError):
            raise ConfigError(
                KEY, run, f"run {run} is incomplete: {manifest} is not a manifest ({finish})"
            ) from None
        missing = [path for path in sorted(files) if not (self.root / path).is_file()]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise ConfigError(
                KEY,
                run,
                f"run {run} is incomplete: {missing[0]}{more}, listed in {manifest}, "
                f"missing ({finish})",
            )

    def manifest_sha256(self) -> dict[str, str]:
        """{run: sha256 of its manifest.json}: a changed run reruns the comparison."""
        from tcrformer.core.io import sha256

        return {run: sha256(self.manifest(run)) for run in self.runs}
