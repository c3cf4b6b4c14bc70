"""The chapters of the pipeline, one package each, every package of the same form:

    settings.py     Settings.from_config(config): the chapter's config section, typed, with
                    every check of its own (a bad value is a ConfigError naming its key)
    compute.py      one function per rule of the chapter, named as the rule: settings in,
                    {output name: content} out (io.write_named writes each to its file)
    figure_data.py  what the chapter's figures draw: FILES (name -> result file) and
                    read(paths) -> one typed object; the writer is compute's output

A rule `x` of chapter `c` runs workflow/scripts/x.py, which calls tcrformer.chapters.c.compute.x.
"""

from __future__ import annotations

import importlib

PACKAGES = ("toy", "notes", "plm", "reversal", "ensemble", "claims", "compare")
"""Every chapter package (not only those whose values the golden check merges)."""


def module(chapter: str, part: str):
    """tcrformer.chapters.<chapter>.<part> (settings, compute or figure_data)."""
    return importlib.import_module(f"tcrformer.chapters.{chapter}.{part}")


def settings_of(chapters: tuple[str, ...] = PACKAGES) -> list[type]:
    """The Settings class of each chapter."""
    return [module(chapter, "settings").Settings for chapter in chapters]
