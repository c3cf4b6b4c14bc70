"""The config check the workflow runs before any rule, as one function the tests call too.

    validate(config, schema_path)   raises ConfigError (one line naming the key), or fills in
                                    the schema's defaults and returns

The schema first (with command-line strings turned into the numbers they stand for), then
every chapter's own checks (its `Settings.from_config`) and the figures'. It lives outside
`core`, which knows no chapter.
"""

from __future__ import annotations

from pathlib import Path

from tcrformer.chapters import settings_of
from tcrformer.core.config import coerce_cli_strings, first_schema_error, load_schema, run_checks
from tcrformer.figures import check_figures


def validate(config: dict, schema_path: str | Path) -> None:
    from snakemake.utils import validate as fill_defaults

    schema = load_schema(schema_path)
    coerce_cli_strings(config, schema)
    error = first_schema_error(config, schema)
    if error is not None:
        raise error
    fill_defaults(config, str(schema_path), set_default=True)
    run_checks(config, [*(s.from_config for s in settings_of()), check_figures])
