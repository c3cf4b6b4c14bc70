"""Figures of the protein-language-model chapter (explainer section 7): Fig. 7, the CDR3 scan."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from tcrformer.plotting import style

TOP_K = 6
MASK = "·"


def model_title(model: str, detail: str = "") -> str:
    name = style.MODEL_NAMES.get(model, model)
    return f"{name} ({detail})" if detail else name


def masked(cdr3: str, position: int) -> str:
    """The CDR3 with one 1-based position hidden."""
    return cdr3[: position - 1] + MASK + cdr3[position:]


def top_guesses(probabilities: Mapping[str, float], k: int = TOP_K) -> list[tuple[str, float]]:
    """The k most probable amino acids, most probable first (ties broken alphabetically)."""
    return sorted(probabilities.items(), key=lambda item: (-item[1], item[0]))[:k]


def _draw_guess(ax: Axes, guess: Mapping, title: str, cdr3: str) -> None:
    top = top_guesses(guess["probabilities"])
    true = guess["true_residue"]
    if true not in dict(top):
        top = top[:-1] + [(true, guess["probabilities"][true])]
    letters = [aa for aa, _ in top]
    colours = [style.HIGHLIGHT if aa == true else style.MUTED for aa in letters]
    bars = ax.barh(range(len(top)), [p for _, p in top], color=colours, edgecolor="black", lw=0.4)
    ax.bar_label(bars, [f"{p:.1%}" for _, p in top], fontsize=7, padding=2)
    ax.set_yticks(range(len(top)), letters)
    for label, aa in zip(ax.get_yticklabels(), letters, strict=True):
        label.set_color(style.residue_colour(aa))
        label.set_fontweight("bold")
    ax.invert_yaxis()
    ax.set_xlim(0, 1.18)
    ax.set_xlabel("probability (renormalised over the 20 amino acids)")
    ax.set_ylabel("guessed amino acid")
    position = guess["position"]
    hidden = f"{masked(cdr3, position)}: position {position} hidden" if cdr3 else ""
    ax.set_title(f"{title}\n{hidden}; true {true}, p = {guess['p_true']:.1%}", fontsize=9)


def _draw_unavailable(ax: Axes, title: str, reason: str) -> None:
    ax.set_axis_off()
    wrapped = "\n".join(textwrap.wrap(reason, 70))
    ax.text(
        0.5,
        0.5,
        f"{title}: not run\n\n{wrapped}",
        ha="center",
        va="center",
        fontsize=8,
        color=style.MUTED,
        transform=ax.transAxes,
        wrap=True,
    )


def guess_rows(esm2: Mapping, sceptr: Mapping) -> list[tuple[str, str, list, str]]:
    """One row per model: (model, title, guesses, reason it was not run or '')."""
    esm2_title = model_title("esm2", esm2.get("model", ""))
    rows = []
    if esm2.get("available"):
        rows.append(("esm2", esm2_title, esm2["guesses"], ""))
    else:
        rows.append(("esm2", esm2_title, [], esm2.get("reason", "unavailable")))
    rows.append(("sceptr", model_title("sceptr", sceptr.get("variant", "")), sceptr["guesses"], ""))
    return rows


def draw_masked_guesses(esm2: Mapping, sceptr: Mapping, cdr3: str = "") -> Figure:
    """Fig. 7: each model's top guesses for each hidden CDR3 position, true residue in red."""
    rows = guess_rows(esm2, sceptr)
    n_cols = max(len(guesses) for _, _, guesses, _ in rows)
    heights = [1.0 if guesses else 0.45 for _, _, guesses, _ in rows]
    fig = style.new_figure(5.2 * n_cols, 0.4 + 3.0 * sum(heights))
    grid = fig.add_gridspec(len(rows), n_cols, height_ratios=heights)
    for r, (_, title, guesses, reason) in enumerate(rows):
        if not guesses:
            _draw_unavailable(fig.add_subplot(grid[r, :]), title, reason)
            continue
        for c, guess in enumerate(guesses):
            _draw_guess(fig.add_subplot(grid[r, c]), guess, title, cdr3)
    fig.suptitle("Fig. 7  A protein language model guesses a hidden CDR3β residue")
    return fig


def _draw_scan(ax: Axes, rows: pd.DataFrame, summary: Mapping, title: str) -> None:
    rows = rows.sort_values("position")
    cdr3 = "".join(rows["true_residue"])
    colours = [style.SEGMENT_COLOURS.get(s, style.MUTED) for s in rows["segment"]]
    x = np.arange(len(rows))
    bars = ax.bar(x, rows["p_true"], color=colours, edgecolor="black", lw=0.4)
    ax.bar_label(bars, [f"{p:.2f}" for p in rows["p_true"]], fontsize=7, padding=2)
    for key, label, ls in (
        ("mean_p_true_germline", "germline mean", "--"),
        ("mean_p_true_junctional", "junction mean", ":"),
    ):
        if key in summary:
            ax.hlines(summary[key], -0.5, len(rows) - 0.5, color="black", lw=1, ls=ls)
            ax.text(
                len(rows) - 0.4,
                summary[key],
                f" {label} {summary[key]:.2f}",
                va="center",
                fontsize=7,
            )
    style.label_residues(ax, cdr3, axis="x")
    ax.set_ylim(0, 1.1)
    ax.set_xlim(-0.6, len(rows) + 2.0)
    ax.set_xlabel("hidden CDR3β position")
    ax.set_ylabel("p(true residue)")
    ax.set_title(title)


def draw_cdr3_scan(
    scan: pd.DataFrame, summary: Mapping, model_details: Mapping[str, str]
) -> Figure:
    """Fig. 7 (scan): p(true residue) at every CDR3 position, coloured by V / junction / J."""
    models = list(dict.fromkeys(scan["model"]))
    fig = style.new_figure(9.0, 0.6 + 3.2 * len(models))
    axes = np.atleast_1d(fig.subplots(len(models), 1, squeeze=False)[:, 0])
    for ax, model in zip(axes, models, strict=True):
        title = model_title(model, model_details.get(model, ""))
        _draw_scan(ax, scan[scan["model"] == model], summary.get(model, {}), title)
    handles = [Patch(color=c, label=s) for s, c in style.SEGMENT_COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, title="encoded by")
    fig.suptitle("Fig. 7  Hide each CDR3β residue in turn: germline-encoded vs junctional residues")
    return fig


def model_details(esm2: Mapping, sceptr: Mapping) -> dict[str, str]:
    return {"esm2": esm2.get("model", ""), "sceptr": sceptr.get("variant", "")}


# The figures of the table (tcrformer.figures): the chapter's figure data in, a Figure out.


def fig07_masked_guesses(data) -> Figure:
    return draw_masked_guesses(data.esm2, data.sceptr, data.cdr3)


def fig07_cdr3_scan(data) -> Figure:
    details = model_details(data.esm2, data.sceptr)
    return draw_cdr3_scan(data.scan, data.scan_summary, details)
