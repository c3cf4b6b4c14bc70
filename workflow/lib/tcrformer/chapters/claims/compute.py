"""Chapter claims' rules, each returning its outputs by name.

claims_register     before any arm trains: every claim's digest (the pre-registration)
train_claim_arm     one arm, one seed, trained and then evaluated in the same job: the
                    history (loss and pre-clip gradient norm at every step) and the metrics
evaluate_claim_arm  a saved model's metrics, one number per claim metric (training.measures)
claims_sweep        a sweep's choice: the candidate arm with the best validation metric
claims_analytic     the experiments without training (analytic.py)
claims_cost         attention's time and memory against the sequence length (a benchmark)
claims_rnn_speed    the Transformer's and the GRU's training steps per second, alternating
claims_summary      every claim's effect, interval, margin and verdict; the figures' data

The rules that train or evaluate import torch inside the function: the summary runs in an
environment without it.
"""

from __future__ import annotations

import datetime
import math
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tcrformer.chapters.claims import analytic
from tcrformer.chapters.claims.settings import Settings, Sweep
from tcrformer.chapters.claims.summary import claims_markdown, figure_data, table_rows
from tcrformer.chapters.claims.verdicts import Measurements, judge_all
from tcrformer.core.io import read_csv, write_csv

INIT_STRINGS = 128  # held-out strings the step-0 signal scales are measured on


# Pre-registration ------------------------------------------------------------------------------


def claims_register(settings: Settings, claims_file_sha256: str, commit: str) -> dict[str, Any]:
    """What the claims said before the first arm trained; written once, never rewritten."""
    return {
        "registration": {
            "registered_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": commit,
            "claims_file_sha256": claims_file_sha256,
            "claims": settings.registration(),
        }
    }


# Training ---------------------------------------------------------------------------------------


def train_claim_arm(
    recipe,
    evaluation,
    checkpoints,
    numerics: dict,
    swept: Mapping[str, Any] | None = None,
    extras: Sequence[str] = (),
    beam_width: int = 1,
) -> dict[str, Any]:
    """Train one arm's seed (`swept` sets the keys a sweep chose, claims_sweep), then
    evaluate the weights as saved (`evaluation`: the recipe with its evaluation fields).
    The weights are not kept: a job leaves only what the summary reads."""
    from tcrformer.training.loop import train
    from tcrformer.training.model import save_model
    from tcrformer.training.recipe import with_overrides

    trained = train(with_overrides(recipe, **dict(swept or {})), checkpoint_dir=checkpoints)
    recipe = trained.recipe  # a GRU's width filled in
    history = pd.DataFrame(
        {
            "step": np.arange(1, recipe.steps + 1),
            "loss": trained.losses.double().numpy(),
            "grad_norm": trained.grad_norms.double().numpy(),
        }
    )
    with tempfile.TemporaryDirectory() as saved:  # what evaluate_claim_arm reads
        model_path, history_path = Path(saved, "model.safetensors"), Path(saved, "history.csv")
        save_model(model_path, trained.model, recipe.architecture())
        write_csv(history_path, history)
        evaluated = evaluate_claim_arm(evaluation, model_path, history_path, extras, beam_width)
    return {
        "history": history,
        "numerics": numerics,
        "timing": {**trained.timing, "trained": recipe.training_params()},
        **evaluated,
    }


# Evaluation -------------------------------------------------------------------------------------


def evaluate_claim_arm(
    recipe, model_path: str, history_path: str, extras: Sequence[str], beam_width: int
) -> dict[str, Any]:
    """Every metric a claim reads of this arm and seed, one number each where a claim tests
    it; `extras` adds beam search, head ablations or the step-0 signal scales."""
    from tcrformer.training import measures
    from tcrformer.training.model import load_model
    from tcrformer.training.schedule import label_smoothing_floor

    model, architecture = load_model(model_path, recipe.impl)
    history = read_csv(history_path)
    src, tgt = measures.heldout(recipe)
    correct = measures.exact_rows(model, src, tgt)
    by_length = measures.exact_by_length(correct, src)
    floor = label_smoothing_floor(recipe.label_smoothing)
    metrics: dict[str, Any] = {
        "arm_architecture": architecture,
        "heldout_exact": int(correct.sum()),
        "heldout_fraction": float(correct.float().mean()),
        "exact_by_length": by_length,
        "forgetting": by_length[min(by_length)] - by_length[max(by_length)],
        **measures.curve_metrics(history, floor=floor),
        **measures.calibration(model, src, tgt),
    }
    train_strings = measures.training_strings(recipe)
    if train_strings is not None:
        fraction = float(measures.exact_rows(model, *train_strings).float().mean())
        metrics.update(train_fraction=fraction, gap=fraction - metrics["heldout_fraction"])
    if "beam" in extras:
        beam = measures.beam_metrics(model, src, tgt, beam_width)
        metrics.update(beam, beam_net_wins=(beam["beam_wins"] - beam["beam_losses"]) / len(src))
    if "importance" in extras:
        heads = measures.head_ablations(model, src, tgt)
        rho = measures.rank_correlation([h["antidiagonal"] for h in heads],
                                        [h["drop"] for h in heads])  # fmt: skip
        metrics.update(heads=heads, importance_rho=abs(rho))
    if "init" in extras:
        ratios = measures.activation_ratios(recipe, src[:INIT_STRINGS], tgt[:INIT_STRINGS])
        metrics.update(activation_ratios=ratios, init_scale=measures.init_scale(ratios))
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


