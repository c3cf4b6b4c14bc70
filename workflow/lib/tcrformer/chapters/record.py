"""What a chapter declares of itself, once, in its package's __init__.py:

    CHAPTER = Chapter(name="toy", category="1. Toy Transformer", writes_values=True)

The workflow reads the records (tcrformer.chapters.records): it includes each chapter's rule
file, merges and judges the values of those that write values (the chapters of `all`), and
files each chapter's figures under its report section.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    name: str  # its package, its rule file (workflow/rules/<name>.smk), its results folder
    category: str  # its section of the Snakemake report, "<n>. <title>": sections sort by it
    writes_values: bool  # its values.json joins the run's and its golden check: part of `all`
