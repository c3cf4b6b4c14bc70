"""What is measured on a trained reversal model, each measure defined once.

Exact reversal (explainer section 10.9): greedy decoding from <bos>; a string of length L counts
when its L letters and the <eos> after them all match the target.

Anti-diagonal: writing the k-th letter of the answer (k = 0..L-1) the decoder should look at
source position L-1-k; the measure is the mean, over strings and letters, of the attention
weight there.

Shapes: B strings, Ls source and Lt target positions, h heads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from tcrformer.models.fast import Attention, FeedForward, record_attention
from tcrformer.models.transformer import decoder_io, greedy_decode, make_masks
from tcrformer.training.data import BOS, EOS, PAD, VOCAB_SIZE, heldout_set
from tcrformer.training.model import build_model

FINAL_STEPS = 100  # the final loss: the mean of the last steps
SPIKE_WINDOW, SPIKE_FACTOR, SPIKE_AFTER = 50, 1.5, 100
STRESS_WINDOW = 50  # steps either side of a bad batch
CALIBRATION_BINS = 10
DECODE_BATCH = 500  # strings decoded at once


def heldout(recipe) -> tuple[Tensor, Tensor]:
    """The recipe's held-out strings and their reversals: (eval_n, Ls), (eval_n, Ls + 2)."""
    return heldout_set(recipe.eval_n, recipe.min_len, recipe.max_len, recipe.eval_seed)


def training_strings(recipe) -> tuple[Tensor, Tensor] | None:
    """The first eval_n strings of a recipe's fixed training set (None: fresh strings)."""
    if recipe.train_set is None:
        return None
    from tcrformer.training.data import TrainingStrings

    fixed = TrainingStrings(recipe).fixed
    return fixed[0][: recipe.eval_n], fixed[1][: recipe.eval_n]


# Exact reversals ----------------------------------------------------------------------------


def scored(written: Tensor, tgt: Tensor) -> Tensor:
    """(B,) bool: each decoded row (from <bos>) matches its target, letters and <eos>."""
    padded = torch.full_like(tgt, PAD)
    n = min(written.size(1), tgt.size(1))
    padded[:, :n] = written[:, :n]
    return ((padded == tgt) | (tgt == PAD)).all(dim=1)


def exact_rows(model: nn.Module, src: Tensor, tgt: Tensor) -> Tensor:
    """(B,) bool: the model's greedy output is the target."""
    correct = []
    for start in range(0, src.size(0), DECODE_BATCH):
        s, t = src[start : start + DECODE_BATCH], tgt[start : start + DECODE_BATCH]
        out = greedy_decode(model, s, max_len=t.size(1) - 1, bos=BOS, eos=EOS, pad_idx=PAD)
        correct.append(scored(out, t))
    return torch.cat(correct)


# Where cross-attention looks ----------------------------------------------------------------


def cross_attention(model: nn.Module, src: Tensor, written: Tensor, layer: int) -> Tensor:
    """Cross-attention weights (B, h, Lt, Ls) of decoder layer `layer` (1-based), the decoder
    teacher-forced on `written` (<bos> and the tokens written after it)."""
    tgt_in = written[:, :-1]
    with torch.no_grad(), record_attention(model):  # a no-op for the reference
        model.eval()
        model(src, tgt_in, *make_masks(src, tgt_in, PAD))
        return model.decoder.layers[layer - 1].cross_attn.attn


def antidiagonal(weights: Tensor, lengths) -> float:
    """Mean over strings b and letters k < L_b of weights[b, k, L_b - 1 - k].

    weights (B, Lt, Ls): one map per string (one head's, or the heads' mean); a string's
    letters beyond the rows written (Lt) are left out."""
    picked = []
    for b, length in enumerate(int(n) for n in lengths):
        k = torch.arange(min(length, weights.size(1)))
        picked.append(weights[b, k, length - 1 - k])
    return float(torch.cat(picked).mean())


# The loss curve --------------------------------------------------------------------------------


def spikes(losses: np.ndarray) -> int:
    """Steps after SPIKE_AFTER whose loss exceeds SPIKE_FACTOR x the median of the
    SPIKE_WINDOW steps before it."""
    count = 0
    for t in range(max(SPIKE_AFTER, SPIKE_WINDOW), len(losses)):
        window = losses[t - SPIKE_WINDOW : t]
        if np.isfinite(losses[t]) and losses[t] > SPIKE_FACTOR * np.median(window):
            count += 1
    return count


def worst_jump(losses: np.ndarray, floor: float) -> float:
    """The largest rise of the excess loss (loss - floor, the part training can remove) in
    one step, against the median excess of the SPIKE_WINDOW steps before it, in log2 units,
    after SPIKE_AFTER steps: 1.0 is a batch whose excess loss doubled. Near the label-smoothing
    floor a plain loss ratio cannot move (0.611 + a doubled 0.02 is a 3 % rise); this can.
    Infinite when a loss is not finite."""
    if not np.isfinite(losses).all():
        return math.inf
    excess = np.maximum(losses - floor, 1e-12)
    worst = -math.inf
    for t in range(max(SPIKE_AFTER, SPIKE_WINDOW), len(losses)):
        worst = max(worst, math.log2(excess[t] / np.median(excess[t - SPIKE_WINDOW : t])))
    return float(worst)


