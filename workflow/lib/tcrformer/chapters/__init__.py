"""The chapters of the pipeline, one package each, every package of the same form:

    __init__.py     CHAPTER = Chapter(...) (chapters.record): its name, report section, and
                    whether its values are judged in `all`; nothing else lists the chapters
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
import pkgutil

from tcrformer.chapters.record import Chapter


def _found() -> list[str]:
    """The names of the packages in this folder."""
    return sorted(found.name for found in pkgutil.iter_modules(__path__) if found.ispkg)


def records() -> tuple[Chapter, ...]:
    """The record of every package that declares one, in the report's order."""
    packaged = (importlib.import_module(f"tcrformer.chapters.{name}") for name in _found())
    declared = (getattr(package, "CHAPTER", None) for package in packaged)
    return tuple(sorted((r for r in declared if r is not None), key=lambda r: r.category))


def packages() -> tuple[str, ...]:
    """Every chapter package: those with a record in the report's order, then the others.
    The config check runs their settings in this order, so a chapter that reads another's
    section (ensemble: reversal's) names its own keys only once that one has passed."""
    declared = [chapter.name for chapter in records()]
    return (*declared, *(name for name in _found() if name not in declared))


def module(chapter: str, part: str):
    """tcrformer.chapters.<chapter>.<part> (settings, compute or figure_data)."""
    return importlib.import_module(f"tcrformer.chapters.{chapter}.{part}")


def settings_of(chapters: tuple[str, ...]) -> list[type]:
    """The Settings class of each chapter."""
    return [module(chapter, "settings").Settings for chapter in chapters]
