"""The per-arm metrics a claim can test or report, one registry (METRICS), each with the
evaluation extra it needs.

An arm's evaluation (compute.evaluate_claim_arm) first measures what every arm gets (held-out
exact; the loss curve's numbers; calibration; on a fixed training set, the train minus
held-out gap), then the extras its claims need (EXTRAS), then every
registered metric whose extra ran. Each metric is a function of that evaluation, where its
definition is written once:

    diverged         1 if held-out exact < DIVERGED_BELOW or a loss is not finite, else 0
    beam_net_wins    (strings where beam's output is preferred to greedy's, minus those where
                     greedy's is) / strings, at the seed's first snapshot where greedy has
                     room (room_step; models.decoding.beam_outcomes); none without one
    has_room         1 if some snapshot of the seed left greedy room, else 0 (the beam
                     extra records that snapshot's step as beam_step)
    beam_exact_gain  beam's exact fraction minus greedy's, at that step
    residue_rho      the mean over decoder layers of the mean Spearman rho per residue step
                     between attention and occlusion importance (training.attribution)
    top1_agreement   last decoder layer: the chance that the most-attended residue is the
                     most important one, mean over residue steps (training.attribution)
    mass_on_top      last decoder layer: the attention on the most important residue
    init_scale       mean |log2| of the step-0 sub-layers' output over input RMS
    log2_excess      log2 of the eval-mode loss above the smoothing floor, averaged over the
                     claim's snapshots (measured at each: training.measures.eval_excess; a
                     diverged snapshot counts as the uniform predictor); the paired
                     difference of two arms' is the log2 ratio of their excesses
    initial_entropy  the encoder's self-attention entropy at step 0 (nats; low: spiky)
    top_defined      last decoder layer: the share of residue steps whose largest
                     importance is at least MIN_IMPORTANCE and twice the second (attribution)

A by-step metric (log2_excess) has the value {step: number} over the snapshots the arm's
claims name, and the claim that tests it reads it at its own `snapshots` (Metric.at_steps,
the rule verdicts.AT_STEPS applies: log2 of the mean over them). The excess is measured on
the first `excess_strings` held-out strings its claims name (default 200, EXCESS_STRINGS of
training.measures; more than eval_n: a held-out set of that many from the arm's eval_seed),
and also on the first EXCESS_PREFIXES of them (excess_by_prefix), for a pilot to compare.

Fractions of strings are counts: every arm records held-out exact as integers, the strings
right and the strings evaluated (heldout_exact of heldout_total), and on a fixed training set
the same of its training strings (train_exact of train_total); the fractions beside them
(heldout_fraction, train_fraction, gap) are those counts divided. A claim reads a counted
metric (COUNTED, COUNTED_DIFFERENCES) from its counts, so its per-seed differences are counts
out of a known N and take the exact test (protocol, "Counts"); float32 fractions, as runs
before the counts stored them, are off that lattice.

Each count also keeps its strings, so that a pilot's spread can be split into the strings'
share and the seeds': heldout_bits (and train_bits beside train_exact) is which strings were
exactly right, in evaluation order, one bit each (pack_bits; exact_bits reads a record's
back, None for a record written before they were kept). The excess keeps, at each snapshot
step, what its standard error over the strings needs (excess_per_string, ratio_statistics:
the excess is a ratio of sums over the strings' tokens, its error by the delta method,
ratio_standard_error).

A new metric is one function of the ArmEvaluation here and one entry in METRICS, naming the
extra it needs (None: every arm computes it). A claim then names it in its test's `metric`
or `report`, and Settings.extras_of asks for its extra on the claim's arms, at the snapshot
steps those claims name (none: the trained model alone, at its last step).

numpy and torch are imported inside the functions: the workflow asks Settings.extras_of
when it reads the claims file, before any rule runs.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tcrclaims.kinds import DIVERGED_BELOW

INIT_STRINGS = 128  # held-out strings the step-0 signal scales are measured on
ATTRIBUTION_STRINGS = 200  # held-out strings the residue-level attribution is measured on
REPLACEMENTS = 3  # occlusions per residue (attribution.importance)


GREEDY_ROOM = (0.2, 0.9)  # greedy exact fraction of a seed's snapshot with room for beam
EXCESS_PREFIXES = (200, 500, 1000, 2000)  # leading strings the excess is also measured on

# A counted fraction: the metric -> the record's keys of its count and of the strings counted.
COUNTED = {
    "heldout_fraction": ("heldout_exact", "heldout_total"),
    "train_fraction": ("train_exact", "train_total"),
}
# A difference of counted fractions: the metric -> (the fraction, the one subtracted).
COUNTED_DIFFERENCES = {"gap": ("train_fraction", "heldout_fraction")}


def count_of(correct) -> tuple[int, int]:
    """(strings right, strings counted) of a (B,) bool tensor, as Python integers: a fraction
    of strings is kept as its count, never as a float."""
    return int(correct.sum()), int(correct.numel())


def pack_bits(correct) -> str:
    """Which strings were right, as text: base64 of np.packbits of the (B,) bools (a tensor
    or an array) in their order, bit b of a byte being string 8 k + b (bitorder "little"); the
    last byte's unused bits are 0. B is kept beside it (the record's *_total)."""
    import numpy as np

    if hasattr(correct, "numpy"):  # a tensor
        correct = correct.detach().cpu().numpy()
    bits = np.asarray(correct, dtype=bool).ravel()
    return base64.b64encode(np.packbits(bits, bitorder="little")).decode("ascii")


def unpack_bits(text: str, n: int):
    """pack_bits undone: the (n,) bool array; text of another length, or with a bit set past
    the n-th, raises."""
    import numpy as np

    packed = np.frombuffer(base64.b64decode(text, validate=True), dtype=np.uint8)
    if packed.size != (n + 7) // 8:
        raise ValueError(f"{packed.size} bytes of bits, not {(n + 7) // 8} for {n} strings")
    bits = np.unpackbits(packed, bitorder="little").astype(bool)
    if bits[n:].any():
        raise ValueError(f"a bit is set past the {n} strings")
    return bits[:n]


def exact_bits(record: Mapping[str, Any], strings: str = "heldout"):
    """A record's `strings` ("heldout" or "train") exactly right, one bool each in evaluation
    order, from its {strings}_bits and {strings}_total; None where the record has no bits (it
    was written before they were kept, or the arm has no fixed training set). Bits whose
    count is not the record's {strings}_exact raise."""
    text = record.get(f"{strings}_bits")
    if text is None:
        return None
    bits = unpack_bits(text, record[f"{strings}_total"])
    count = record.get(f"{strings}_exact")
    if count is not None and int(bits.sum()) != count:
        raise ValueError(f"{strings}_bits: {int(bits.sum())} strings right, not {count}")
    return bits


