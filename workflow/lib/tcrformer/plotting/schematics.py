"""The explainer's schematic figures (5, 6, 8, 10, 11) as simple box-and-arrow diagrams.

They hold no results: each takes the few sizes it prints (d_model, heads, layers) and the
sequences it shows, so the labels follow the config.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from tcrformer.plotting import style

ATTENTION = "#f6d7a7"
FFN = "#bfe3c6"
NORM = "#f3e79b"
EMBED = "#d6dff5"
OUTPUT = "#e8d3ee"
NEUTRAL = "#eeeeee"


def _canvas(fig: Figure, position=111, xlim=(0, 10), ylim=(0, 10)) -> Axes:
    ax = fig.add_subplot(position)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_axis_off()
    return ax


def _box(
    ax: Axes,
    centre: tuple[float, float],
    size: tuple[float, float],
    text: str,
    colour: str = NEUTRAL,
    fontsize: float = 8.5,
) -> None:
    (x, y), (w, h) = centre, size
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle="round,pad=0.05",
        facecolor=colour,
        edgecolor="black",
        lw=0.8,
    )
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], **kwargs) -> None:
    props = {"arrowstyle": "-|>", "color": "black", "lw": 1.0, "shrinkA": 0, "shrinkB": 0}
    ax.annotate("", xy=end, xytext=start, arrowprops={**props, **kwargs})


def _dashed_frame(ax: Axes, x0: float, y0: float, x1: float, y1: float, label: str) -> None:
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ls="--", lw=1.0))
    ax.text(x1 + 0.15, (y0 + y1) / 2, label, va="center", fontsize=10, fontweight="bold")


def _residual(ax: Axes, x: float, y_from: float, y_to: float, offset: float) -> None:
    """A residual shortcut drawn to the side of a stack, from y_from up to the (+) at y_to."""
    ax.plot([x, x + offset, x + offset], [y_from, y_from, y_to], color=style.MUTED, lw=1.2)
    _arrow(ax, (x + offset, y_to), (x + 0.22, y_to), color=style.MUTED, lw=1.2)


def _plus(ax: Axes, x: float, y: float) -> None:
    ax.add_patch(Circle((x, y), 0.22, facecolor="white", edgecolor="black", lw=0.8))
    ax.text(x, y, "+", ha="center", va="center", fontsize=10, fontweight="bold")


def _stack(ax: Axes, x: float, steps: Sequence[tuple[str, str]], y0: float, dy: float) -> list:
    """Boxes bottom to top, joined by arrows; '+' draws a residual sum. Returns their y."""
    ys = []
    for i, (text, colour) in enumerate(steps):
        y = y0 + i * dy
        if text == "+":
            _plus(ax, x, y)
        else:
            _box(ax, (x, y), (3.2, 0.55), text, colour)
        if i:
            gap_below = 0.22 if steps[i - 1][0] == "+" else 0.33
            gap_above = 0.22 if text == "+" else 0.33
            _arrow(ax, (x, ys[-1] + gap_below), (x, y - gap_above))
        ys.append(y)
    return ys


def _pre_ln_steps() -> list[tuple[str, str]]:
    return [
        ("x", NEUTRAL),
        ("LayerNorm", NORM),
        ("multi-head attention", ATTENTION),
        ("+", ""),
        ("LayerNorm", NORM),
        ("feed-forward network", FFN),
        ("+", ""),
        ("x'", NEUTRAL),
    ]


PRE_LN_TAPS = (0, 3)  # the input x, then the first sum
POST_LN_TAPS = (0, 3)  # the input x, then the LayerNorm after the first sum


def _post_ln_steps() -> list[tuple[str, str]]:
    return [
        ("x", NEUTRAL),
        ("multi-head attention", ATTENTION),
        ("+", ""),
        ("LayerNorm", NORM),
        ("feed-forward network", FFN),
        ("+", ""),
        ("LayerNorm", NORM),
        ("x'", NEUTRAL),
    ]


def _draw_block(
    ax: Axes, x: float, steps: list[tuple[str, str]], taps: Sequence[int], title: str
) -> None:
    """A block bottom to top; the residual of the k-th sum taps off after step taps[k]."""
    ys = _stack(ax, x, steps, 0.6, 1.2)
    sums = [i for i, (text, _) in enumerate(steps) if text == "+"]
    for tap, total in zip(taps, sums, strict=True):
        _residual(ax, x, ys[tap] + 0.45, ys[total], 2.0)
    ax.set_title(title)


def draw_pre_ln_block() -> Figure:
    """Fig. 5: one pre-LayerNorm Transformer block, residual shortcuts drawn beside it."""
    fig = style.new_figure(5.0, 6.8)
    ax = _canvas(fig, xlim=(0, 8), ylim=(0, 10))
    _draw_block(
        ax, 3.5, _pre_ln_steps(), PRE_LN_TAPS, "Fig. 5  One pre-LayerNorm Transformer block"
    )
    ax.text(6.0, 3.0, "residual\nshortcut", color=style.MUTED, fontsize=8, ha="center")
    return fig


def draw_post_pre_ln() -> Figure:
    """Fig. 11: Post-LN (the paper, these notes) beside Pre-LN (ESM-2, GPT-2)."""
    fig = style.new_figure(9.0, 6.8)
    _draw_block(
        _canvas(fig, 121, (0, 8), (0, 10)),
        3.5,
        _post_ln_steps(),
        POST_LN_TAPS,
        "Post-LN: LN(x + sublayer(x))\nthe paper, these notes",
    )
    _draw_block(
        _canvas(fig, 122, (0, 8), (0, 10)),
        3.5,
        _pre_ln_steps(),
        PRE_LN_TAPS,
        "Pre-LN: x + sublayer(LN(x))\nESM-2, GPT-2",
    )
    fig.suptitle("Fig. 11  Where the LayerNorm sits")
    return fig


def _token_row(ax: Axes, tokens: str, y: float, x0: float, colour: str) -> list[float]:
    xs = [x0 + i * 0.6 for i in range(len(tokens))]
    for x, token in zip(xs, tokens, strict=True):
        _box(ax, (x, y), (0.45, 0.45), token, colour, fontsize=8)
    return xs


def _links(ax: Axes, xs_from, y_from, xs_to, y_to, targets: Sequence[int], colour: str) -> None:
    for j in targets:
        ax.plot([xs_from, xs_to[j]], [y_from, y_to], color=colour, lw=1.0, alpha=0.8)


def draw_encoder_decoder(cdr3: str, peptide: str, focus: int) -> Figure:
    """Fig. 6: who may look at whom in an encoder, a decoder, and cross-attention.

    `focus` is the 1-based CDR3 position whose links are drawn (illustrative, as in the explainer).
    """
    fig = style.new_figure(12.0, 4.2)
    q = focus - 1
    panels = (
        ("encoder (ESM-2, BERT): sees everything", cdr3, range(len(cdr3))),
        ("decoder (GPT): looks back only", cdr3, range(q + 1)),
        (f"cross-attention: CDR3β → peptide {peptide}", peptide, range(len(peptide))),
    )
    for i, (title, keys, targets) in enumerate(panels):
        ax = _canvas(fig, 131 + i, (-0.5, 8.5), (0, 4))
        xs_keys = _token_row(ax, keys, 3.2, 0.0, EMBED if keys is cdr3 else OUTPUT)
        xs_query = _token_row(ax, cdr3, 0.8, 0.0, EMBED)
        _links(ax, xs_query[q], 1.05, xs_keys, 2.95, list(targets), style.HIGHLIGHT)
        ax.text(-0.45, 3.2, "keys", ha="right", va="center", fontsize=8)
        ax.text(-0.45, 0.8, "query", ha="right", va="center", fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle(f"Fig. 6  Encoder, decoder and cross-attention (links of {cdr3[q]}{focus})")
    return fig


def _layer(ax: Axes, x: float, steps: list[tuple[str, str]], n_layers: int, label: str):
    ys = _stack(ax, x, steps, 2.65, 0.85)
    _dashed_frame(ax, x - 1.9, ys[0] - 0.45, x + 1.9, ys[-1] + 0.45, f"×{n_layers}")
    ax.text(x - 1.9, ys[-1] + 0.6, label, ha="left", va="bottom", fontsize=10, fontweight="bold")
    return ys


def draw_transformer(n_layers: int, d_model: int) -> Figure:
    """Fig. 8: the whole encoder-decoder, each dashed box one layer repeated N times."""
    fig = style.new_figure(10.0, 8.0)
    ax = _canvas(fig, xlim=(0, 12), ylim=(0, 11))
    enc = [
        ("self-attention", ATTENTION),
        ("add & norm", NORM),
        ("feed-forward", FFN),
        ("add & norm", NORM),
    ]
    dec = [
        ("masked self-attention", ATTENTION),
        ("add & norm", NORM),
        ("cross-attention", ATTENTION),
        ("add & norm", NORM),
        ("feed-forward", FFN),
        ("add & norm", NORM),
    ]
    _box(ax, (3.0, 1.6), (3.2, 0.55), f"embedding ×√{d_model} + PE", EMBED)
    _box(ax, (3.0, 0.5), (3.2, 0.5), "source tokens", NEUTRAL)
    _box(ax, (8.5, 1.6), (3.2, 0.55), f"embedding ×√{d_model} + PE", EMBED)
    _box(ax, (8.5, 0.5), (3.2, 0.5), "target tokens, shifted right", NEUTRAL)
    for x in (3.0, 8.5):
        _arrow(ax, (x, 0.78), (x, 1.3))
        _arrow(ax, (x, 1.9), (x, 2.2))
    enc_ys = _layer(ax, 3.0, enc, n_layers, "encoder")
    dec_ys = _layer(ax, 8.5, dec, n_layers, "decoder")
    _box(ax, (8.5, 8.9), (3.2, 0.55), "linear → softmax", OUTPUT)
    _box(ax, (8.5, 10.0), (3.2, 0.5), "next-token probabilities", NEUTRAL)
    _arrow(ax, (8.5, dec_ys[-1] + 0.45), (8.5, 8.6))
    _arrow(ax, (8.5, 9.2), (8.5, 9.72))
    ax.plot([3.0, 3.0, 5.8, 5.8], [enc_ys[-1] + 0.45, 8.2, 8.2, dec_ys[2]], color=style.HIGHLIGHT)
    _arrow(ax, (5.8, dec_ys[2]), (6.88, dec_ys[2]), color=style.HIGHLIGHT)
    ax.text(
        4.4,
        8.35,
        "encoder output (memory)\nto every decoder layer",
        fontsize=8,
        color=style.HIGHLIGHT,
        ha="center",
        va="bottom",
    )
    ax.set_title("Fig. 8  The whole encoder–decoder")
    return fig


def _slices(ax: Axes, y: float, n_heads: int, width: float, label: str) -> None:
    colours = style.categorical_colours(n_heads)
    for h in range(n_heads):
        ax.add_patch(
            Rectangle(
                (1 + h * width / n_heads, y),
                width / n_heads,
                0.6,
                facecolor=colours[h],
                edgecolor="white",
            )
        )
    ax.text(0.9, y + 0.3, label, ha="right", va="center", fontsize=8.5)


def draw_multihead_split(d_model: int, n_heads: int) -> Figure:
    """Fig. 10: one projection per role, split into heads, attended, put back together."""
    d_k = d_model // n_heads
    fig = style.new_figure(10.0, 5.4)
    ax = _canvas(fig, xlim=(-2.5, 10), ylim=(0, 8))
    _box(ax, (5.0, 7.3), (8.0, 0.6), f"input (B, L, {d_model})", NEUTRAL)
    _box(ax, (5.0, 6.1), (8.0, 0.6), f"W_Q, W_K, W_V: three projections, (B, L, {d_model})", EMBED)
    _slices(ax, 4.4, n_heads, 8.0, f"view + transpose\n(B, {n_heads}, L, {d_k})")
    _box(
        ax,
        (5.0, 3.2),
        (8.0, 0.6),
        f"attention in every head at once, (B, {n_heads}, L, {d_k})",
        ATTENTION,
    )
    _slices(ax, 1.7, n_heads, 8.0, f"transpose + view\n(B, L, {d_model})")
    _box(ax, (5.0, 0.6), (8.0, 0.6), f"W_O mixes the heads, (B, L, {d_model})", OUTPUT)
    for y0, y1 in ((7.0, 6.4), (5.8, 5.0), (4.4, 3.5), (2.9, 2.3), (1.7, 0.9)):
        _arrow(ax, (5.0, y0), (5.0, y1))
    for h in range(n_heads):
        x = 1 + (h + 0.5) * 8.0 / n_heads
        ax.text(x, 4.7, f"head {h + 1}\n{d_k}", ha="center", va="center", fontsize=7)
    ax.set_title(f"Fig. 10  {n_heads} heads of {d_k} dimensions from one {d_model}-wide projection")
    return fig


# The figures of the table (tcrformer.figures): they read no results, only the config's sizes.


def fig05_pre_ln_block(data=None) -> Figure:
    return draw_pre_ln_block()


def fig06_encoder_decoder(data, cdr3: str, peptide: str, focus: int) -> Figure:
    return draw_encoder_decoder(cdr3, peptide, focus)


def fig08_transformer(data, n_layers: int, d_model: int) -> Figure:
    return draw_transformer(n_layers, d_model)


def fig10_multihead_split(data, d_model: int, n_heads: int) -> Figure:
    return draw_multihead_split(d_model, n_heads)


def fig11_post_pre_ln(data=None) -> Figure:
    return draw_post_pre_ln()
