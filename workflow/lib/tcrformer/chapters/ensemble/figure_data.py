"""What the ensemble figure draws, written by ensemble_summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tcrformer.core.io import read_csv, read_json

if TYPE_CHECKING:  # imported where used: the Snakefile reads FILES at start-up
    import pandas as pd

FILES = {
    "figure_data": "figure_data.json",
    "seeds": "seeds.csv",
    "loss_bands": "loss_bands.csv",
}


@dataclass(frozen=True)
class EnsembleFigures:
    seeds: pd.DataFrame  # one row per seed: seed and every stochastic key
    loss_bands: pd.DataFrame  # step, min, p5, median, p95, max
    recipe: str
    eval_n: int
    published_losses: dict[int, float]  # the explainer's {step: loss}, if any
    published_exact: float | None

    @property
    def heldout_exact(self):
        return self.seeds[f"{self.recipe}.heldout_exact"].to_numpy()


def read(paths: Mapping[str, str]) -> EnsembleFigures:

    data = read_json(paths["figure_data"])
    data["published_losses"] = {int(s): v for s, v in data["published_losses"].items()}
    return EnsembleFigures(
        seeds=read_csv(paths["seeds"]), loss_bands=read_csv(paths["loss_bands"]), **data
    )