def ratio_statistics(num, den) -> dict[str, float]:
    """What the delta method needs of a ratio of sums over n strings, R = sum(num) / sum(den)
    = mean_num / mean_den: n, both means, both variances and their covariance (ddof 1, NaN
    for one string). For the excess, num is a string's tokens' excess loss summed and den its
    tokens (string_excess)."""
    import numpy as np

    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    n = int(num.size)
    with np.errstate(invalid="ignore", over="ignore"):  # a diverged model's: not finite
        spread = np.cov(num, den, ddof=1) if n > 1 else np.full((2, 2), math.nan)
    return {"n": n, "mean_num": float(num.mean()), "mean_den": float(den.mean()),
            "var_num": float(spread[0, 0]), "var_den": float(spread[1, 1]),
            "cov": float(spread[0, 1])}  # fmt: skip


def ratio_standard_error(stats: Mapping[str, float], strings: int | None = None) -> float:
    """The standard error of R = mean_num / mean_den over `strings` strings drawn as the n of
    `stats` were (None: those n), by the delta method:

        se(R)^2 = (var_num - 2 R cov + R^2 var_den) / (strings mean_den^2)

    (the linearised numerator num - R den has that variance). For the excess, the error of
    log2 of it is se / (R ln 2)."""
    n = stats["n"] if strings is None else strings
    r = stats["mean_num"] / stats["mean_den"]
    linear = stats["var_num"] - 2 * r * stats["cov"] + r * r * stats["var_den"]
    return math.sqrt(max(linear, 0.0) / n) / abs(stats["mean_den"])