# Sweeps -----------------------------------------------------------------------------------------


def claims_sweep(
    sweep: Sweep, results: Mapping[str, Sequence[Mapping[str, Any]]], values: Mapping[str, Any]
) -> dict[str, Any]:
    """The candidate with the highest median validation metric (ties: the first listed);
    `values` holds each candidate's value of the swept key."""
    medians = {}
    for arm in sweep.candidates:
        scores = [np.nan if s.get(sweep.maximise) is None else s[sweep.maximise]
                  for s in results[arm]]  # fmt: skip
        medians[arm] = float(np.nanmedian(scores)) if np.isfinite(scores).any() else -math.inf
    best = max(sweep.candidates, key=lambda arm: (medians[arm], -sweep.candidates.index(arm)))
    return {
        "choice": {
            "sweep": sweep.name,
            "arm": sweep.arm,
            "key": sweep.key,
            "chosen": best,
            "value": values[best],
            "validation": {"metric": sweep.maximise, "median": medians},
            "seeds": list(sweep.seeds),
        }
    }


# Without training -------------------------------------------------------------------------------


def claims_analytic(settings: Settings, toy, d_model: int) -> dict[str, Any]:
    """The toy shuffle (positions on and off), the sqrt(d_k) gradients over many draws, the
    relative-position fits and the similarity by distance; `toy` is the toy chapter's
    settings."""
    from tcrformer.chapters.toy.compute import head_weights
    from tcrformer.models.chemistry import feature_names, toy_input

    tests = {claim.test["effect"]: claim.test for claim in settings.claims}
    names = feature_names(toy.pe_dims)
    heads = [head_weights(h, names, toy.pe_dims, toy.pe_base) for h in toy.heads]
    x = toy_input(toy.sequence, toy.pe_dims, toy.pe_base)  # (n, 4 + pe_dims)
    off = x.copy()
    off[:, 4:] = 0.0
    shuffle = analytic.derangement(len(toy.sequence), seed=0)
    w_o = np.eye(2 * len(heads), x.shape[1])
    positions = slice(4, None)  # the positions stay at their slots; the letters move
    relative = tests.get("relative", {"offsets": [1], "positions": 2 * d_model})
    distance = tests.get("first_rise", {"max_distance": 100})
    cosine = analytic.cosine_by_distance(d_model, distance["max_distance"])
    scaling = toy.scaling
    return {
        "analytic": {
            "permutation_off": analytic.permutation_error(off, heads, w_o, shuffle, positions),
            "permutation_on": analytic.permutation_error(x, heads, w_o, shuffle, positions),
            "scaling": analytic.scaling_gradients(scaling.d_k, scaling.n_keys, scaling.seed),
            "jacobian_ratios": analytic.scaling_ratios(scaling.d_k, scaling.n_keys, settings.draws),
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


def claims_rnn_speed(transformer, gru, steps: int = 20, blocks: int = 5) -> dict[str, Any]:
    """Training steps per second of both recipes on the same batches, blocks alternating in
    this process, after a warm-up: every block's rate, and the median."""
    import torch

    from tcrformer.training.data import random_batch
    from tcrformer.training.loop import make_step, new_run

    runs = {}
    for name, recipe in (("transformer", transformer), ("gru", gru)):
        run = new_run(recipe, torch.device("cpu"))  # a GRU's width filled in
        runs[name] = make_step(run.recipe, run.model, run.optimizer, run.scheduler, run.device)
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
    speed = {f"{name}_steps_per_s": statistics.median(r) for name, r in rates.items()}
    speed.update({f"{name}_blocks": r for name, r in rates.items()})
    return {"speed": speed}


# The verdicts -----------------------------------------------------------------------------------


def claims_summary(
    settings: Settings,
    metrics: Mapping[str, Sequence[Mapping[str, Any]]],
    histories: Mapping[str, Sequence[pd.DataFrame]],
    analytic_results: Mapping[str, Any],
    cost: Mapping[str, Any],
    cost_table: pd.DataFrame,
    speed: Mapping[str, Any],
    registration: Mapping[str, Any],
    sweeps: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Every claim's effect, interval, margin and verdict (claims.csv, claims.md), marked
    where the claim differs from its registration, and what the figures draw."""
    measurements = Measurements(metrics, analytic_results, cost, speed, settings.eval_n)
    decisions = judge_all(settings, measurements)
    table = pd.DataFrame(table_rows(settings, decisions, registration))
    return {
        "table": table,
        "md": claims_markdown(table, settings, registration, sweeps),
        "figure_data": figure_data(
            settings, metrics, histories, analytic_results, cost, cost_table, speed, table
        ),  # fmt: skip
    }
