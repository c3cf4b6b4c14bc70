"""Chapter claims' rules, each returning its outputs by name.

train_claim_arm     one arm, one seed: weights and the history (loss and pre-clip
                    gradient norm at every step)
evaluate_claim_arm  that model's metrics: held-out exact (by length), the loss curve's
                    summary, calibration, and where a claim needs them beam search,
                    head ablations and the step-0 signal scales
claims_analytic     the experiments without training (analytic.py)
claims_cost         attention's time and memory against the sequence length (a benchmark)
claims_rnn_speed    the Transformer's and the GRU's training steps per second, alternating
claims_summary      every claim's measured value and verdict, and the figures' data
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from tcrformer.chapters.claims import analytic
from tcrformer.chapters.claims.settings import Settings
from tcrformer.chapters.claims.verdicts import Measurements, judge
from tcrformer.core.io import read_csv

SPIKE_WINDOW, SPIKE_FACTOR, SPIKE_AFTER = 50, 1.5, 100
FINAL_STEPS = 100  # the final loss: the mean of the last steps
CALIBRATION_BINS = 10


# Training -------------------------------------------------------------------------------------


def with_gru_size(recipe):
    """A GRU arm without a width gets the one that matches the Transformer's parameter count."""
    if recipe.arch != "gru" or recipe.gru_hidden is not None:
        return recipe
    from tcrformer.chapters.reversal.data import VOCAB_SIZE
    from tcrformer.chapters.reversal.model import build_model
    from tcrformer.models.counting import count_parameters
    from tcrformer.models.rnn import gru_hidden_for

    transformer = replace(recipe, arch="transformer")
    size = count_parameters(build_model(transformer.architecture(), transformer.impl))
    hidden = gru_hidden_for(size, VOCAB_SIZE, VOCAB_SIZE, recipe.num_layers)
    return replace(recipe, gru_hidden=hidden)


def train_claim_arm(recipe, checkpoints, numerics: dict) -> dict[str, Any]:
    from tcrformer.chapters.reversal.model import save_model
    from tcrformer.chapters.reversal.train import discard_checkpoints, train

    recipe = with_gru_size(recipe)
    trained = train(recipe, checkpoint_dir=checkpoints)
    discard_checkpoints(checkpoints, recipe)
    steps = np.arange(1, recipe.steps + 1)
    history = pd.DataFrame(
        {
            "step": steps,
            "loss": trained.losses.double().numpy(),
            "grad_norm": trained.grad_norms.double().numpy(),
        }
    )
    return {
        "model": lambda path: save_model(path, trained.model, recipe.architecture()),
        "history": history,
        "numerics": numerics,
        "timing": trained.timing,
    }


# The loss curve ----------------------------------------------------------------------------------


def spikes(losses: np.ndarray) -> int:
    """Steps after SPIKE_AFTER whose loss exceeds SPIKE_FACTOR x the median of the
    SPIKE_WINDOW steps before it."""
    count = 0
    for t in range(max(SPIKE_AFTER, SPIKE_WINDOW), len(losses)):
        window = losses[t - SPIKE_WINDOW : t]
        if np.isfinite(losses[t]) and losses[t] > SPIKE_FACTOR * np.median(window):
            count += 1
    return count


def curve_metrics(history: pd.DataFrame, first_steps: int = 500) -> dict[str, float]:
    losses, norms = history["loss"].to_numpy(), history["grad_norm"].to_numpy()
    final = losses[-FINAL_STEPS:]
    return {
        "final_loss": float(final.mean()) if np.isfinite(final).all() else math.inf,
        "early_loss": float(np.mean(losses[:first_steps])),
        "spikes": spikes(losses),
        "max_grad_norm": float(np.nanmax(norms)),
    }


# Evaluation -------------------------------------------------------------------------------------


def heldout(recipe):
    from tcrformer.chapters.reversal.data import heldout_set

    return heldout_set(recipe.eval_n, recipe.min_len, recipe.max_len, recipe.eval_seed)


def exact_rows(model, src, tgt):
    """(B,) bool: the model's greedy output is the target, letters and <eos>."""
    import torch

    from tcrformer.chapters.reversal.data import BOS, EOS, PAD
    from tcrformer.models.transformer import greedy_decode

    correct = []
    for start in range(0, src.size(0), 500):
        s, t = src[start : start + 500], tgt[start : start + 500]
        out = greedy_decode(model, s, max_len=t.size(1) - 1, bos=BOS, eos=EOS, pad_idx=PAD)
        written = torch.full_like(t, PAD)
        written[:, : out.size(1)] = out[:, : t.size(1)]
        correct.append(((written == t) | (t == PAD)).all(dim=1))
    return torch.cat(correct)