def stress_response(
    losses: np.ndarray, norms: np.ndarray, step: int, floor: float
) -> dict[str, float]:
    """What one bad batch at `step` (1-based) did. Damage: the mean excess loss of the
    STRESS_WINDOW steps after it over that of the STRESS_WINDOW steps before, in log2 units
    (1.0: the excess doubled; infinite when a loss is not finite). The manipulation check:
    that step's pre-clip gradient norm over the median of the steps before it."""
    before = slice(max(0, step - 1 - STRESS_WINDOW), step - 1)
    after = slice(step, step + STRESS_WINDOW)
    if not np.isfinite(losses[after]).all():
        damage = math.inf
    else:
        excess = np.maximum(losses - floor, 1e-12)
        damage = math.log2(excess[after].mean() / excess[before].mean())
    return {
        "stress_damage": float(damage),
        "stress_norm_ratio": float(norms[step - 1] / np.median(norms[before])),
    }


def curve_metrics(
    history: pd.DataFrame, first_steps: int = 500, floor: float = 0.0, stress_step: int = 0
) -> dict[str, float]:
    """The final loss (mean of the last FINAL_STEPS; infinite when a loss is not finite),
    the mean loss of the first steps, loss spikes, the worst excess-loss jump above `floor`,
    the largest pre-clip gradient norm, and what a bad batch at `stress_step` did (where
    there was one)."""
    losses, norms = history["loss"].to_numpy(), history["grad_norm"].to_numpy()
    final = losses[-FINAL_STEPS:]
    metrics = {
        "final_loss": float(final.mean()) if np.isfinite(final).all() else math.inf,
        "early_loss": float(np.mean(losses[:first_steps])),
        "spikes": spikes(losses),
        "worst_jump": worst_jump(losses, floor),
        "max_grad_norm": float(np.nanmax(norms)),
    }
    if stress_step:
        metrics.update(stress_response(losses, norms, stress_step, floor))
    return metrics


# Calibration, decoding, ablations, initial scales ------------------------------------------------


def calibration(model: nn.Module, src: Tensor, tgt: Tensor) -> dict[str, Any]:
    """Teacher-forced, on the held-out targets: confidence (the top probability) against
    accuracy, their difference (over-confidence), ECE over CALIBRATION_BINS bins, and the
    bins themselves (for the reliability figure)."""
    tgt_in, tgt_out = decoder_io(tgt)
    with torch.no_grad():
        model.eval()
        logits = model(src, tgt_in, *make_masks(src, tgt_in, PAD))
    probs = logits.double().softmax(-1)
    real = tgt_out != PAD
    confidence, guess = probs.max(-1)
    confidence, correct = confidence[real].numpy(), (guess == tgt_out)[real].numpy()
    edges = np.linspace(0, 1, CALIBRATION_BINS + 1)
    which = np.clip(np.digitize(confidence, edges) - 1, 0, CALIBRATION_BINS - 1)
    bins = []
    for b in range(CALIBRATION_BINS):
        inside = which == b
        if inside.any():
            bins.append([int(inside.sum()), float(confidence[inside].mean()),
                         float(correct[inside].mean())])  # fmt: skip
        else:
            bins.append([0, None, None])  # an empty bin has no confidence or accuracy
    ece = sum(n * abs(c - a) for n, c, a in bins if n) / len(confidence)
    return {
        "overconfidence": float(confidence.mean() - correct.mean()),
        "ece": float(ece),
        "calibration_bins": bins,  # [count, mean confidence, accuracy] per bin
    }


def beam_metrics(model: nn.Module, src: Tensor, tgt: Tensor, width: int) -> dict[str, float]:
    """Greedy against beam search: exact reversals, the mean sequence log-probability, and
    beam's wins, ties and losses (decoding.beam_outcomes).

    Both decoders' outputs are scored by the one teacher-forced pass (sequence_log_prob),
    so the same output gets the same score to the bit. The beam's own running score comes
    from incremental float32 steps and differs from it by ~1e-8, which alone would make an
    equal output look worse or better."""
    from tcrformer.models.decoding import beam_outcomes, beam_search, sequence_log_prob

    max_len = tgt.size(1) - 1
    greedy = greedy_decode(model, src, max_len=max_len, bos=BOS, eos=EOS, pad_idx=PAD)
    beam, _ = beam_search(model, src, max_len, BOS, EOS, width, PAD)
    greedy_logprob = sequence_log_prob(model, src, greedy, EOS, PAD)
    beam_logprob = sequence_log_prob(model, src, beam, EOS, PAD)
    finished = [(out == EOS).any(1).numpy() for out in (greedy, beam)]  # wrote <eos>
    same = same_through_eos(greedy, beam).numpy()
    outcomes = beam_outcomes(greedy_logprob.numpy(), beam_logprob.numpy(), same, *finished)
    return {
        "greedy_exact": int(scored(greedy, tgt).sum()),
        "beam_exact": int(scored(beam, tgt).sum()),
        "greedy_logprob": float(greedy_logprob.mean()),
        "beam_logprob": float(beam_logprob.mean()),
        "beam_wins": outcomes["wins"],
        "beam_ties": outcomes["ties"],
        "beam_losses": outcomes["losses"],
    }


