"""Glue for the thin rule scripts: logging into the rule's log, one-line errors.

A rule script is `main(snakemake)` wrapped by `run(main)`. Errors the user can fix
(a bad config value, an unreadable file) become one line on stderr and in the log, and a
non-zero exit, instead of a traceback. Anything else is a bug: its traceback goes to the
rule's log too (under SLURM the console is a job file elsewhere; the log is where users
look), and the exception is raised on.

Before main runs, the process's numerics are pinned (`tcrformer.core.numerics`): torch reads
them when it is imported, so rule scripts import torch inside main, never at the top,
and call `torch_numerics(smk)` before they compute.

`run` also reads the clocks as main starts (`job_started`, while main runs): a job that
records what it used (core.usage) counts from there, its script's start.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from tcrformer.core import numerics, usage
from tcrformer.core.config import ConfigError
from tcrformer.core.io import ResultFileError

_PINNED: numerics.Pinned | None = None
_STARTED: usage.Reading | None = None  # set while main runs


class UserError(RuntimeError):
    """An error the user can fix; its message says what to change."""


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ConfigError, ResultFileError, UserError)


def setup_logging(log_path: str | None) -> logging.Logger:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )
    return logging.getLogger("tcrformer")


def run(main: Callable[[Any], None], smk: Any) -> None:
    """Call main(smk) with logging set up from smk.log; turn expected errors into one line."""
    global _PINNED, _STARTED
    _STARTED = usage.reading()
    log = setup_logging(smk.log[0] if len(smk.log) else None)
    try:
        _PINNED = numerics.pin(numerics.Numerics.from_config(smk.config.get("numerics")))
        for name, value in _PINNED.replaced.items():
            log.info("numerics: %s=%s in the environment replaced (portable mode)", name, value)
        if _PINNED.notice:
            log.warning("numerics: %s", _PINNED.notice)
        main(smk)
    except EXPECTED_ERRORS as err:
        log.error("%s", err)
        sys.exit(1)
    except Exception:
        log.exception("a bug, not a problem with your input; please report it with this log")
        raise
    finally:
        _STARTED = None


def job_started() -> usage.Reading | None:
    """The clocks as this process's rule script started (`run`); None outside `run`."""
    return _STARTED


def pinned(smk: Any) -> numerics.Pinned:
    """The numerics this process was pinned to (by `run`, or now)."""
    return _PINNED or numerics.pin(numerics.Numerics.from_config(smk.config.get("numerics")))


def torch_numerics(smk: Any) -> dict[str, Any]:
    """Import torch under the pinned numerics, set its threads; returns what is in force."""
    in_force = pinned(smk)
    numerics.configure_torch(in_force, getattr(smk, "threads", None))
    described = numerics.describe(in_force)
    logging.getLogger("tcrformer").info("numerics: %s", numerics.one_line(described))
    return described