def calibration(model, src, tgt) -> dict[str, Any]:
    """Teacher-forced, on the held-out targets: confidence (the top probability) against
    accuracy, their difference (over-confidence), ECE over CALIBRATION_BINS bins, and the
    bins themselves (for the reliability figure)."""
    import torch

    from tcrformer.chapters.reversal.data import PAD
    from tcrformer.models.transformer import make_masks

    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
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


def beam_metrics(model, src, tgt, width: int) -> dict[str, float]:
    """Greedy against beam search: exact reversals and the mean sequence log-probability.

    Both decoders' outputs are scored by the one teacher-forced pass (sequence_log_prob),
    so the same output gets the same score to the bit. The beam's own running score comes
    from incremental float32 steps and differs from it by ~1e-8, which alone would make an
    equal output look worse or better."""
    import torch

    from tcrformer.chapters.reversal.data import BOS, EOS, PAD
    from tcrformer.models.decoding import beam_search, sequence_log_prob
    from tcrformer.models.transformer import greedy_decode

    max_len = tgt.size(1) - 1
    greedy = greedy_decode(model, src, max_len=max_len, bos=BOS, eos=EOS, pad_idx=PAD)
    beam, _ = beam_search(model, src, max_len, BOS, EOS, width, PAD)
    greedy_logprob = sequence_log_prob(model, src, greedy, EOS, PAD)
    beam_logprob = sequence_log_prob(model, src, beam, EOS, PAD)

    def exact(out):
        written = torch.full_like(tgt, PAD)
        n = min(out.size(1), tgt.size(1))
        written[:, :n] = out[:, :n]
        return int(((written == tgt) | (tgt == PAD)).all(dim=1).sum())

    return {
        "greedy_exact": exact(greedy),
        "beam_exact": exact(beam),
        "greedy_logprob": float(greedy_logprob.mean()),
        "beam_logprob": float(beam_logprob.mean()),
    }


def head_ablations(model, src, tgt) -> list[dict[str, Any]]:
    """Every cross-attention head: its mean anti-diagonal attention mass on the held-out
    strings (teacher-forced), and the drop in held-out exact when its output is zeroed."""
    import torch

    from tcrformer.chapters.reversal.data import PAD
    from tcrformer.models.fast import record_attention
    from tcrformer.models.transformer import make_masks

    lengths = (src != PAD).sum(1)  # (B,)
    tgt_in = tgt[:, :-1]
    with torch.no_grad(), record_attention(model):
        model.eval()
        model(src, tgt_in, *make_masks(src, tgt_in, PAD))
    base = int(exact_rows(model, src, tgt).sum())
    rows = []
    for layer, block in enumerate(model.decoder.layers, start=1):
        attention = block.cross_attn
        weights = attention.attn  # (B, h, Lt, Ls)
        for head in range(attention.h):
            attention.keep = torch.ones(attention.h)
            attention.keep[head] = 0.0
            ablated = int(exact_rows(model, src, tgt).sum())
            attention.keep = None
            rows.append({
                "layer": layer,
                "head": head + 1,
                "antidiagonal": antidiagonal_mass(weights[:, head], lengths),
                "drop": base - ablated,
            })  # fmt: skip
    return rows


def antidiagonal_mass(weights, lengths) -> float:
    """Mean over strings and letters k < L of the weight on source position L - 1 - k.
    weights (B, Lt, Ls), lengths (B,)."""
    total, count = 0.0, 0
    for b, length in enumerate(lengths.tolist()):
        k = np.arange(length)
        total += float(weights[b, k, length - 1 - k].sum())
        count += length
    return total / count


def activation_ratios(recipe, src, tgt) -> list[float]:
    """At step 0 (the seed's initial weights), eval mode, one batch: RMS of every attention
    and feed-forward sub-layer's output over the RMS of its input."""
    import torch

    from tcrformer.chapters.reversal.data import PAD
    from tcrformer.chapters.reversal.model import build_model
    from tcrformer.models.fast import Attention, FeedForward
    from tcrformer.models.transformer import make_masks

    torch.manual_seed(recipe.seed)
    model = build_model(recipe.architecture(), recipe.impl, init=recipe.init).eval()
    ratios: list[float] = []

    def hook(module, inputs, output):
        x = inputs[0]
        ratios.append(float(output.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, Attention | FeedForward)]  # fmt: skip
    tgt_in = tgt[:, :-1]
    with torch.no_grad():
        model(src, tgt_in, *make_masks(src, tgt_in, PAD))
    for handle in handles:
        handle.remove()
    return ratios


