"""The config check the workflow runs before any rule, as one function the tests call too.

    validate(config, schema_path)   raises ConfigError (one line naming the key), or fills in
                                    the schema's defaults, the paths of the files the
                                    workflow ships and the receptor's keys, and returns
                                    every chapter's typed settings, {chapter: Settings},
                                    made once

The schema first (with command-line strings turned into the numbers they stand for), then
every chapter's own checks (its `Settings.from_config`) and the figures'. It lives outside
`core`, which knows no chapter.
"""

from __future__ import annotations

from pathlib import Path

from tcrformer.chapters import packages, settings_of
from tcrformer.core.config import (
    apply_receptor,
    coerce_cli_strings,
    fill_defaults,
    first_schema_error,
    load_schema,
    locate_shipped_files,
    run_checks,
)
from tcrformer.figures import check_figures


def validate(config: dict, schema_path: str | Path) -> dict:
    schema = load_schema(schema_path)
    coerce_cli_strings(config, schema)
    error = first_schema_error(config, schema)
    if error is not None:
        raise error
    fill_defaults(config, schema)
    locate_shipped_files(config)
    apply_receptor(config)
    made = {}

    def chapter_check(chapter: str, settings: type):
        return lambda checked: made.__setitem__(chapter, settings.from_config(checked))

    chapters = packages()
    checks = [chapter_check(c, s) for c, s in zip(chapters, settings_of(chapters), strict=True)]
    run_checks(config, [*checks, check_figures])
    return made
