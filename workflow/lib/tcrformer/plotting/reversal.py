"""Figures of the reversal chapter (explainer section 10.9): Fig. 13, training, cross-attention."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tcrformer.plotting import style

LOSS_COLOUR = "#3b7dd8"
EOS = "<eos>"


def written_tokens(output: str, rows: int) -> list[str]:
    """Tick labels of the decoder rows: the letters written, then <eos> for the last row."""
    tokens = list(output)[:rows]
    return tokens + [EOS] * (rows - len(tokens))


def _draw_loss(
    ax: Axes,
    losses: pd.DataFrame,
    report: Mapping[int, float],
    floor: float,
    last_step: int | None = None,
) -> None:
    ax.plot(
        losses["step"],
        losses["loss"],
        color=LOSS_COLOUR,
        lw=0.6,
        alpha=0.9,
        label="training loss (one batch per step)",
    )
    if report:
        steps, reported = zip(*report.items(), strict=True)
        ax.plot(steps, reported, "o", color="black", ms=4, label="values reported")
        for step, loss in report.items():
            ax.annotate(
                f"{loss:.3f}",
                (step, loss),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.axhline(
        floor,
        color=style.HIGHLIGHT,
        ls="--",
        lw=1.2,
        label=f"label-smoothing floor {floor:.3f}",
    )
    ax.set_xlim(0, last_step or losses["step"].max())
    ax.set_ylim(0, None)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (cross-entropy, nats per token)")
    ax.set_title("the training loss")
    ax.legend(loc="upper right")


def _draw_cross_attention(
    fig: Figure, ax: Axes, weights: np.ndarray, source: str, output: str, title: str
) -> None:
    image = ax.imshow(weights, cmap=style.SEQUENTIAL_CMAP, vmin=0, vmax=1)
    style.label_residues(ax, source, axis="x", rotate=True)
    ax.set_yticks(range(weights.shape[0]), written_tokens(output, weights.shape[0]))
    ax.set_xlabel("source residue (read by the encoder)")
    ax.set_ylabel("token being written (decoder)")
    ax.set_title(title)
    style.colorbar(fig, image, ax, "attention weight (fraction)")


def draw_loss(losses: pd.DataFrame, floor: float, steps: int | None = None) -> Figure:
    """Fig. 13's loss panel alone, for a training still running (the companion notebook
    redraws it as it goes): the axis runs to `steps`, the steps planned."""
    fig = style.new_figure(6.5, 3.6)
    _draw_loss(fig.subplots(), losses, {}, floor, steps)
    return fig


def fig13_training(data) -> Figure:
    """Fig. 13: the loss with its floor (left); cross-attention, mean over heads (right).

    `data.attention` is (heads, rows written, source length) from the evaluation.
    """
    fig = style.new_figure(12.5, 5.0)
    loss_ax, attention_ax = fig.subplots(1, 2, width_ratios=(1.15, 1))
    _draw_loss(loss_ax, data.losses, data.report_losses, data.floor)
    heads = data.attention.shape[0]
    title = f"cross-attention, decoder layer {data.layer}, mean of {heads} heads"
    title += f"\n{data.antidiagonal_mean:.0%} on the mirror residue, on average"
    mean = data.attention.mean(axis=0)
    _draw_cross_attention(fig, attention_ax, mean, data.source, data.output, title)
    fig.suptitle(f"Fig. 13  Learning to write {data.source} backwards: {data.output}")
    return fig
