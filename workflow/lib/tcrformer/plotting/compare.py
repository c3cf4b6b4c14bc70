"""Figures of the comparison of two runs (target `compare`): the reversal training losses
overlaid, and the attention maps side by side. They draw what figure_data.read gives of
each run, never a model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tcrformer.plotting import style
from tcrformer.plotting.reversal import written_tokens

WEIGHT = "attention weight (fraction)"
LINE_STYLES = ("-", "--")  # the second run dashed over the first: both show where they agree


def writers(stem: str, fig: Figure) -> dict[str, Callable[[str], None]]:
    """{stem_png, stem_svg} for io.write_named: the first one called writes both files (the
    PNG and SVG beside each other, by style.save), the second finds them written."""
    written: set[tuple[Path, Path]] = set()

    def write(path: str) -> None:
        pair = (Path(path).with_suffix(".png"), Path(path).with_suffix(".svg"))
        if pair not in written:
            style.save(fig, *pair)
            written.add(pair)

    return {f"{stem}_png": write, f"{stem}_svg": write}


def _note(ax: Axes, lines: list[str], centre: bool) -> None:
    ax.text(
        0.5 if centre else 0.98,
        0.5 if centre else 0.98,
        "\n".join(lines),
        transform=ax.transAxes,
        ha="center" if centre else "right",
        va="center" if centre else "top",
        fontsize=8,
    )


def draw_losses(runs: Mapping) -> Figure:
    """The reversal training loss of each run, overlaid; a run without one is named."""
    fig = style.new_figure(8.0, 4.5)
    ax = fig.subplots()
    colours = style.categorical_colours(len(runs))
    missing, drawn_curves = [], []
    for i, ((name, data), colour) in enumerate(zip(runs.items(), colours, strict=True)):
        if data.losses is None or data.losses.empty:
            missing.append(name)
            continue
        ax.plot(data.losses["step"], data.losses["loss"], color=colour, lw=2.0 - 1.2 * (i > 0),
                ls=LINE_STYLES[i % len(LINE_STYLES)], label=f"run {name}")  # fmt: skip
        drawn_curves.append(data.losses[["step", "loss"]].reset_index(drop=True))
    notes = [f"run {name}: no reversal/losses.csv, not drawn" for name in missing]
    if len(drawn_curves) == 2 and drawn_curves[0].equals(drawn_curves[1]):
        notes.append("the two curves are identical")
    drawn = len(missing) < len(runs)
    if drawn:
        ax.set_ylim(0, None)
        ax.legend(loc="upper center")
    if notes:
        _note(ax, notes, centre=not drawn)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (cross-entropy, nats per token)")
    ax.set_title("Reversal training loss, one batch per step: " + " and ".join(
        f"run {name}" for name in runs))  # fmt: skip
    return fig


def _heatmap(ax: Axes, weights, title: str, aspect: str = "equal"):
    image = ax.imshow(weights, cmap=style.SEQUENTIAL_CMAP, vmin=0, vmax=1, aspect=aspect)
    ax.set_title(title, fontsize=9)
    return image


def draw_attention(runs: Mapping) -> Figure:
    """Top: each run's toy head-1 attention map. Below, when both runs have one: the
    reversal model's cross-attention while it writes the CDR3, mean over heads."""
    names = list(runs)
    both = all(runs[n].cross_attention is not None for n in names)
    rows = 2 if both else 1
    fig = style.new_figure(5.2 * len(names) + 1.0, 4.8 * rows + 0.4)
    axes = fig.subplots(rows, len(names), squeeze=False)
    image = None
    for ax, name in zip(axes[0], names, strict=True):
        data = runs[name]
        image = _heatmap(ax, data.toy_attention[0], f"run {name}: toy, head 1")
        style.label_residues(ax, data.sequence, axis="x", rotate=True)
        style.label_residues(ax, data.sequence, axis="y")
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query (attending)")
    style.colorbar(fig, image, list(axes[0]), WEIGHT)
    if both:
        for ax, name in zip(axes[1], names, strict=True):
            data = runs[name]
            heads = data.cross_attention.shape[0]
            mean = data.cross_attention.mean(axis=0)
            title = f"run {name}: reversal cross-attention, mean of {heads} heads"
            image = _heatmap(ax, mean, title, aspect="auto")  # a short output: one row
            style.label_residues(ax, data.source, axis="x", rotate=True)
            ax.set_yticks(range(mean.shape[0]), written_tokens(data.output, mean.shape[0]))
            ax.set_xlabel("source residue (read by the encoder)")
            ax.set_ylabel("token being written (decoder)")
        style.colorbar(fig, image, list(axes[1]), WEIGHT)
    title = "Attention of " + " and ".join(f"run {name}" for name in names)
    if not both:
        without = [n for n in names if runs[n].cross_attention is None]
        title += "\n(no reversal cross-attention drawn: " + ", ".join(
            f"run {n} has none" for n in without) + ")"  # fmt: skip
    fig.suptitle(title)
    return fig