def counted_value(record, metric: str) -> tuple[float, int] | None:
    """A counted metric's value from a record's integer counts, and the N its value is a count
    out of (a difference: the least common multiple of both); None where the record has no
    counts for it (written before they were stored). A count that is not an integer raises;
    a missing one (None) gives NaN."""
    if metric in COUNTED_DIFFERENCES:
        parts = [counted_value(record, name) for name in COUNTED_DIFFERENCES[metric]]
        if any(part is None for part in parts):
            return None
        (a, n_a), (b, n_b) = parts
        return a - b, math.lcm(n_a, n_b)
    count_key, total_key = COUNTED[metric]
    if total_key not in record:
        return None
    count, total = record.get(count_key), record[total_key]
    for key, value in ((count_key, count), (total_key, total)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(
                f"{metric}: {key} is {value!r}, not an integer count of strings (a fraction "
                "stored as a float cannot take the exact test)"
            )
    if total is None or total < 1 or (count is not None and not 0 <= count <= total):
        raise ValueError(f"{metric}: {count_key} {count!r} of {total_key} {total!r}")
    return (math.nan if count is None else count / total), total


def room_step(greedy_exact, room: tuple[float, float] = GREEDY_ROOM) -> int | None:
    """A seed's beam snapshot: the first step, in step order, whose greedy exact fraction
    lies in `room` (ends included); None when none does. `greedy_exact` is {step: fraction}:
    greedy alone, so the choice is made before any beam output is read."""
    low, high = room
    return next((step for step in sorted(greedy_exact) if low <= greedy_exact[step] <= high),
                None)  # fmt: skip


@dataclass
class ArmEvaluation:
    """What an arm's evaluation has: the trained model and its recipe (with the evaluation
    fields), the held-out strings src (eval_n, Ls) and targets tgt (eval_n, Lt + 1), the
    training history (loss, grad_norm per step), and what is measured so far: `numbers`
    are written to the job's metrics.json, `arrays` only handed on to the metrics."""

    model: Any
    recipe: Any
    src: Any
    tgt: Any
    history: Any
    beam_width: int = 1
    snapshots: dict[int, Any] = field(default_factory=dict)  # step -> the weights kept then
    numbers: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Any] = field(default_factory=dict)
    excess_strings: int | None = None  # held-out strings of the excess (None: EXCESS_STRINGS)

    def heldout_strings(self, n: int):
        """The first n held-out strings and targets: the evaluation's own, or where it has
        fewer, a held-out set of n drawn from the recipe's eval_seed (shared by the arms of
        a seed, as the evaluation's are)."""
        if n <= self.src.size(0):
            return self.src[:n], self.tgt[:n]
        from tcrformer.training.data import heldout_set

        r = self.recipe
        return heldout_set(n, r.min_len, r.max_len, r.eval_seed)

    @property
    def floor(self) -> float:
        """The lowest loss the recipe's label smoothing allows (nats)."""
        from tcrformer.training.schedule import label_smoothing_floor

        return label_smoothing_floor(self.recipe.label_smoothing)


# The extras: what some arms' evaluations add --------------------------------------------------


def at_steps(e: ArmEvaluation, steps: Sequence[int]) -> dict[int, Any]:
    """{step: model} at the snapshot steps named, or the trained model at its last step."""
    if not steps:
        return {e.recipe.steps: e.model}
    missing = sorted(set(steps) - set(e.snapshots))
    if missing:
        raise ValueError(f"arm {e.recipe.name}: no weight snapshot at steps {missing}")
    return {step: e.snapshots[step] for step in steps}


def beam(e: ArmEvaluation, steps: Sequence[int]) -> None:
    """Greedy's exact fraction at each step; at the first with room (from greedy alone),
    greedy against beam search on every held-out string, both outputs scored by one
    teacher-forced pass: wins, ties, losses, exact and mean log-probabilities."""
    from tcrformer.training import measures

    models = at_steps(e, steps)
    counts = {s: count_of(measures.exact_rows(m, e.src, e.tgt)) for s, m in models.items()}
    greedy = {s: right / total for s, (right, total) in counts.items()}
    step = room_step(greedy)
    e.numbers.update(greedy_by_step=greedy, beam_step=step)
    if step is not None:
        e.numbers.update(measures.beam_metrics(models[step], e.src, e.tgt, e.beam_width))


def attribution(e: ArmEvaluation, _steps: Sequence[int]) -> None:
    """Every decoder layer's cross-attention and the occlusion importance of each source
    residue at each target step, on the first ATTRIBUTION_STRINGS held-out strings; the
    rank correlation by layer (reported)."""
    from tcrformer.training.attribution import attention_and_importance, rho_by_layer

    src, tgt = e.src[:ATTRIBUTION_STRINGS], e.tgt[:ATTRIBUTION_STRINGS]
    attention, importance = attention_and_importance(e.model, src, tgt, REPLACEMENTS)
    e.arrays["attribution"] = (attention, importance, src, tgt)
    e.numbers.update(rho_by_layer(attention, importance, src, tgt), replacements=REPLACEMENTS)


def init(e: ArmEvaluation, _steps: Sequence[int]) -> None:
    """The seed's initial weights (step 0): each sub-layer's output RMS over its input RMS."""
    from tcrformer.training import measures

    src, tgt = e.src[:INIT_STRINGS], e.tgt[:INIT_STRINGS]
    e.numbers["activation_ratios"] = measures.activation_ratios(e.recipe, src, tgt)


