"""The claims' draw functions, one per row of figures.py: each panel one claim's measurement,
titled with its verdict."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tcrformer.plotting import style


def _loss_panel(ax: Axes, data, claim: str) -> None:
    arms = [a for a in data.claim_arms.get(claim, []) if a in data.loss_curves]
    for arm, colour in zip(arms, style.categorical_colours(len(arms)), strict=True):
        curve = data.loss_curves[arm]
        seeds = data.seeds.get(arm)
        label = arm if seeds is None else f"{arm} ({seeds} seeds)"
        ax.plot(curve["step"], curve["median"], color=colour, lw=1.0, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (median over seeds)")
    ax.set_title(data.title(claim.replace("_", " "), claim), fontsize=9)
    ax.legend(fontsize=7)


def figC1_training_arms(data) -> Figure:
    """The training loss of every arm, the median over its own seeds (the legend says how
    many), one panel per experiment that trains."""
    claims = [c for c, arms in data.claim_arms.items() if arms]
    columns = 3
    rows = -(-len(claims) // columns)
    fig = style.new_figure(13.0, 3.4 * rows)
    axes = np.atleast_1d(fig.subplots(rows, columns)).ravel()
    for ax, claim in zip(axes, claims, strict=False):
        _loss_panel(ax, data, claim)
    for ax in axes[len(claims) :]:
        ax.axis("off")
    shown = {arm for c in claims for arm in data.claim_arms[c]}
    fig.suptitle(f"Fig. C1  The training arms (median over each arm's seeds: "
                 f"{data.seed_range(shown)})")  # fmt: skip
    return fig


def figC2_gradients_and_calibration(data) -> Figure:
    """Left: the gradient norm before clipping, with and without. Right: reliability."""
    fig = style.new_figure(12.0, 4.6)
    grad_ax, cal_ax = fig.subplots(1, 2)
    arms = list(data.grad_norm_curves)
    for arm, colour in zip(arms, style.categorical_colours(len(arms)), strict=True):
        curve = data.grad_norm_curves[arm]
        grad_ax.plot(curve["step"], curve["median"], color=colour, lw=0.8, label=arm)
    grad_ax.set_yscale("log")
    grad_ax.set_xlabel("training step")
    grad_ax.set_ylabel("gradient norm before clipping (median)")
    grad_ax.set_title(data.title("gradient clipping", "clipping"), fontsize=9)
    grad_ax.legend()
    cal_ax.plot([0, 1], [0, 1], color=style.MUTED, ls="--", lw=1, label="calibrated")
    arms = list(data.calibration)
    for arm, colour in zip(arms, style.categorical_colours(len(arms)), strict=True):
        bins = np.array(data.calibration[arm])  # (bins, 3): count, confidence, accuracy
        used = bins[:, 0] > 0
        cal_ax.plot(bins[used, 1], bins[used, 2], "o-", color=colour, label=arm)
    cal_ax.set_xlabel("confidence (top probability), held-out tokens")
    cal_ax.set_ylabel("accuracy")
    cal_ax.set_title(data.title("label smoothing and over-confidence", "smoothing_confidence"),
                     fontsize=9)  # fmt: skip
    cal_ax.legend()
    fig.suptitle("Fig. C2  What clipping and label smoothing do")
    return fig


def _per_seed(ax, by_arm: dict[str, list], margin: float | None = None) -> None:
    """Each arm's per-seed values as dots, their mean as a bar, and the margin."""
    for i, values in enumerate(by_arm.values()):
        finite = [v for v in values if v is not None]
        ax.scatter(np.full(len(finite), i), finite, color=style.MUTED, s=18)
        ax.scatter([i], [np.mean(finite)] if finite else [], color=style.HIGHLIGHT,
                   marker="_", s=400, label="mean over seeds")  # fmt: skip
    if margin is not None:
        ax.axhline(margin, color=style.HIGHLIGHT, ls="--", lw=1, label=f"margin {margin:g}")
    ax.set_xticks(range(len(by_arm)), list(by_arm))
    ax.legend(fontsize=7)