def same_through_eos(a: Tensor, b: Tensor) -> Tensor:
    """(B,) bool: two decodings (from <bos>) write the same tokens up to their first <eos>."""

    def through_eos(rows: Tensor) -> list[tuple[int, ...]]:
        out = []
        for row in rows.tolist():
            end = row.index(EOS) + 1 if EOS in row else len(row)
            out.append(tuple(row[:end]))
        return out

    return torch.tensor([x == y for x, y in zip(through_eos(a), through_eos(b), strict=True)])


def init_scale(ratios) -> float:
    """How far the step-0 sub-layers move the signal's scale: the mean |log2| of their
    output-over-input RMS ratios (0: every sub-layer keeps the scale; 1: a factor 2 each)."""
    return float(np.mean(np.abs(np.log2(np.asarray(ratios, float)))))


def initial_model(recipe) -> nn.Module:
    """The seed's weights at step 0, in eval mode."""
    torch.manual_seed(recipe.seed)
    return build_model(recipe.architecture(), recipe.impl, init=recipe.init).eval()


def activation_ratios(recipe, src: Tensor, tgt: Tensor) -> list[float]:
    """At step 0 (the seed's initial weights), eval mode, one batch: RMS of every attention
    and feed-forward sub-layer's output over the RMS of its input."""
    model = initial_model(recipe)
    ratios: list[float] = []

    def hook(module, inputs, output):
        x = inputs[0]
        ratios.append(float(output.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, Attention | FeedForward)]  # fmt: skip
    tgt_in, _ = decoder_io(tgt)
    with torch.no_grad():
        model(src, tgt_in, *make_masks(src, tgt_in, PAD))
    for handle in handles:
        handle.remove()
    return ratios


# Measures at weight snapshots, and how spiky attention is ---------------------------------

EXCESS_STRINGS = 200  # held-out strings the eval-mode excess is measured on


def eval_excess(model: nn.Module, src: Tensor, tgt: Tensor, label_smoothing: float) -> float:
    """The objective in eval mode (dropout off), teacher-forced on fixed strings, above its
    label-smoothing floor: the loss training can still remove, without the dropout noise
    that the training loss carries alike in every arm. A model that scores worse than the
    uniform predictor (a run that diverged; untrained weights too) gets the uniform
    predictor's excess (ln V - floor: its loss under any target), the worst it can be judged,
    so the value is always finite."""
    from tcrformer.training.loop import batch_loss  # the loop's own objective
    from tcrformer.training.schedule import label_smoothing_floor

    floor = label_smoothing_floor(label_smoothing)
    with torch.no_grad():
        model.eval()
        loss = float(batch_loss(model, src, tgt, label_smoothing))
    worst = math.log(VOCAB_SIZE) - floor
    return loss - floor if math.isfinite(loss) and loss - floor <= worst else worst


def snapshot_models(recipe, checkpoint_dir):
    """(step, model) for each of the recipe's snapshot steps, as training kept them."""
    from tcrformer.training.checkpoints import snapshot_path
    from tcrformer.training.model import load_model

    for step in recipe.snapshot_steps:
        model, _ = load_model(snapshot_path(checkpoint_dir, recipe, step), recipe.impl)
        yield step, model


def attention_entropy(model: nn.Module, src: Tensor) -> float:
    """Mean entropy (nats) of the encoder's self-attention rows, over layers, heads, strings
    and real query positions: low when the softmax is spiky (ln Ls when it is flat)."""
    real = src != PAD  # (B, Ls)
    entropies = []
    with torch.no_grad(), record_attention(model):
        model.eval()
        model.encode(src, make_masks(src, src, PAD)[0])
        for layer in model.encoder.layers:
            p = layer.self_attn.attn.double()  # (B, h, Ls, Ls), 0 on padding keys
            h = -(p * p.clamp_min(1e-300).log()).sum(-1)  # (B, h, Ls)
            entropies.append(h.mean(1)[real])  # (real queries,)
    return float(torch.cat(entropies).mean())


def initial_attention_entropy(recipe, src: Tensor) -> float:
    """attention_entropy of the seed's weights at step 0."""
    return attention_entropy(initial_model(recipe), src)