def excess(e: ArmEvaluation, steps: Sequence[int]) -> None:
    """The eval-mode excess over the floor at each step, on the first `excess_strings`
    held-out strings (EXCESS_STRINGS unless the arm's claims name more), and on the first
    EXCESS_PREFIXES of them where those are fewer (excess_by_prefix: {strings: {step: x}}).
    At each step, also what its standard error over those strings needs (excess_per_string,
    excess_statistics)."""
    from tcrformer.training import measures

    n = e.excess_strings or measures.EXCESS_STRINGS
    src, tgt = e.heldout_strings(n)
    models = at_steps(e, steps)

    def measured(k: int) -> dict[int, float]:
        return {step: measures.eval_excess(model, src[:k], tgt[:k], e.recipe.label_smoothing)
                for step, model in models.items()}  # fmt: skip

    e.numbers["excess_by_step"] = measured(n)
    e.numbers["excess_strings"] = n
    by_step = e.numbers["excess_by_step"]
    e.numbers["excess_per_string"] = {
        step: excess_statistics(model, src, tgt, e.recipe.label_smoothing, by_step[step])
        for step, model in models.items()
    }
    prefixes = [k for k in EXCESS_PREFIXES if k < n]
    if prefixes:
        e.numbers["excess_by_prefix"] = {k: measured(k) for k in prefixes}


def string_excess(model, src, tgt, label_smoothing: float):
    """training.measures.eval_excess string by string: for each string b, its tokens' excess
    loss summed, sum_t (loss_bt - floor), and its number of tokens n_b (its letters and
    <eos>), (B,) float64 arrays each. The same eval-mode objective, teacher-forced (each
    token's label-smoothed loss in float32, as models.transformer.token_loss computes it,
    then summed in float64), so eval_excess is sum_b excess_b / sum_b n_b: a ratio of sums
    over the strings, not a mean of theirs, up to its float32 mean and its cap."""
    import torch
    import torch.nn.functional as F

    from tcrformer.models.transformer import decoder_io, make_masks
    from tcrformer.training.data import PAD
    from tcrformer.training.schedule import label_smoothing_floor

    tgt_in, tgt_out = decoder_io(tgt)
    with torch.no_grad():
        model.eval()
        logits = model(src, tgt_in, *make_masks(src, tgt_in, PAD))
        losses = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(),
                                 ignore_index=PAD, label_smoothing=label_smoothing,
                                 reduction="none").view(tgt_out.shape)  # fmt: skip
    tokens = (tgt_out != PAD).sum(1).double()  # a padded token's loss is 0
    excess = losses.double().sum(1) - label_smoothing_floor(label_smoothing) * tokens
    return excess.cpu().numpy(), tokens.cpu().numpy()


def excess_statistics(model, src, tgt, label_smoothing: float, measured: float) -> dict:
    """The excess of `model` on these strings, string by string (string_excess), as
    ratio_statistics: mean_num / mean_den is the excess eval_excess measured (`measured`), up
    to float32 rounding; `capped` where that was eval_excess's cap, the uniform predictor's
    excess ln V - floor (a diverged model): the constant the metric uses instead."""
    from tcrformer.training.data import VOCAB_SIZE
    from tcrformer.training.schedule import label_smoothing_floor

    stats = ratio_statistics(*string_excess(model, src, tgt, label_smoothing))
    uniform = math.log(VOCAB_SIZE) - label_smoothing_floor(label_smoothing)
    return {**stats, "capped": measured == uniform}


def entropy(e: ArmEvaluation, _steps: Sequence[int]) -> None:
    """The encoder's self-attention entropy at step 0 (reported)."""
    from tcrformer.training import measures

    e.numbers["initial_entropy"] = measures.initial_attention_entropy(
        e.recipe, e.src[:ATTRIBUTION_STRINGS]
    )


# name -> what it adds, in the order an evaluation runs them
EXTRAS: dict[str, Callable[[ArmEvaluation, Sequence[int]], None]] = {
    "beam": beam,
    "attribution": attribution,
    "init": init,
    "snapshots": excess,
    "entropy": entropy,
}


# The metrics ------------------------------------------------------------------------------------


def diverged(e: ArmEvaluation) -> float:
    n = e.numbers
    return float(n["heldout_fraction"] < DIVERGED_BELOW or not math.isfinite(n["final_loss"]))


def _at_room(e: ArmEvaluation, value: Callable[[dict], float]) -> float:
    return math.nan if e.numbers["beam_step"] is None else value(e.numbers)


def beam_net_wins(e: ArmEvaluation) -> float:
    return _at_room(e, lambda n: (n["beam_wins"] - n["beam_losses"]) / len(e.src))