def evaluate_claim_arm(
    recipe, model_path: str, history_path: str, extras: Sequence[str], beam_width: int
) -> dict[str, Any]:
    """Every metric a claim reads of this arm and seed; `extras` adds beam search, head
    ablations or the step-0 activation scales where a claim needs them."""
    from tcrformer.chapters.reversal.model import load_model

    model, architecture = load_model(model_path, recipe.impl)
    history = read_csv(history_path)
    src, tgt = heldout(recipe)
    correct = exact_rows(model, src, tgt)
    lengths = (src != 0).sum(1).numpy()
    by_length = {int(n): float(correct.numpy()[lengths == n].mean()) for n in np.unique(lengths)}
    metrics: dict[str, Any] = {
        "arm_architecture": architecture,
        "heldout_exact": int(correct.sum()),
        "exact_by_length": by_length,
        **curve_metrics(history),
        **calibration(model, src, tgt),
    }
    if "beam" in extras:
        metrics.update(beam_metrics(model, src, tgt, beam_width))
    if "importance" in extras:
        metrics["heads"] = head_ablations(model, src, tgt)
    if "init" in extras:
        metrics["activation_ratios"] = activation_ratios(recipe, src[:128], tgt[:128])
    return {"metrics": finite_or_none(metrics)}


def finite_or_none(value: Any) -> Any:
    """NaN and infinity (a diverged run) as None, which JSON can hold; the verdicts read
    None back as NaN."""
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# Without training -------------------------------------------------------------------------------


def claims_analytic(settings: Settings, toy, d_model: int) -> dict[str, Any]:
    """The toy shuffle (positions on and off), the sqrt(d_k) gradients, the relative-position
    fits and the similarity by distance; `toy` is the toy chapter's settings."""
    from tcrformer.chapters.toy.compute import head_weights
    from tcrformer.models.chemistry import feature_names, toy_input

    tests = {claim.test["kind"]: claim.test for claim in settings.claims}
    names = feature_names(toy.pe_dims)
    heads = [head_weights(h, names, toy.pe_dims, toy.pe_base) for h in toy.heads]
    x = toy_input(toy.sequence, toy.pe_dims, toy.pe_base)  # (n, 4 + pe_dims)
    off = x.copy()
    off[:, 4:] = 0.0
    shuffle = analytic.derangement(len(toy.sequence), seed=0)
    w_o = np.eye(2 * len(heads), x.shape[1])
    positions = slice(4, None)  # the positions stay at their slots; the letters move
    relative = tests.get("relative", {"offsets": [1], "positions": 2 * d_model})
    distance = tests.get("distance", {"max_distance": 100})
    cosine = analytic.cosine_by_distance(d_model, distance["max_distance"])
    return {
        "analytic": {
            "permutation_off": analytic.permutation_error(off, heads, w_o, shuffle, positions),
            "permutation_on": analytic.permutation_error(x, heads, w_o, shuffle, positions),
            "scaling": analytic.scaling_gradients(
                toy.scaling.d_k, toy.scaling.n_keys, toy.scaling.seed
            ),  # fmt: skip
            "relative_residuals": {
                str(k): analytic.relative_position_fit(d_model, [k], relative["positions"])[k]
                for k in relative["offsets"]
            },
            "d_model": d_model,
            "cosine_by_distance": cosine.tolist(),
            "cosine_first_rise": analytic.first_rise(cosine),
        }
    }


def claims_cost(settings: Settings, min_length: int) -> dict[str, Any]:
    """The cost benchmark; the exponents are fitted over L >= min_length, or over the two
    longest lengths when fewer reach it (a reduced run)."""
    rows = analytic.attention_cost(list(settings.cost_lengths))
    lengths = [r["length"] for r in rows]
    min_length = min(min_length or 0, sorted(lengths)[-2])
    return {
        "table": pd.DataFrame(rows),
        "summary": {
            "memory_exponent": analytic.fit_exponent(
                lengths, [r["allocated_bytes"] for r in rows], min_length
            ),
            "time_exponent": analytic.fit_exponent(
                lengths, [r["seconds"] for r in rows], min_length
            ),
            "min_length": min_length,
        },
    }


def claims_rnn_speed(transformer, gru, steps: int = 20, blocks: int = 3) -> dict[str, Any]:
    """Training steps per second of both recipes on the same batches, blocks alternating in
    this process (median block), after a warm-up."""
    import torch

    from tcrformer.chapters.reversal.data import random_batch
    from tcrformer.chapters.reversal.train import make_step, new_run

    runs = {}
    for name, recipe in (("transformer", transformer), ("gru", with_gru_size(gru))):
        run = new_run(recipe, torch.device("cpu"))
        runs[name] = make_step(recipe, run.model, run.optimizer, run.scheduler, run.device)
    generator = torch.Generator().manual_seed(0)
    batches = [random_batch(transformer.batch_size, transformer.min_len, transformer.max_len,
                            generator) for _ in range(steps)]  # fmt: skip
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for step in runs.values():
        step(*batches[0])  # warm-up
    for _ in range(blocks):
        for name, step in runs.items():
            start = time.perf_counter()
            for src, tgt in batches:
                step(src, tgt)
            rates[name].append(steps / (time.perf_counter() - start))
    return {"speed": {f"{name}_steps_per_s": statistics.median(r) for name, r in rates.items()}}


