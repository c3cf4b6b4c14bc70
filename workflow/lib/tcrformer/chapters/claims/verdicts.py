"""Each claim's criterion, evaluated by code: measurements in, a verdict and a sentence out.

A claim's `test` (config/claims.yaml) names its kind and its numbers; `judge` dispatches to
the function of that kind. The inputs are the measurements the claims chapter made:

    arms[arm]   a list over seeds of each seed's metrics (evaluate_claim_arm)
    analytic    the experiments without training (analytic.py)
    cost        the attention cost benchmark, speed the Transformer and GRU step rates

The verdicts are SUPPORTED, NOT SUPPORTED (at this scale) and INCONCLUSIVE. Nothing here
knows a result in advance: each function states its criterion in its docstring, as the
claims file does in words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SUPPORTED, REFUTED, INCONCLUSIVE = "SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    measured: str  # one sentence: the numbers the verdict rests on
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Measurements:
    arms: Mapping[str, Sequence[Mapping[str, Any]]]  # arm -> per-seed metrics
    analytic: Mapping[str, Any]
    cost: Mapping[str, Any]
    speed: Mapping[str, Any]
    eval_n: int

    def values(self, arm: str, metric: str) -> np.ndarray:
        return np.array([seed[metric] for seed in self.arms[arm]], dtype=float)


def _median(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.median(finite)) if finite.size else math.nan


def _range(x: np.ndarray) -> str:
    return f"{_median(x):.4g} ({np.nanmin(x):.4g}–{np.nanmax(x):.4g})"


def diverged(final: np.ndarray, reference_median: float, factor: float) -> np.ndarray:
    """A seed diverged when its final loss is not finite or above factor x the reference."""
    return ~np.isfinite(final) | (final > factor * reference_median)


# The kinds ---------------------------------------------------------------------------------


def _diverges(test, m: Measurements) -> Verdict:
    """SUPPORTED if at least `at_least` of the arm's seeds diverge while no reference seed
    does; NOT SUPPORTED if none diverges; otherwise INCONCLUSIVE."""
    arm, ref = m.values(test["arm"], "final_loss"), m.values(test["reference"], "final_loss")
    base = _median(ref)
    arm_div, ref_div = diverged(arm, base, test["factor"]), diverged(ref, base, test["factor"])
    text = (
        f"{arm_div.sum()}/{arm.size} {test['arm']} seeds diverged, {ref_div.sum()}/{ref.size} "
        f"{test['reference']}; final loss {_range(arm)} vs {_range(ref)}"
    )
    numbers = {"diverged": int(arm_div.sum()), "reference_diverged": int(ref_div.sum())}
    if arm_div.mean() >= test["at_least"] and not ref_div.any():
        return Verdict(SUPPORTED, text, numbers)
    if not arm_div.any():
        return Verdict(REFUTED, text, numbers)
    return Verdict(INCONCLUSIVE, text, numbers)


def _pre_ln(test, m: Measurements) -> Verdict:
    """SUPPORTED if Pre-LN without warm-up diverges nowhere and ends within `tolerance` of
    Pre-LN with warm-up, while Post-LN without warm-up diverges in half its seeds or ends
    more than `tolerance` worse than with it; NOT SUPPORTED if Pre-LN without warm-up
    diverges or ends worse; otherwise INCONCLUSIVE."""
    final = {k: m.values(test[k], "final_loss") for k in ("post", "post_no_warmup", "pre",
                                                            "pre_no_warmup")}  # fmt: skip
    tol, factor = test["tolerance"], test["factor"]
    pre_div = diverged(final["pre_no_warmup"], _median(final["pre"]), factor)
    post_div = diverged(final["post_no_warmup"], _median(final["post"]), factor)
    pre_ok = not pre_div.any() and _median(final["pre_no_warmup"]) <= (1 + tol) * _median(
        final["pre"]
    )
    post_worse = post_div.mean() >= 0.5 or _median(final["post_no_warmup"]) > (1 + tol) * (
        _median(final["post"])
    )
    text = (
        "final loss, 6 + 6 layers: Pre-LN " + _range(final["pre"]) + " with warm-up, "
        + _range(final["pre_no_warmup"]) + f" without ({pre_div.sum()} diverged); Post-LN "
        + _range(final["post"]) + " with, " + _range(final["post_no_warmup"])
        + f" without ({post_div.sum()} diverged)"
    )  # fmt: skip
    numbers = {"pre_diverged": int(pre_div.sum()), "post_diverged": int(post_div.sum())}
    if pre_ok and post_worse:
        return Verdict(SUPPORTED, text, numbers)
    if not pre_ok:
        return Verdict(REFUTED, text, numbers)
    return Verdict(INCONCLUSIVE, text, numbers)


def _smoothing(test, m: Measurements) -> Verdict:
    """SUPPORTED if the arm (no smoothing) is more over-confident than the reference in
    every seed and its median held-out exact is lower; NOT SUPPORTED if it is not more
    over-confident in every seed or its median exact is higher; otherwise INCONCLUSIVE."""
    arm, ref = test["arm"], test["reference"]
    over_a, over_r = m.values(arm, "overconfidence"), m.values(ref, "overconfidence")
    exact_a, exact_r = m.values(arm, "heldout_exact"), m.values(ref, "heldout_exact")
    ece_a, ece_r = m.values(arm, "ece"), m.values(ref, "ece")
    more_confident = bool(np.all(over_a > over_r))
    text = (
        f"confidence minus accuracy {_range(over_a)} without smoothing vs {_range(over_r)} "
        f"with; ECE {_range(ece_a)} vs {_range(ece_r)}; held-out exact {_range(exact_a)} vs "
        f"{_range(exact_r)}"
    )
    if more_confident and _median(exact_a) < _median(exact_r):
        return Verdict(SUPPORTED, text)
    if not more_confident or _median(exact_a) > _median(exact_r):
        return Verdict(REFUTED, text)
    return Verdict(INCONCLUSIVE, text)


def _higher(test, m: Measurements) -> Verdict:
    """SUPPORTED if the arm's median `metric` is higher than the reference's; NOT SUPPORTED
    if lower; INCONCLUSIVE if equal."""
    a, r = m.values(test["arm"], test["metric"]), m.values(test["reference"], test["metric"])
    text = f"{test['metric']} {_range(a)} ({test['arm']}) vs {_range(r)} ({test['reference']})"
    if _median(a) > _median(r):
        return Verdict(SUPPORTED, text)
    if _median(a) < _median(r):
        return Verdict(REFUTED, text)
    return Verdict(INCONCLUSIVE, text)


def _clipping(test, m: Measurements) -> Verdict:
    """SUPPORTED if an unclipped seed diverges or its median spike count exceeds the
    clipped one's; NOT SUPPORTED if none diverges, the spike medians are equal and the
    final-loss medians within `tolerance`; otherwise INCONCLUSIVE."""
    arm, ref = test["arm"], test["reference"]
    final_a, final_r = m.values(arm, "final_loss"), m.values(ref, "final_loss")
    spikes_a, spikes_r = m.values(arm, "spikes"), m.values(ref, "spikes")
    norms_a, norms_r = m.values(arm, "max_grad_norm"), m.values(ref, "max_grad_norm")
    div = diverged(final_a, _median(final_r), test["factor"])
    text = (
        f"{div.sum()}/{final_a.size} unclipped seeds diverged; loss spikes {_range(spikes_a)} "
        f"vs {_range(spikes_r)} clipped; largest pre-clip gradient norm {_range(norms_a)} vs "
        f"{_range(norms_r)}; final loss {_range(final_a)} vs {_range(final_r)}"
    )
    if div.any() or _median(spikes_a) > _median(spikes_r):
        return Verdict(SUPPORTED, text)
    close = abs(_median(final_a) - _median(final_r)) <= test["tolerance"] * _median(final_r)
    if _median(spikes_a) == _median(spikes_r) and close:
        return Verdict(REFUTED, text)
    return Verdict(INCONCLUSIVE, text)


def _init(test, m: Measurements) -> Verdict:
    """SUPPORTED if every step-0 sub-layer RMS ratio under the reference (Xavier) lies in
    [low, high] while one under the arm (default init) does not, and the arm's median final
    loss is no lower; NOT SUPPORTED if the arm's ratios all lie in [low, high] too;
    otherwise INCONCLUSIVE."""
    low, high = test["low"], test["high"]

    def inside(arm: str) -> bool:
        ratios = np.concatenate([np.asarray(s["activation_ratios"]) for s in m.arms[arm]])
        return bool(np.all((ratios >= low) & (ratios <= high)))

    def span(arm: str) -> str:
        ratios = np.concatenate([np.asarray(s["activation_ratios"]) for s in m.arms[arm]])
        return f"{ratios.min():.3g}–{ratios.max():.3g}"

    arm, ref = test["arm"], test["reference"]
    final_a, final_r = m.values(arm, "final_loss"), m.values(ref, "final_loss")
    text = (
        f"step-0 sub-layer output/input RMS {span(ref)} with Xavier, {span(arm)} with the "
        f"default init; final loss {_range(final_a)} vs {_range(final_r)}"
    )
    if inside(ref) and not inside(arm) and _median(final_a) >= _median(final_r):
        return Verdict(SUPPORTED, text)
    if inside(arm):
        return Verdict(REFUTED, text)
    return Verdict(INCONCLUSIVE, text)


def _beam(test, m: Measurements) -> Verdict:
    """SUPPORTED if, for every model, beam search's mean sequence log-probability and
    held-out exact are at least greedy's, with a higher log-probability somewhere; NOT
    SUPPORTED if its mean log-probability is lower for some model; otherwise INCONCLUSIVE."""
    pairs = [(arm, s) for arm in test["arms"] for s in m.arms[arm]]
    gain = np.array([s["beam_logprob"] - s["greedy_logprob"] for _, s in pairs])
    exact = np.array([s["beam_exact"] - s["greedy_exact"] for _, s in pairs])
    parts = []
    for arm in test["arms"]:
        rows = m.arms[arm]
        parts.append(
            f"{arm}: log-prob {np.mean([s['greedy_logprob'] for s in rows]):.4g} greedy, "
            f"{np.mean([s['beam_logprob'] for s in rows]):.4g} beam; exact "
            f"{np.median([s['greedy_exact'] for s in rows]):g} vs "
            f"{np.median([s['beam_exact'] for s in rows]):g}"
        )
    text = "; ".join(parts)
    if np.all(gain >= 0) and np.all(exact >= 0) and np.any(gain > 0):
        return Verdict(SUPPORTED, text)
    if np.any(gain < 0):
        return Verdict(REFUTED, text)
    return Verdict(INCONCLUSIVE, text)


def _positions(test, m: Measurements) -> Verdict:
    """SUPPORTED if the shuffle error is below `off_below` without positions and above
    `on_above` with them, and the arm's median held-out exact is at most `arm_at_most` of
    the strings while the reference's is at least `reference_at_least`; else NOT SUPPORTED."""
    off, on = m.analytic["permutation_off"], m.analytic["permutation_on"]
    arm = _median(m.values(test["arm"], "heldout_exact")) / m.eval_n
    ref = _median(m.values(test["reference"], "heldout_exact")) / m.eval_n
    text = (
        f"shuffle error {off:.2g} without positions, {on:.2g} with; held-out exact "
        f"{arm:.1%} without positional encoding vs {ref:.1%} with"
    )
    ok = off < test["off_below"] and on > test["on_above"]
    ok = ok and arm <= test["arm_at_most"] and ref >= test["reference_at_least"]
    return Verdict(SUPPORTED if ok else REFUTED, text)


