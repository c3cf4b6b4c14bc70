"""The figure table: every figure of the library's chapters, what it reads and what draws it.

workflow/rules/figures.smk makes one rule per row, as showyourwork does. A figure's id is
the name of its rule, of its files (results/<run>/figures/<id>.png and .svg), of its caption
(workflow/report/figures/<id>.rst) and of its draw function in tcrformer.plotting.<chapter>,
which takes the chapter's figure data (tcrformer.chapters.<chapter>.figure_data) and the
row's options, taken from the config, and returns a matplotlib Figure.

The table names the library's figures only. A unit outside the library declares its own
rows, of a subclass of Figure that says where its figure data, its draw functions and its
report section are, and makes their rules in its own rule file.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from tcrformer.chapters import records

# The report's sections that are no chapter's: the run, the golden check and the schematics.
# A chapter's section is its record's (tcrformer.chapters.records).
SECTIONS = {
    "run": "0. Run",
    "golden": "0. Golden check",
    "schematic": "5. Schematics",
}
CATEGORIES = {**SECTIONS, **{chapter.name: chapter.category for chapter in records()}}
"""{name: report section}: every `category=` of the rules reads this."""


def _none(config: Mapping) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Figure:
    id: str
    chapter: str | None  # whose figure data it draws; None: a schematic, it reads no results
    options: Callable[[Mapping], dict[str, Any]] = field(default=_none)  # config -> kwargs

    @property
    def category(self) -> str:
        """Its section of the Snakemake report: its chapter's."""
        return CATEGORIES[self.chapter or "schematic"]

    @property
    def module(self) -> str:
        """Where its draw function lives."""
        return f"tcrformer.plotting.{self.chapter or 'schematics'}"

    def figure_data(self) -> ModuleType | None:
        """The module of the data it draws (FILES, read): its chapter's; None for a schematic."""
        if self.chapter is None:
            return None
        return importlib.import_module(f"tcrformer.chapters.{self.chapter}.figure_data")

    def draw_function(self) -> Callable:
        """Its draw function: (figure data, **options) -> a matplotlib Figure."""
        return getattr(importlib.import_module(self.module), self.id)

    def files(self) -> dict[str, str]:
        """{name: file in the chapter's results folder} of the data it reads."""
        data = self.figure_data()
        return {} if data is None else data.FILES

    def draw(self, paths: Mapping[str, str], options: Mapping[str, Any]):
        """Read its data from `paths` ({name: file}) and draw it."""
        data = self.figure_data()
        return self.draw_function()(None if data is None else data.read(paths), **options)

    def drawn_from(self) -> str:
        """Its caption's list of what it reads, from its declared inputs (rst)."""
        names = [f"``{self.chapter}/{file}``" for file in self.files().values()]
        if not names:
            return "nothing but the config: a schematic reads no results"
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


FOLDER = "figures"  # results/<run>/figures/: every figure, as PNG and SVG
FORMATS = ("png", "svg")


def figure_paths(results, figure_id: str) -> list[str]:
    """The files one figure of the table is drawn to, under a run's results folder."""
    return [f"{results}/{FOLDER}/{figure_id}.{kind}" for kind in FORMATS]


FIGURES = (
    Figure("fig01_toy_input", "toy"),
    Figure("fig02_head_plane", "toy"),
    Figure("fig03_attention_row", "toy"),
    Figure("fig04_heads", "toy"),
    Figure("figS1_sqrt_dk_scaling", "toy"),
    Figure("fig07_masked_guesses", "plm"),
    Figure("fig07_cdr3_scan", "plm"),
    Figure(
        "fig09_positional_encoding",
        "notes",
        lambda config: {"wave_dims": wave_dims(config)},
    ),
    Figure("figS2_param_breakdown", "notes"),
    Figure("fig12_teacher_forcing", "notes"),
    Figure("fig13_training", "reversal"),
    Figure("fig05_pre_ln_block", None),
    Figure(
        "fig06_encoder_decoder",
        None,
        lambda config: {
            "cdr3": config["toy"]["sequence"],
            "peptide": config["figures"]["peptide"],
            "focus": config["toy"]["focus_position"],
        },
    ),
    Figure(
        "fig08_transformer",
        None,
        lambda config: {
            "n_layers": config["notes"]["num_layers"],
            "d_model": config["notes"]["d_model"],
        },
    ),
    Figure(
        "fig10_multihead_split",
        None,
        lambda config: {
            "d_model": config["notes"]["d_model"],
            "n_heads": config["notes"]["num_heads"],
        },
    ),
    Figure("fig11_post_pre_ln", None),
    Figure("figS3_seed_ensemble", "ensemble"),
)
BY_ID = {figure.id: figure for figure in FIGURES}


def draw(figure_id: str, paths: Mapping[str, str], options: Mapping[str, Any]):
    """Read the table's figure's data from `paths` ({name: file}) and draw it."""
    return BY_ID[figure_id].draw(paths, options)


WAVE_FRACTIONS = (0, 1 / 8, 1 / 4)  # figures.wave_dims null: where, along notes.d_model


def wave_dims(config) -> list[int]:
    """Fig. 9's wave dimensions: figures.wave_dims, or spread over notes.d_model."""
    from tcrformer.models.positional import spread_dims

    chosen = (config.get("figures") or {}).get("wave_dims")
    return (
        list(chosen)
        if chosen is not None
        else spread_dims(config["notes"]["d_model"], WAVE_FRACTIONS)
    )


def check_figures(config) -> None:
    """What the figures need of the config beyond the schema: Fig. 9 draws notes' positional
    table, so its wave dimensions must exist there."""
    from tcrformer.core.config import ConfigError

    d_model = (config.get("notes") or {}).get("d_model")
    for i, dim in enumerate((config.get("figures") or {}).get("wave_dims") or []):
        if d_model is not None and dim >= d_model:
            raise ConfigError(
                f"figures.wave_dims[{i}]", dim, f"not below notes.d_model = {d_model}"
            )