# The verdicts -----------------------------------------------------------------------------------


def claims_summary(
    settings: Settings,
    metrics: Mapping[str, Sequence[Mapping[str, Any]]],
    histories: Mapping[str, Sequence[pd.DataFrame]],
    analytic_results: Mapping[str, Any],
    cost: Mapping[str, Any],
    cost_table: pd.DataFrame,
    speed: Mapping[str, Any],
) -> dict[str, Any]:
    """Every claim's measured value and verdict (claims.csv, claims.md), and what the
    figures draw."""
    measurements = Measurements(metrics, analytic_results, cost, speed, settings.eval_n)
    rows = []
    for claim in settings.claims:
        verdict = judge(claim.test, measurements)
        rows.append({
            "id": claim.id, "claim": claim.claim, "source": claim.source,
            "criterion": claim.criterion, "measured": verdict.measured,
            "verdict": verdict.verdict,
        })  # fmt: skip
    table = pd.DataFrame(rows)
    return {
        "table": table,
        "md": claims_markdown(table, settings),
        "figure_data": figure_data(
            settings, metrics, histories, analytic_results, cost, cost_table, speed, table
        ),  # fmt: skip
    }


def claims_markdown(table: pd.DataFrame, settings: Settings) -> str:
    seeds = len(settings.seeds)
    lines = [
        "# Claims: what the seeds say, tested",
        "",
        f"Each training arm ran {seeds} seeds; every criterion was written in "
        "config/claims.yaml before the run and is evaluated by code.",
        "",
    ]
    if settings.reduced:
        lines += ["**Reduced run: not a verdict.** Fewer seeds and steps than the claims need.", ""]
    lines += ["| id | claim | source | criterion | measured | verdict |", "|---" * 6 + "|"]
    for r in table.itertuples(index=False):
        cells = [f"`{r.id}`", r.claim, r.source, r.criterion, r.measured, f"**{r.verdict}**"]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _median_curve(frames: Sequence[pd.DataFrame], column: str, every: int) -> dict[str, list]:
    stacked = np.stack([f[column].to_numpy() for f in frames])  # (seeds, steps)
    steps = frames[0]["step"].to_numpy()
    keep = (steps % every == 0) | (steps == 1)
    return {"step": steps[keep].tolist(), "median": np.nanmedian(stacked, 0)[keep].tolist()}


def pooled_bins(seeds: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """The calibration bins of all seeds together: [count, mean confidence, accuracy]."""
    bins = np.nan_to_num(np.array([s["calibration_bins"] for s in seeds], float))  # (S, b, 3)
    count = bins[..., 0].sum(0)
    weighted = (bins[..., 1:] * bins[..., :1]).sum(0) / np.maximum(count, 1)[:, None]
    return np.column_stack([count, weighted]).tolist()


def figure_data(settings, metrics, histories, analytic_results, cost, cost_table, speed, table):
    every = 10
    calibration_arms = settings.arms_needing("smoothing")
    return {
        "reduced": settings.reduced,
        "seeds": len(settings.seeds),
        "eval_n": settings.eval_n,
        "verdicts": dict(zip(table["id"], table["verdict"], strict=True)),
        "claim_arms": {c.id: c.arms() for c in settings.claims},
        "loss_curves": {arm: _median_curve(h, "loss", every) for arm, h in histories.items()},
        "grad_norm_curves": {
            arm: _median_curve(histories[arm], "grad_norm", every)
            for arm in settings.arms_needing("clipping")
        },
        "calibration": {arm: pooled_bins(metrics[arm]) for arm in calibration_arms},
        "heads": [
            h
            for arm in settings.arms_needing("importance")
            for s in metrics[arm]
            for h in s["heads"]
        ],  # fmt: skip
        "exact_by_length": {
            arm: {
                str(n): float(np.median([s["exact_by_length"][n] for s in metrics[arm]]))
                for n in metrics[arm][0]["exact_by_length"]
            }
            for arm in settings.arms_needing("rnn")
        },  # fmt: skip
        "beam": {
            arm: {
                k: float(np.mean([s[k] for s in metrics[arm]]))
                for k in ("greedy_logprob", "beam_logprob", "greedy_exact", "beam_exact")
            }
            for arm in settings.arms_needing("beam")
        },  # fmt: skip
        "analytic": dict(analytic_results),
        "cost": {**cost, "rows": cost_table.to_dict(orient="records")},
        "speed": dict(speed),
    }
