"""The shared look of every figure, and the one way figures are written to disk.

Agg backend (no display), DejaVu Sans (ships with matplotlib, so every machine draws the
same glyphs), one colour per residue class, per CDR3 segment and per model. `save` writes
PNG and SVG that are byte-identical across reruns: no software or date metadata, a fixed
dpi and a fixed SVG hash salt, each file written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tcrformer.core.io import atomic_path  # noqa: E402

DPI = 150
SVG_HASH_SALT = "tcrformer"

RC = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.titlesize": 11,
    "figure.titleweight": "bold",
    "legend.fontsize": 8,
    "legend.frameon": False,
    "image.interpolation": "nearest",
    "svg.hashsalt": SVG_HASH_SALT,
    "svg.fonttype": "path",
}
matplotlib.rcParams.update(RC)

# Residue classes, after the toy's four chemistry numbers (charge first, then aromatic,
# polar, hydrophobic); glycine and proline are their own class.
RESIDUE_CLASSES = {
    "positive": "KRH",
    "negative": "DE",
    "aromatic": "FWY",
    "polar": "STNQ",
    "hydrophobic": "AVILMC",
    "special": "GP",
}
CLASS_COLOURS = {
    "positive": "#1f5fbf",
    "negative": "#c0392b",
    "aromatic": "#8e44ad",
    "polar": "#178a5c",
    "hydrophobic": "#b7791f",
    "special": "#555555",
}
SEGMENT_COLOURS = {"V-gene": "#3b7dd8", "junction": "#e07b24", "J-gene": "#2e9e6b"}
MODEL_NAMES = {"esm2": "ESM-2", "sceptr": "SCEPTR"}
HIGHLIGHT = "#c0392b"
QUERY = "#f2a93b"  # the query arrow of Fig. 2, drawn wide and pale under the keys
MUTED = "#9aa5b1"
ALLOWED = "#3a9a5b"  # "may attend", as in the explainer's Fig. 12
BLOCKED = "#e6e6e6"
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"


def categorical_colours(n: int) -> list:
    """n distinct colours (tab10, then tab20 for more than ten)."""
    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def residue_class(residue: str) -> str:
    for name, members in RESIDUE_CLASSES.items():
        if residue in members:
            return name
    return "special"


def residue_colour(residue: str) -> str:
    return CLASS_COLOURS[residue_class(residue)]


def residue_labels(sequence: str) -> list[str]:
    """One tick label per residue: the letter and its 1-based position (S3, S4, S7, S8)."""
    return [f"{residue}{i}" for i, residue in enumerate(sequence, start=1)]


def label_residues(ax: Axes, sequence: str, axis: str = "x", rotate: bool = False) -> None:
    """Residues as tick labels on one axis ('x' or 'y'), coloured by residue class."""
    ticks = range(len(sequence))
    labels = residue_labels(sequence)
    if axis == "x":
        ax.set_xticks(ticks, labels, rotation=90 if rotate else 0)
        tick_labels = ax.get_xticklabels()
    else:
        ax.set_yticks(ticks, labels)
        tick_labels = ax.get_yticklabels()
    for label, residue in zip(tick_labels, sequence, strict=True):
        label.set_color(residue_colour(residue))
        label.set_fontweight("bold")


def token_ticks(ax: Axes, tokens: Sequence[str], axis: str = "x") -> None:
    """Arbitrary tokens (<bos>, <pad>, residues) as tick labels on one axis."""
    ticks = range(len(tokens))
    if axis == "x":
        ax.set_xticks(ticks, list(tokens), rotation=90)
    else:
        ax.set_yticks(ticks, list(tokens))


def colorbar(fig: Figure, mappable: ScalarMappable, ax: Axes | Sequence[Axes], label: str):
    """A colour bar with its unit in the label."""
    bar = fig.colorbar(mappable, ax=ax, shrink=0.85, pad=0.02)
    bar.set_label(label)
    return bar


def new_figure(width: float, height: float) -> Figure:
    """A figure of width x height inches with constrained layout (no pyplot state)."""
    return Figure(figsize=(width, height), layout="constrained")


def save(fig: Figure, png_path: str | os.PathLike, svg_path: str | os.PathLike) -> None:
    """Write the figure as PNG and SVG, byte-stable across reruns, each atomically."""
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT}):
        with atomic_path(png_path) as tmp:
            fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
        with atomic_path(svg_path) as tmp:
            fig.savefig(tmp, format="svg", metadata={"Date": None})