def _sqrt_dk(test, m: Measurements) -> Verdict:
    """SUPPORTED if the scaled softmax Jacobian norm is at least `ratio_at_least` times the
    unscaled one and the arm's median mean loss over the first steps is higher than the
    reference's; NOT SUPPORTED if the ratio is smaller; otherwise INCONCLUSIVE."""
    a = m.analytic["scaling"]
    early_a, early_r = m.values(test["arm"], "early_loss"), m.values(test["reference"],
                                                                      "early_loss")  # fmt: skip
    text = (
        f"softmax Jacobian norm {a['jacobian_unscaled']:.3g} unscaled vs "
        f"{a['jacobian_scaled']:.3g} scaled (x{a['ratio']:.2f}; largest weight "
        f"{a['max_weight_unscaled']:.3f} vs {a['max_weight_scaled']:.3f}); mean loss over "
        f"the first {test['first_steps']} steps {_range(early_a)} unscaled vs {_range(early_r)}"
    )
    if a["ratio"] < test["ratio_at_least"]:
        return Verdict(REFUTED, text)
    if _median(early_a) > _median(early_r):
        return Verdict(SUPPORTED, text)
    return Verdict(INCONCLUSIVE, text)


def _relative(test, m: Measurements) -> Verdict:
    """SUPPORTED if every relative residual of the fitted maps is below `below`."""
    residuals = m.analytic["relative_residuals"]
    text = "relative residual " + ", ".join(f"k={k}: {r:.2g}" for k, r in residuals.items())
    ok = all(r < test["below"] for r in residuals.values())
    return Verdict(SUPPORTED if ok else REFUTED, text)


