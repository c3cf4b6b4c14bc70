"""Figures of the study-notes chapter (explainer section 10): Figs. 9 and 12, the weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch

from tcrformer.plotting import style

WAVE_COLOURS = ("#1f77b4", "#e07b24", "#2e9e6b", "#8e44ad")


def draw_positional_encoding(pe: np.ndarray, wave_dims: Sequence[int]) -> Figure:
    """Fig. 9: the sinusoidal table as a heatmap (left) and some of its dimensions as waves."""
    n_positions, d_model = pe.shape
    fig = style.new_figure(11.0, 4.2)
    heat, waves = fig.subplots(1, 2, width_ratios=(1.15, 1))
    image = heat.imshow(pe, cmap=style.DIVERGING_CMAP, vmin=-1, vmax=1, aspect="auto")
    heat.set_xlabel(f"encoding dimension (0 to {d_model - 1})")
    heat.set_ylabel("position in the sequence")
    heat.set_title(f"PE table: {n_positions} positions × {d_model} dimensions")
    style.colorbar(fig, image, heat, "PE value (dimensionless, in [-1, 1])")
    positions = np.arange(n_positions)
    if len(wave_dims) > len(WAVE_COLOURS):
        raise ValueError(f"at most {len(WAVE_COLOURS)} wave dimensions, got {len(wave_dims)}")
    for dim, colour in zip(wave_dims, WAVE_COLOURS, strict=False):
        kind = "sin" if dim % 2 == 0 else "cos"
        waves.plot(positions, pe[:, dim], color=colour, lw=1.6, label=f"dim {dim} ({kind})")
        heat.axvline(dim, color=colour, lw=1.2, ls="--")
    waves.set_xlabel("position in the sequence")
    waves.set_ylabel("PE value (dimensionless)")
    waves.set_ylim(-1.15, 1.35)
    waves.set_title(f"{_count(len(wave_dims))} as waves: each sin/cos pair is a clock")
    waves.legend(loc="upper right", ncols=len(wave_dims))
    fig.suptitle("Fig. 9  The sinusoidal positional encoding")
    return fig


def _count(n: int) -> str:
    words = {1: "one dimension", 2: "two dimensions", 3: "three dimensions"}
    return words.get(n, f"{n} dimensions")


def _row(frame: pd.DataFrame, key: str) -> int:
    """A count of the breakdown by its key (counting.formula_counts' name), never its label."""
    match = frame.loc[frame["key"] == key, "count"]
    if match.empty:
        raise ValueError(f"param_breakdown.csv has no row {key!r}")
    return int(match.iloc[0])


def model_composition(frame: pd.DataFrame) -> dict[str, int]:
    """Split the model's total into the encoder stack, the decoder stack and the embeddings."""
    encoder, decoder = _row(frame, "encoder_layer"), _row(frame, "decoder_layer")
    n_layers = _row(frame, "all_layers") // (encoder + decoder)
    return {
        f"encoder stack\n({n_layers} layers)": n_layers * encoder,
        f"decoder stack\n({n_layers} layers)": n_layers * decoder,
        "embeddings\nand output": _row(frame, "embeddings_and_output"),
    }


def layer_composition(frame: pd.DataFrame) -> dict[str, int]:
    """Split one encoder layer into attention, feed-forward network and its two LayerNorms."""
    return {
        "attention": _row(frame, "attention_sublayer"),
        "feed-forward": _row(frame, "ffn_layer"),
        "2 LayerNorms": 2 * _row(frame, "layer_norm"),
    }


def _stacked_bar(ax: Axes, y: float, parts: Mapping[str, int], colours: Sequence[str]) -> None:
    total = sum(parts.values())
    left = 0.0
    for (name, count), colour in zip(parts.items(), colours, strict=False):
        share = count / total
        ax.barh(y, share, left=left, color=colour, edgecolor="white", height=0.6)
        if share > 0.06:
            ax.text(
                left + share / 2,
                y,
                f"{name}\n{count / 1e6:.2f} M ({share:.0%})",
                ha="center",
                va="center",
                fontsize=7.5,
                color="white",
            )
        left += share


def draw_param_breakdown(frame: pd.DataFrame) -> Figure:
    """Where the base model's weights sit: every row of the table, and two compositions."""
    parts = frame[frame["key"] != "total"]
    total = _row(frame, "total")
    fig = style.new_figure(11.0, 4.6)
    table_ax, share_ax = fig.subplots(1, 2, width_ratios=(1, 1.1))
    y = np.arange(len(parts))
    bars = table_ax.barh(y, parts["count"] / 1e6, color="#3b7dd8")
    table_ax.bar_label(bars, [f"{c:,}" for c in parts["count"]], fontsize=7, padding=2)
    table_ax.set_yticks(y, parts["part"])
    table_ax.invert_yaxis()
    table_ax.set_xlim(0, parts["count"].max() / 1e6 * 1.3)
    table_ax.set_xlabel("weights (millions)")
    table_ax.set_title("every row of the breakdown")
    _stacked_bar(share_ax, 1, model_composition(frame), ("#3b7dd8", "#5b4bb7", "#e07b24"))
    _stacked_bar(share_ax, 0, layer_composition(frame), ("#2e9e6b", "#b7791f", "#555555"))
    encoder = _row(frame, "encoder_layer")
    share_ax.set_yticks([1, 0], [f"whole model\n{total:,}", f"one encoder layer\n{encoder:,}"])
    share_ax.set_xlim(0, 1)
    share_ax.set_xlabel("share of the weights (fraction)")
    share_ax.set_title("shares: the model, and one encoder layer")
    fig.suptitle(f"Where the {total / 1e6:.1f} million weights of the base model sit")
    return fig


def _token_row(ax: Axes, y: float, tokens: Sequence[str], colour: str) -> None:
    for x, token in enumerate(tokens):
        box = FancyBboxPatch(
            (x - 0.42, y - 0.3),
            0.84,
            0.6,
            boxstyle="round,pad=0.02",
            facecolor=colour,
            edgecolor="black",
            lw=0.6,
        )
        ax.add_patch(box)
        ax.text(x, y, token, ha="center", va="center", fontsize=7.5, fontweight="bold")


def _draw_teacher_forcing(ax: Axes, decoder_input: Sequence[str], target: Sequence[str]) -> None:
    _token_row(ax, 1, decoder_input, "#dbe8f7")
    _token_row(ax, 0, target, "#fde2c8")
    for x in range(len(target)):
        ax.annotate(
            "",
            xy=(x, 0.32),
            xytext=(x, 0.68),
            arrowprops={"arrowstyle": "-|>", "color": style.MUTED, "lw": 0.8},
        )
    ax.set_xlim(-0.6, len(target) - 0.4)
    ax.set_ylim(-0.55, 1.55)
    ax.set_yticks([1, 0], ["decoder input", "target (next token)"])
    ax.set_xticks(range(len(target)), [str(t) for t in range(len(target))])
    ax.set_xlabel("decoder step t: from the input up to t, predict target t")
    ax.spines[["left", "bottom"]].set_visible(False)
    ax.tick_params(length=0)
    ax.set_title("teacher forcing: the decoder input is the target shifted one step right")


def _draw_mask(ax: Axes, mask: Sequence[Sequence[bool]], tokens: Sequence[str], title: str):
    cmap = ListedColormap([style.BLOCKED, style.ALLOWED])
    ax.imshow(np.asarray(mask, dtype=float), cmap=cmap, vmin=0, vmax=1)
    style.token_ticks(ax, tokens, axis="x")
    style.token_ticks(ax, tokens, axis="y")
    ax.set_xticks(np.arange(len(tokens) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(tokens) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=0.6)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("key (may be looked at)")
    ax.set_title(title, fontsize=9)


def draw_teacher_forcing(masks: Mapping) -> Figure:
    """Fig. 12: decoder input vs target (top); causal, padding and combined masks (bottom)."""
    tokens = masks["padded_decoder_input"]
    fig = style.new_figure(13.0, 8.4)
    top, bottom = fig.subfigures(2, 1, height_ratios=(1, 2.6))
    _draw_teacher_forcing(top.add_subplot(), masks["decoder_input"], masks["target"])
    axes = bottom.subplots(1, 3, sharey=True)
    _draw_mask(axes[0], masks["causal"], tokens, "causal mask: no peeking ahead")
    _draw_mask(axes[1], masks["padding"], tokens, "padding mask: <pad> keys hidden")
    _draw_mask(axes[2], masks["combined"], tokens, "decoder self-attention: both")
    axes[0].set_ylabel("query (decoder position)")
    legend = [
        Patch(color=style.ALLOWED, label="may attend"),
        Patch(color=style.BLOCKED, label="blocked"),
    ]
    bottom.legend(handles=legend, loc="outside lower center", ncols=2)
    fig.suptitle(f"Fig. 12  Teacher forcing and masks for the CDR3β {masks['sequence']}")
    return fig


# The figures of the table (tcrformer.figures): the chapter's figure data in, a Figure out.


def fig09_positional_encoding(data, wave_dims: Sequence[int]) -> Figure:
    return draw_positional_encoding(data.pe_table, wave_dims)


def figS2_param_breakdown(data) -> Figure:
    return draw_param_breakdown(data.breakdown)


def fig12_teacher_forcing(data) -> Figure:
    return draw_teacher_forcing(data.teacher_forcing)