def figC3_attention_importance(data) -> Figure:
    """Left, the claim's measure: per seed, the chance that an output step's most-attended
    residue is its most important one (last decoder layer), against the margin. Right,
    reported: the signed rank correlation of attention and replacement cost."""
    fig = style.new_figure(9.0, 4.6)
    top_ax, rho_ax = fig.subplots(1, 2)
    margin = next((e["margin"] for e in data.effects if e["id"] == "attention_importance"), None)
    _per_seed(top_ax, data.top1_agreement, margin)
    top_ax.set_ylim(-0.02, 1.02)
    top_ax.set_ylabel("top-1 agreement, attention vs occlusion importance")
    top_ax.set_title(data.title("residues: the claim's measure", "attention_importance"),
                     fontsize=9)  # fmt: skip
    _per_seed(rho_ax, data.residue_rho)
    rho_ax.axhline(0, color="0.6", lw=0.6)
    rho_ax.set_ylim(-1, 1)
    rho_ax.set_ylabel("Spearman rho, attention vs replacement cost (signed)")
    rho_ax.set_title("rank correlation (reported)", fontsize=9)
    fig.suptitle("Fig. C3  Does attention point at the residue that matters?")
    return fig


def figC4_positional_encoding(data) -> Figure:
    """Left: cos(PE[0], PE[k]) by distance. Right: the residual of the linear map per k."""
    a = data.analytic
    fig = style.new_figure(12.0, 4.6)
    cos_ax, fit_ax = fig.subplots(1, 2)
    cosine = np.array(a["cosine_by_distance"])
    cos_ax.plot(np.arange(cosine.size), cosine, color=style.categorical_colours(1)[0], lw=0.8)
    if a["cosine_first_rise"] is not None:
        cos_ax.axvline(a["cosine_first_rise"], color=style.HIGHLIGHT, ls="--", lw=1,
                       label=f"first rise: distance {a['cosine_first_rise']}")  # fmt: skip
        cos_ax.legend()
    cos_ax.set_xscale("symlog", linthresh=10)
    cos_ax.set_xlabel("distance k (positions)")
    cos_ax.set_ylabel(f"cos(PE[0], PE[k]), d_model {a['d_model']}")
    cos_ax.set_title(data.title("similarity falls with distance", "similarity_distance"),
                     fontsize=9)  # fmt: skip
    residuals = a["relative_residuals"]
    fit_ax.bar(list(residuals), list(residuals.values()), color=style.MUTED)
    fit_ax.set_yscale("log")
    fit_ax.set_xlabel("offset k")
    fit_ax.set_ylabel("relative residual of PE[p + k] = PE[p] M_k")
    title = (
        f"pos + k is linear in pos; shuffle error {a['permutation_off']:.1g} without "
        f"positions, {a['permutation_on']:.2g} with"
    )
    fit_ax.set_title(data.title(title, "relative_positions"), fontsize=9)
    ratios = np.asarray(a["jacobian_ratios"])
    inset = fit_ax.inset_axes([0.6, 0.55, 0.37, 0.4])
    inset.hist(ratios, bins=20, color=style.MUTED)
    inset.axvline(2.0, color=style.HIGHLIGHT, lw=1)
    inset.set_title(f"sqrt(d_k): Jacobian ratio, {ratios.size} draws", fontsize=7)
    inset.tick_params(labelsize=6)
    fig.suptitle("Fig. C4  What the sinusoidal positions give")
    return fig


def figC5_attention_cost(data) -> Figure:
    """Time and allocated memory of one attention forward pass against L, log-log."""
    rows = data.cost["rows"]
    lengths = np.array([r["length"] for r in rows])
    fig = style.new_figure(11.0, 4.4)
    time_ax, memory_ax = fig.subplots(1, 2)
    time_ax.loglog(lengths, [r["seconds"] for r in rows], "o-", color=style.MUTED)
    time_ax.set_xlabel("sequence length L")
    time_ax.set_ylabel("seconds per forward pass (this machine)")
    time_ax.set_title(f"time ~ L^{data.cost['time_exponent']:.2f}", fontsize=9)
    memory_ax.loglog(lengths, [r["allocated_bytes"] for r in rows], "o-", label="allocated")
    memory_ax.loglog(lengths, [r["score_bytes"] for r in rows], "--", color=style.MUTED,
                     label="the score matrix, h L^2 floats")  # fmt: skip
    memory_ax.set_xlabel("sequence length L")
    memory_ax.set_ylabel("bytes")
    memory_ax.set_title(data.title(f"memory ~ L^{data.cost['memory_exponent']:.2f}",
                                   data.cost["claim"]), fontsize=9)  # fmt: skip
    memory_ax.legend()
    fig.suptitle("Fig. C5  Attention's cost grows with the square of the length")
    return fig


