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
from typing import Any

import numpy as np
import pandas as pd

from tcrformer.chapters.claims import analytic
from tcrformer.chapters.claims.settings import Settings
from tcrformer.chapters.claims.verdicts import Measurements, judge
from tcrformer.core.io import read_csv

# Training -------------------------------------------------------------------------------------


def train_claim_arm(recipe, checkpoints, numerics: dict) -> dict[str, Any]:
    from tcrformer.training.checkpoints import discard_checkpoints
    from tcrformer.training.loop import train
    from tcrformer.training.model import save_model, with_gru_size

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


def evaluate_claim_arm(
    recipe, model_path: str, history_path: str, extras: Sequence[str], beam_width: int
) -> dict[str, Any]:
    """Every metric a claim reads of this arm and seed; `extras` adds beam search, head
    ablations or the step-0 activation scales where a claim needs them."""
    from tcrformer.training import measures
    from tcrformer.training.model import load_model

    model, architecture = load_model(model_path, recipe.impl)
    history = read_csv(history_path)
    src, tgt = measures.heldout(recipe)
    correct = measures.exact_rows(model, src, tgt)
    metrics: dict[str, Any] = {
        "arm_architecture": architecture,
        "heldout_exact": int(correct.sum()),
        "exact_by_length": measures.exact_by_length(correct, src),
        **measures.curve_metrics(history),
        **measures.calibration(model, src, tgt),
    }
    if "beam" in extras:
        metrics.update(measures.beam_metrics(model, src, tgt, beam_width))
    if "importance" in extras:
        metrics["heads"] = measures.head_ablations(model, src, tgt)
    if "init" in extras:
        metrics["activation_ratios"] = measures.activation_ratios(recipe, src[:128], tgt[:128])
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

    from tcrformer.training.data import random_batch
    from tcrformer.training.loop import make_step, new_run
    from tcrformer.training.model import with_gru_size

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