def _distance(test, m: Measurements) -> Verdict:
    """SUPPORTED if the similarity falls at every step over distances 0..`within`."""
    rise = m.analytic["cosine_first_rise"]
    where = "never, up to the largest distance" if rise is None else f"first at distance {rise}"
    text = f"cos(PE[0], PE[k]) falls from 1 and rises again {where}"
    ok = rise is None or rise > test["within"]
    return Verdict(SUPPORTED if ok else REFUTED, text)


def _importance(test, m: Measurements) -> Verdict:
    """SUPPORTED if the Spearman correlation of the heads' anti-diagonal attention mass with
    their ablation drop is below `supported_below`; NOT SUPPORTED if at least `refuted_at`;
    INCONCLUSIVE between, or when it is undefined (a constant mass or drop)."""
    heads = [h for seed in m.arms[test["arm"]] for h in seed["heads"]]
    mass = np.array([h["antidiagonal"] for h in heads])
    drop = np.array([h["drop"] for h in heads])
    rho = spearman(mass, drop)
    text = (
        f"Spearman {rho:.2f} over {len(heads)} cross-attention heads between anti-diagonal "
        f"mass ({mass.min():.2f}–{mass.max():.2f}) and the drop in held-out exact when the "
        f"head is removed ({drop.min():g}–{drop.max():g})"
    )
    if not math.isfinite(rho):
        return Verdict(INCONCLUSIVE, text, {"spearman": None})
    if rho < test["supported_below"]:
        return Verdict(SUPPORTED, text, {"spearman": rho})
    if rho >= test["refuted_at"]:
        return Verdict(REFUTED, text, {"spearman": rho})
    return Verdict(INCONCLUSIVE, text, {"spearman": rho})


