"""The claims' figures, C1-C7: rows of the figure table that this package declares, the
library's table (tcrformer.figures) naming none of them. workflow/claims/claims.smk makes one
rule per row, as rules/figures.smk does for the library's: each draws the claims' figure
data (figure_data.py) with its draw function of the same id (plotting.py), under the
claims' report section, with its caption workflow/claims/report/figures/<id>.rst.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from tcrclaims import figure_data
from tcrformer.figures import Figure

SECTION = "7. Claims"  # the claims' section of the Snakemake report


@dataclass(frozen=True)
class ClaimsFigure(Figure):
    """A figure of the claims' data: its reader, draw functions and report section are this
    package's."""

    chapter: str | None = "claims"

    @property
    def category(self) -> str:
        return SECTION

    @property
    def module(self) -> str:
        return "tcrclaims.plotting"

    def figure_data(self) -> ModuleType:
        return figure_data

    def draw_function(self) -> Callable:
        from tcrclaims import plotting  # matplotlib: only when a figure is drawn

        return getattr(plotting, self.id)


FIGURES = (
    ClaimsFigure("figC1_training_arms"),
    ClaimsFigure("figC2_gradients_and_calibration"),
    ClaimsFigure("figC3_attention_importance"),
    ClaimsFigure("figC4_positional_encoding"),
    ClaimsFigure("figC5_attention_cost"),
    ClaimsFigure("figC6_beam"),
    ClaimsFigure("figC7_effects"),
)
BY_ID = {figure.id: figure for figure in FIGURES}
