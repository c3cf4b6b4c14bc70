"""The figure table: every figure of the report, what it reads and what draws it.

workflow/rules/figures.smk makes one rule per row, as showyourwork does. A figure's id is
the name of its rule, of its files (results/<run>/figures/<id>.png and .svg), of its caption
(workflow/report/figures/<id>.rst) and of its draw function in tcrformer.plotting.<chapter>,
which takes the chapter's figure data (tcrformer.chapters.<chapter>.figure_data) and the
row's options, taken from the config, and returns a matplotlib Figure.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TOY = "1. Toy Transformer"
PLM = "2. Protein language models"
NOTES = "3. Study notes"
REVERSAL = "4. Reversal training"
SCHEMATIC = "5. Schematics"
ENSEMBLE = "6. Seed ensembles"
CLAIMS = "7. Claims"


def _none(config: Mapping) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Figure:
    id: str
    chapter: str | None  # whose figure data it draws; None: a schematic, it reads no results
    category: str  # its section of the Snakemake report
    options: Callable[[Mapping], dict[str, Any]] = field(default=_none)  # config -> kwargs

    @property
    def module(self) -> str:
        """Where its draw function lives."""
        return f"tcrformer.plotting.{self.chapter or 'schematics'}"

    def files(self) -> dict[str, str]:
        """{name: file in the chapter's results folder} of the data it reads."""
        if self.chapter is None:
            return {}
        return importlib.import_module(f"tcrformer.chapters.{self.chapter}.figure_data").FILES


FIGURES = (
    Figure("fig01_toy_input", "toy", TOY),
    Figure("fig02_head_plane", "toy", TOY),
    Figure("fig03_attention_row", "toy", TOY),
    Figure("fig04_heads", "toy", TOY),
    Figure("figS1_sqrt_dk_scaling", "toy", TOY),
    Figure("fig07_masked_guesses", "plm", PLM),
    Figure("fig07_cdr3_scan", "plm", PLM),
    Figure(
        "fig09_positional_encoding",
        "notes",
        NOTES,
        lambda config: {"wave_dims": config["figures"]["wave_dims"]},
    ),
    Figure("figS2_param_breakdown", "notes", NOTES),
    Figure("fig12_teacher_forcing", "notes", NOTES),
    Figure("fig13_training", "reversal", REVERSAL),
    Figure("fig05_pre_ln_block", None, SCHEMATIC),
    Figure(
        "fig06_encoder_decoder",
        None,
        SCHEMATIC,
        lambda config: {
            "cdr3": config["toy"]["sequence"],
            "peptide": config["figures"]["peptide"],
            "focus": config["toy"]["focus_position"],
        },
    ),
    Figure(
        "fig08_transformer",
        None,
        SCHEMATIC,
        lambda config: {
            "n_layers": config["notes"]["num_layers"],
            "d_model": config["notes"]["d_model"],
        },
    ),
    Figure(
        "fig10_multihead_split",
        None,
        SCHEMATIC,
        lambda config: {
            "d_model": config["notes"]["d_model"],
            "n_heads": config["notes"]["num_heads"],
        },
    ),
    Figure("fig11_post_pre_ln", None, SCHEMATIC),
    Figure("figS3_seed_ensemble", "ensemble", ENSEMBLE),
    Figure("figC1_training_arms", "claims", CLAIMS),
    Figure("figC2_gradients_and_calibration", "claims", CLAIMS),
    Figure("figC3_attention_importance", "claims", CLAIMS),
    Figure("figC4_positional_encoding", "claims", CLAIMS),
    Figure("figC5_attention_cost", "claims", CLAIMS),
    Figure("figC6_recurrent_and_beam", "claims", CLAIMS),
)
BY_ID = {figure.id: figure for figure in FIGURES}


def draw(figure_id: str, paths: Mapping[str, str], options: Mapping[str, Any]):
    """Read the figure's data from `paths` ({name: file}) and draw it."""
    figure = BY_ID[figure_id]
    data = None
    if figure.chapter is not None:
        reader = importlib.import_module(f"tcrformer.chapters.{figure.chapter}.figure_data")
        data = reader.read(paths)
    return getattr(importlib.import_module(figure.module), figure.id)(data, **options)
