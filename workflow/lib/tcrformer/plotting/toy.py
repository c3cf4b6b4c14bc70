"""Figures of the toy chapter (explainer sections 2-5): Figs. 1-4, the sqrt(d_k) demonstration."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tcrformer.models.attention import leaders
from tcrformer.models.chemistry import CHEMISTRY_FEATURES
from tcrformer.plotting import style


def column_label(name: str) -> str:
    """A column name of X as an axis label: the position clocks' 'pos_' prefix dropped."""
    return name.removeprefix("pos_").replace("_", " ").replace("mid", "mid ")


def _annotate_cells(ax: Axes, values: np.ndarray, fmt: str = "{:.2f}", limit: float = 0.6):
    for (row, col), value in np.ndenumerate(values):
        colour = "white" if abs(value) > limit else "black"
        ax.text(col, row, fmt.format(value), ha="center", va="center", fontsize=6.5, color=colour)


def _block_bracket(ax: Axes, start: int, stop: int, text: str) -> None:
    """A labelled bracket above columns start..stop-1 (axes in data x, axes-fraction y)."""
    transform = ax.get_xaxis_transform()
    left, right = start - 0.45, stop - 0.55
    ax.plot(
        [left, left, right, right],
        [1.01, 1.04, 1.04, 1.01],
        color="black",
        lw=1,
        transform=transform,
        clip_on=False,
    )
    ax.text(
        (left + right) / 2,
        1.06,
        text,
        ha="center",
        va="bottom",
        transform=transform,
        fontweight="bold",
    )


def draw_toy_input(x: np.ndarray, sequence: str, columns: Sequence[str]) -> Figure:
    """Fig. 1: the n x 8 input as an annotated heatmap, chemistry and position blocks marked."""
    fig = style.new_figure(7.0, 0.38 * len(sequence) + 1.9)
    ax = fig.add_subplot()
    image = ax.imshow(x, cmap=style.DIVERGING_CMAP, vmin=-1, vmax=1, aspect="auto")
    _annotate_cells(ax, x)
    ax.set_xticks(range(x.shape[1]), [column_label(c) for c in columns], rotation=30, ha="right")
    style.label_residues(ax, sequence, axis="y")
    n_chem = len(CHEMISTRY_FEATURES)
    ax.axvline(n_chem - 0.5, color="black", lw=1.5)
    _block_bracket(ax, 0, n_chem, "chemistry (what the residue is)")
    _block_bracket(ax, n_chem, x.shape[1], "position (where it sits)")
    ax.set_xlabel("feature of the input vector")
    ax.set_ylabel("residue of the CDR3β")
    fig.suptitle(f"Fig. 1  The toy input: one {x.shape[1]}-number vector per residue")
    style.colorbar(fig, image, ax, "feature value (dimensionless)")
    return fig


def _key_groups(keys: np.ndarray, sequence: str) -> list[tuple[np.ndarray, list[int]]]:
    """Residues whose keys coincide, grouped so each arrow is drawn and labelled once."""
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(np.round(keys, 9)):
        groups.setdefault(tuple(key), []).append(i)
    return [(keys[members[0]], members) for members in groups.values()]


def _arrow(ax: Axes, vector: np.ndarray, colour: str, width: float) -> None:
    ax.annotate(
        "",
        xy=tuple(vector),
        xytext=(0, 0),
        arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width, "shrinkA": 0, "shrinkB": 0},
    )


def _group_label(sequence: str, members: Sequence[int]) -> str:
    return " ".join(style.residue_labels(sequence)[i] for i in members)


def draw_head_plane(
    queries: np.ndarray,
    keys: np.ndarray,
    sequence: str,
    focus: int,
    dim_names: Sequence[str] = ("", ""),
) -> Figure:
    """Fig. 2: the focus residue's query and every key of head 1 as arrows in the plane.

    `focus` is the 1-based position of the query drawn. Keys that coincide share one arrow;
    the query is the wide pale arrow underneath, so a key pointing its way stays visible.
    """
    query = queries[focus - 1]
    fig = style.new_figure(6.4, 5.2)
    ax = fig.add_subplot()
    ax.axhline(0, color=style.MUTED, lw=0.8)
    ax.axvline(0, color=style.MUTED, lw=0.8)
    _arrow(ax, query, style.QUERY, 7.0)
    for key, members in _key_groups(keys, sequence):
        colour = style.residue_colour(sequence[members[0]])
        score = float(query @ key)
        label = f"k: {_group_label(sequence, members)}\nq·k = {score:+.2f}"
        if np.allclose(key, 0):
            ax.plot(0, 0, "o", color=colour, ms=6)
            ax.annotate(
                label,
                (0, 0),
                xytext=(-8, -8),
                textcoords="offset points",
                ha="right",
                va="top",
                color=colour,
                fontsize=8,
            )
            continue
        _arrow(ax, key, colour, 1.8)
        ax.annotate(
            label, tuple(key), xytext=(6, 6), textcoords="offset points", color=colour, fontsize=8
        )
    ax.annotate(
        f"q: query of {style.residue_labels(sequence)[focus - 1]}",
        tuple(query),
        xytext=(6, -18),
        textcoords="offset points",
        color=style.QUERY,
        fontweight="bold",
    )
    reach = 1.35 * max(np.abs(keys).max(), np.abs(query).max(), 1.0)
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.set_xlabel(_axis_name(1, dim_names[0]))
    ax.set_ylabel(_axis_name(2, dim_names[1]))
    ax.set_title("Fig. 2  Dot products in a two-dimensional head")
    return fig


def _axis_name(dim: int, feature: str) -> str:
    return f"head 1, dimension {dim}" + (f" (from {feature})" if feature else "")


