"""The seed-ensemble figure: the loss over seeds as bands, and held-out exact as a histogram."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tcrformer.plotting import style
from tcrformer.plotting.reversal import LOSS_COLOUR


def _draw_loss_bands(ax: Axes, bands: pd.DataFrame, published: Mapping[int, float]) -> None:
    steps = bands["step"]
    ax.fill_between(steps, bands["min"], bands["max"], color=LOSS_COLOUR, alpha=0.15, lw=0,
                    label="min–max over seeds")  # fmt: skip
    ax.fill_between(steps, bands["p5"], bands["p95"], color=LOSS_COLOUR, alpha=0.35, lw=0,
                    label="5–95 % of seeds")  # fmt: skip
    ax.plot(steps, bands["median"], color=LOSS_COLOUR, lw=1.0, label="median over seeds")
    if published:
        at, loss = zip(*sorted(published.items()), strict=True)
        ax.plot(at, loss, "o", color=style.HIGHLIGHT, ms=5, label="the explainer's losses")
    ax.set_xlim(0, steps.max())
    ax.set_ylim(0, None)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (cross-entropy, nats per token)")
    ax.set_title("the training loss, every seed")
    ax.legend(loc="upper right")


def _draw_heldout(ax: Axes, exact: np.ndarray, eval_n: int, published: float | None) -> None:
    low = int(min(exact.min(), published if published is not None else exact.min()))
    edges = np.arange(low, eval_n + 2) - 0.5
    ax.hist(exact, bins=edges, color=LOSS_COLOUR, alpha=0.8, label=f"{exact.size} seeds")
    if published is not None:
        ax.axvline(published, color=style.HIGHLIGHT, ls="--", lw=1.5,
                   label=f"the explainer: {published:g}")  # fmt: skip
    ax.set_xlabel(f"held-out strings reversed exactly (of {eval_n})")
    ax.set_ylabel("seeds")
    ax.set_title("held-out exact reversals")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left")


def figS3_seed_ensemble(data) -> Figure:
    """Left: loss median, 5-95 % and min-max over seeds. Right: held-out exact per seed."""
    fig = style.new_figure(12.5, 4.8)
    loss_ax, exact_ax = fig.subplots(1, 2, width_ratios=(1.4, 1))
    _draw_loss_bands(loss_ax, data.loss_bands, data.published_losses)
    exact = data.heldout_exact
    _draw_heldout(exact_ax, exact, data.eval_n, data.published_exact)
    fig.suptitle(f"The {data.recipe} recipe over {exact.size} seeds")
    return fig