def has_room(e: ArmEvaluation) -> float:
    return float(e.numbers["beam_step"] is not None)


def beam_exact_gain(e: ArmEvaluation) -> float:
    return _at_room(e, lambda n: (n["beam_exact"] - n["greedy_exact"]) / len(e.src))


def residue_rho(e: ArmEvaluation) -> float:
    import numpy as np

    return float(np.mean(e.numbers["residue_rho_by_layer"]))


def _last_layer_residue_steps(e: ArmEvaluation):
    """The last decoder layer's attention and the importance at the residue steps,
    (rows, Ls) each. Padding is 0 in both, and never a top: a row's attention on its
    residues sums to 1, and a row used has an importance above attribution.MIN_IMPORTANCE."""
    from tcrformer.models.transformer import decoder_io
    from tcrformer.training.attribution import residues

    attention, importance, _, tgt = e.arrays["attribution"]
    steps = residues(decoder_io(tgt)[1]).to(importance.device)  # (B, Lt)
    return attention[-1][steps].cpu().numpy(), importance[steps].cpu().numpy()


def last_layer_top1(e: ArmEvaluation) -> float:
    from tcrformer.training import attribution

    return attribution.top1_agreement(*_last_layer_residue_steps(e))


def last_layer_mass_on_top(e: ArmEvaluation) -> float:
    from tcrformer.training import attribution

    return attribution.mass_on_top(*_last_layer_residue_steps(e))


def step0_scale(e: ArmEvaluation) -> float:
    from tcrformer.training import measures

    return measures.init_scale(e.numbers["activation_ratios"])


def log2_excess(e: ArmEvaluation) -> dict[int, float]:
    return dict(e.numbers["excess_by_step"])  # log2 of their mean: verdicts.AT_STEPS


def initial_entropy(e: ArmEvaluation) -> float:
    return e.numbers["initial_entropy"]


def last_layer_top_defined(e: ArmEvaluation) -> float:
    from tcrformer.training import attribution

    return attribution.top_defined(_last_layer_residue_steps(e)[1])


@dataclass(frozen=True)
class Metric:
    """A per-arm number a claim can test or report: the function that computes it from an
    ArmEvaluation, and the extra (EXTRAS) that evaluation needs first, or None."""

    compute: Callable[[ArmEvaluation], float | dict[int, float]]
    extra: str | None = None
    at_steps: str | None = None  # a by-step metric: how a claim picks its steps (verdicts)


METRICS: dict[str, Metric] = {
    "diverged": Metric(diverged),
    "beam_net_wins": Metric(beam_net_wins, "beam"),
    "has_room": Metric(has_room, "beam"),
    "beam_exact_gain": Metric(beam_exact_gain, "beam"),
    "residue_rho": Metric(residue_rho, "attribution"),
    "top1_agreement": Metric(last_layer_top1, "attribution"),
    "mass_on_top": Metric(last_layer_mass_on_top, "attribution"),
    "init_scale": Metric(step0_scale, "init"),
    "log2_excess": Metric(log2_excess, "snapshots", at_steps="log2_mean"),
    "initial_entropy": Metric(initial_entropy, "entropy"),
    "top_defined": Metric(last_layer_top_defined, "attribution"),
}
if not {m.extra for m in METRICS.values()} <= {None, *EXTRAS}:
    raise ImportError("metrics: a metric needs an extra that EXTRAS does not have")


def extras_for(wanted: Iterable[tuple[str, Sequence[int]]]) -> dict[str, tuple[int, ...]]:
    """{extra: snapshot steps} for the (metric, the claim's snapshot steps) an arm's claims
    test or report: the extras their registered metrics need, in EXTRAS' order, each with
    the steps any of those claims names (a name the registry does not hold is measured for
    every arm, or not at all: it needs none)."""
    steps: dict[str, set[int]] = {}
    for name, snapshots in wanted:
        extra = METRICS[name].extra if name in METRICS else None
        if extra is not None:
            steps.setdefault(extra, set()).update(snapshots)
    return {extra: tuple(sorted(steps[extra])) for extra in EXTRAS if extra in steps}


def stepped() -> dict[str, str]:
    """{metric: its at_steps rule} of the by-step metrics (what verdicts.Measurements reads)."""
    return {name: metric.at_steps for name, metric in METRICS.items() if metric.at_steps}


def computable(extras: Iterable[str]) -> list[str]:
    """The metrics an evaluation with these extras computes: every metric that needs none,
    and each whose extra ran."""
    ran = {None, *extras}
    return [name for name, metric in METRICS.items() if metric.extra in ran]
