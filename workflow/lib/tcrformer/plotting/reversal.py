"""Figures of the reversal chapter (seed section 10.9): Fig. 13, training and cross-attention."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from . import style

LOSS_COLOUR = "#3b7dd8"
EOS = "<eos>"


@dataclass(frozen=True)
class Training:
    """What Fig. 13 reads from a recipe's values.json (keys `<prefix>.<name>`)."""

    floor: float
    report_losses: dict[int, float]
    antidiagonal_mean: float | None


def training_values(values: Mapping, prefix: str) -> Training:
    pattern = re.compile(rf"^{re.escape(prefix)}\.loss_step(\d+)$")
    report = {int(m[1]): float(v) for k, v in values.items() if (m := pattern.match(k))}
    return Training(
        floor=float(values.get(f"{prefix}.label_smoothing_floor", 0.0)),
        report_losses=dict(sorted(report.items())),
        antidiagonal_mean=values.get(f"{prefix}.cross_attention_antidiagonal_mean"),
    )


def written_tokens(output: str, rows: int) -> list[str]:
    """Tick labels of the decoder rows: the letters written, then <eos> for the last row."""
    tokens = list(output)[:rows]
    return tokens + [EOS] * (rows - len(tokens))


def _draw_loss(ax: Axes, losses: pd.DataFrame, training: Training) -> None:
    ax.plot(
        losses["step"],
        losses["loss"],
        color=LOSS_COLOUR,
        lw=0.6,
        alpha=0.9,
        label="training loss (one batch per step)",
    )
    if training.report_losses:
        steps, reported = zip(*training.report_losses.items(), strict=True)
        ax.plot(steps, reported, "o", color="black", ms=4, label="values reported")
        for step, loss in training.report_losses.items():
            ax.annotate(
                f"{loss:.3f}",
                (step, loss),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.axhline(
        training.floor,
        color=style.HIGHLIGHT,
        ls="--",
        lw=1.2,
        label=f"label-smoothing floor {training.floor:.3f}",
    )
    ax.set_xlim(0, losses["step"].max())
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


def draw_training(
    losses: pd.DataFrame,
    training: Training,
    cross_attention: np.ndarray,
    source: str,
    output: str,
    layer: int,
) -> Figure:
    """Fig. 13: the loss with its floor (left); cross-attention, mean over heads (right).

    `cross_attention` is (heads, rows written, source length) from the evaluation.
    """
    fig = style.new_figure(12.5, 5.0)
    loss_ax, attention_ax = fig.subplots(1, 2, width_ratios=(1.15, 1))
    _draw_loss(loss_ax, losses, training)
    title = f"cross-attention, decoder layer {layer}, mean of {cross_attention.shape[0]} heads"
    if training.antidiagonal_mean is not None:
        title += f"\n{training.antidiagonal_mean:.0%} on the mirror residue, on average"
    _draw_cross_attention(fig, attention_ax, cross_attention.mean(axis=0), source, output, title)
    fig.suptitle(f"Fig. 13  Learning to write {source} backwards: {output}")
    return fig


def read_decoded(text: str) -> tuple[str, str]:
    """(input, output) from cdr3_decoded.txt: the CDR3 on line 1, what the model wrote on 2."""
    lines: Sequence[str] = text.splitlines()
    return lines[0].strip(), lines[1].strip() if len(lines) > 1 else ""