def draw_attention_row(weights: np.ndarray, sequence: str, focus: int) -> Figure:
    """Fig. 3: the focus residue's (1-based) attention row as bars. A clear winner, its partner,
    is red and named in the title; when the largest weights are tied (models.attention.leaders),
    no bar is red and the title says over which keys the attention is spread evenly."""
    row = weights[focus - 1]
    tied = leaders(row)
    colours = [style.MUTED] * len(sequence)
    if len(tied) == 1:
        colours[tied[0]] = style.HIGHLIGHT
    colours[focus - 1] = style.residue_colour(sequence[focus - 1])
    fig = style.new_figure(7.0, 3.6)
    ax = fig.add_subplot()
    bars = ax.bar(range(len(sequence)), row, color=colours, edgecolor="black", linewidth=0.5)
    ax.bar_label(bars, [f"{w:.3f}" for w in row], fontsize=7, padding=2)
    style.label_residues(ax, sequence, axis="x")
    ax.set_ylim(0, min(1.0, row.max() * 1.18))
    ax.set_xlabel("key residue (attended to)")
    ax.set_ylabel("attention weight (fraction, row sums to 1)")
    labels = style.residue_labels(sequence)
    share = _share(row, tied, labels)
    ax.set_title(f"Fig. 3  {labels[focus - 1]}'s row of attention in head 1: {share}")
    return fig


def _share(row: np.ndarray, tied: np.ndarray, labels: Sequence[str]) -> str:
    """Where a row's attention goes, in words: its clear winner, or the keys it is spread over
    evenly (`tied`: the row's leaders)."""
    if len(tied) == 1:
        return f"{row[tied[0]]:.0%} on {labels[tied[0]]}"
    share = f"{row[tied].mean():.0%}"
    if len(tied) == len(row):
        return f"spread evenly, {share} on every key"
    keys = ", ".join(labels[i] for i in tied) if len(tied) <= 4 else f"{len(tied)} keys"
    return f"spread evenly over {keys}, {share} each"


def draw_heads(maps: np.ndarray, sequence: str, head_names: Sequence[str]) -> Figure:
    """Fig. 4: every head's attention map side by side, residues on both axes."""
    n_heads = maps.shape[0]
    fig = style.new_figure(3.3 * n_heads + 0.8, 4.3)
    axes = fig.subplots(1, n_heads, sharey=True)
    axes = np.atleast_1d(axes)
    for h, ax in enumerate(axes):
        image = ax.imshow(maps[h], cmap=style.SEQUENTIAL_CMAP, vmin=0, vmax=1)
        style.label_residues(ax, sequence, axis="x", rotate=True)
        name = head_names[h] if h < len(head_names) else ""
        ax.set_title(f"head {h + 1}: {name}", fontsize=9)
        ax.set_xlabel("key (attended to)")
    style.label_residues(axes[0], sequence, axis="y")
    axes[0].set_ylabel("query (attending)")
    style.colorbar(fig, image, list(axes), "attention weight (fraction)")
    fig.suptitle(f"Fig. 4  The {len(head_names)} heads of the toy model")
    return fig


def draw_scaling(raw: np.ndarray, unscaled: np.ndarray, scaled: np.ndarray, d_k: int) -> Figure:
    """The sqrt(d_k) demonstration: random scores, softmax weights without and with scaling."""
    fig = style.new_figure(12.0, 4.0)
    axes = fig.subplots(1, 3)
    bound = float(np.abs(raw).max())
    image = axes[0].imshow(raw, cmap=style.DIVERGING_CMAP, vmin=-bound, vmax=bound)
    style.colorbar(fig, image, axes[0], "raw score q·k (dimensionless)")
    axes[0].set_title(f"raw scores, d_k = {d_k}")
    panels = (
        (axes[1], unscaled, f"softmax(q·k): max weight {unscaled.max():.1%}"),
        (axes[2], scaled, f"softmax(q·k / √{d_k}): max weight {scaled.max():.1%}"),
    )
    for ax, weights, title in panels:
        image = ax.imshow(weights, cmap=style.SEQUENTIAL_CMAP, vmin=0, vmax=1)
        ax.set_title(title)
    style.colorbar(fig, image, list(axes[1:]), "attention weight (fraction)")
    for ax in axes:
        ticks = range(raw.shape[1])
        ax.set_xticks(ticks, [str(j + 1) for j in ticks])
        ax.set_yticks(range(raw.shape[0]), [str(i + 1) for i in range(raw.shape[0])])
        ax.set_xlabel("random key")
        ax.set_ylabel("random query")
    fig.suptitle(f"Why divide by √d_k: {raw.shape[1]} random keys of {d_k} numbers each")
    return fig


# The figures of the table (tcrformer.figures): the chapter's figure data in, a Figure out.


def fig01_toy_input(data) -> Figure:
    return draw_toy_input(data.X, data.sequence, data.columns)


def fig02_head_plane(data) -> Figure:
    return draw_head_plane(
        data.head1_queries, data.head1_keys, data.sequence, data.focus_position,
        data.head1_dimensions,
    )  # fmt: skip


def fig03_attention_row(data) -> Figure:
    return draw_attention_row(data.attention_weights[0], data.sequence, data.focus_position)


def fig04_heads(data) -> Figure:
    return draw_heads(data.attention_weights, data.sequence, data.head_names)


def figS1_sqrt_dk_scaling(data) -> Figure:
    return draw_scaling(
        data.scaling_raw_scores, data.scaling_weights_unscaled, data.scaling_weights_scaled,
        data.scaling_d_k,
    )  # fmt: skip