def _quadratic(test, m: Measurements) -> Verdict:
    """SUPPORTED if the memory exponent over L >= min_length lies in [low, high]."""
    memory, seconds = m.cost["memory_exponent"], m.cost["time_exponent"]
    text = (
        f"allocated memory grows as L^{memory:.2f}, time as L^{seconds:.2f} "
        f"(L >= {m.cost['min_length']}, this machine)"
    )
    ok = test["low"] <= memory <= test["high"]
    return Verdict(SUPPORTED if ok else REFUTED, text)


def _rnn(test, m: Measurements) -> Verdict:
    """SUPPORTED if the GRU trains fewer steps per second and its exact fraction at the
    longest length is at least `forget_at_least` below its shortest while the
    Transformer's falls by at most `transformer_within`; NOT SUPPORTED if the GRU is no
    slower and within `transformer_within` of the Transformer at every length."""
    gru, ref = _by_length(m, test["arm"]), _by_length(m, test["reference"])
    lengths = sorted(gru)
    slower = m.speed["gru_steps_per_s"] < m.speed["transformer_steps_per_s"]
    forgets = gru[lengths[0]] - gru[lengths[-1]] >= test["forget_at_least"]
    steady = ref[lengths[0]] - ref[lengths[-1]] <= test["transformer_within"]
    text = (
        f"{m.speed['gru_steps_per_s']:.1f} GRU vs {m.speed['transformer_steps_per_s']:.1f} "
        f"Transformer steps/s; exact at length {lengths[0]}: {gru[lengths[0]]:.2f} GRU, "
        f"{ref[lengths[0]]:.2f} Transformer; at {lengths[-1]}: {gru[lengths[-1]]:.2f}, "
        f"{ref[lengths[-1]]:.2f}"
    )
    if slower and forgets and steady:
        return Verdict(SUPPORTED, text)
    close = all(abs(gru[n] - ref[n]) <= test["transformer_within"] for n in lengths)
    if not slower and close:
        return Verdict(REFUTED, text)
    return Verdict(INCONCLUSIVE, text)


def _by_length(m: Measurements, arm: str) -> dict[int, float]:
    """The median over seeds of the exact fraction at each string length."""
    lengths = m.arms[arm][0]["exact_by_length"]
    return {
        int(n): float(np.median([s["exact_by_length"][n] for s in m.arms[arm]])) for n in lengths
    }


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan if either is constant."""

    def ranks(v: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        r = np.empty(v.size)
        r[order] = np.arange(v.size, dtype=float)
        for value in np.unique(v):  # ties share their mean rank
            r[v == value] = r[v == value].mean()
        return r

    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


JUDGES: dict[str, Callable[[Mapping, Measurements], Verdict]] = {
    "diverges": _diverges,
    "pre_ln": _pre_ln,
    "smoothing": _smoothing,
    "higher": _higher,
    "clipping": _clipping,
    "init": _init,
    "beam": _beam,
    "positions": _positions,
    "sqrt_dk": _sqrt_dk,
    "relative": _relative,
    "distance": _distance,
    "importance": _importance,
    "quadratic": _quadratic,
    "rnn": _rnn,
}


def judge(test: Mapping[str, Any], measurements: Measurements) -> Verdict:
    return JUDGES[test["kind"]](test, measurements)