def figC6_beam(data) -> Figure:
    """Left: each seed's greedy exact at the weight snapshots, and the step where beam was
    judged (the first with room, from greedy alone). Right: beam against greedy there."""
    fig = style.new_figure(12.0, 4.6)
    room_ax, beam_ax = fig.subplots(1, 2)
    for arm in data.greedy_by_step:
        for greedy, step in zip(data.greedy_by_step[arm], data.beam_step[arm], strict=True):
            steps = sorted(greedy, key=int)
            room_ax.plot([int(s) for s in steps], [greedy[s] for s in steps], color=style.MUTED,
                         lw=0.8)  # fmt: skip
            if step is not None:
                room_ax.scatter([step], [greedy[str(int(step))]], color=style.HIGHLIGHT, s=18,
                                zorder=3)  # fmt: skip
    low, high = data.greedy_room
    room_ax.axhspan(low, high, color=style.HIGHLIGHT, alpha=0.08,
                    label=f"room for beam ({low:g} to {high:g})")  # fmt: skip
    room_ax.set_xlabel("training step (weight snapshot)")
    room_ax.set_ylabel("greedy exact fraction, each seed (dot: the step judged)")
    room_ax.set_title("where greedy has room", fontsize=9)
    room_ax.legend(fontsize=7)
    arms = list(data.beam)
    x = np.arange(len(arms))
    for offset, key, colour in ((-0.27, "beam_wins", style.HIGHLIGHT),
                                (0.0, "beam_ties", style.MUTED),
                                (0.27, "beam_losses", "black")):  # fmt: skip
        beam_ax.bar(x + offset, [data.beam[a][key] or 0 for a in arms], 0.27, color=colour,
                    label=key.removeprefix("beam_"))  # fmt: skip
    beam_ax.set_xticks(x, arms)
    beam_ax.set_ylabel(f"held-out strings (of {data.eval_n}), median over seeds")
    beam_ax.set_title(data.title("beam against greedy, string by string", "beam_search"),
                      fontsize=9)  # fmt: skip
    beam_ax.legend()
    fig.suptitle("Fig. C6  Beam search against greedy decoding, where greedy has room")
    return fig


def figC7_effects(data) -> Figure:
    """Every experiment's effect with its 95 % interval over its own seeds (used/run in the
    row's label), and the margin it must clear, each on its own scale."""
    effects = data.effects
    fig = style.new_figure(7.5, 0.55 * len(effects) + 1.6)
    axes = np.atleast_1d(fig.subplots(len(effects), 1))
    for ax, e in zip(axes, effects, strict=True):
        ax.axvline(e["margin"], color=style.HIGHLIGHT, ls="--", lw=1)
        if e["direction"] == "equivalent":
            ax.axvline(-e["margin"], color=style.HIGHLIGHT, ls="--", lw=1)
        if e["estimate"] is not None:
            low = e["low"] if e["low"] is not None else e["estimate"]
            high = e["high"] if e["high"] is not None else e["estimate"]
            ax.errorbar([e["estimate"]], [0], xerr=[[e["estimate"] - low], [high - e["estimate"]]],
                        fmt="o", color="black", capsize=3)  # fmt: skip
        seeds = "" if not e.get("seeds") else f" ({e['seeds'][0]}/{e['seeds'][1]} seeds)"
        ax.set_yticks([0], [f"{e['id']}{seeds}: {data.verdicts.get(e['id'], '?')}"], fontsize=7)
        ax.tick_params(axis="x", labelsize=6)
        ax.set_ylim(-1, 1)
    mark = " (reduced run: not a verdict)" if data.reduced else ""
    title = "Fig. C7  Effects, 95 % intervals over each claim's seeds (used/run), margins (dashed)"
    fig.suptitle(title + mark, fontsize=9)
    return fig
