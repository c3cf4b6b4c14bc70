"""The claims' rules, each returning its outputs by name.

claims_register     before any arm trains: every claim's digest and the decision code's
                    (the pre-registration)
train_claim_arm     one arm, one seed, trained and then evaluated in the same job: the
                    history (loss and pre-clip gradient norm at every step) and the metrics
evaluate_claim_arm  a saved model's metrics: what every arm gets, its extras, and each metric
                    of metrics.METRICS they allow
claims_analytic     the experiments without training (analytic.py)
claims_cost         attention's time and memory against the sequence length (a benchmark)
claims_rnn_speed    the Transformer's and the GRU's training steps per second, alternating
claims_summary      every claim's effect, interval, margin and verdict; the figures' data

The rules that train or evaluate import torch inside the function: the summary runs in an
environment without it.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tcrclaims import analytic, metrics
from tcrclaims.metrics import stepped
from tcrclaims.settings import Claim, Settings
from tcrclaims.summary import claims_markdown, figure_data, table_rows
from tcrclaims.verdicts import AT_STEPS, Measurements, judge_all
from tcrformer.core import usage
from tcrformer.core.io import read_csv, write_csv
from tcrformer.core.manifest import LIBRARY, code_digest
from tcrformer.core.runner import job_started

if set(metrics.stepped().values()) - set(AT_STEPS):
    raise ImportError("claims: a by-step metric's rule is not in verdicts.AT_STEPS")

# Pre-registration ------------------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent  # this package, tcrclaims, where it is imported from

# What a registration freezes: every Python file under these parts, each named from the folder
# that holds its package. The claims' own code, the library's statistics that decide, and
# what trains and evaluates an arm; the model's arithmetic (tcrformer/core) is fixed instead
# by each job's numerics record.
DECISION_CODE = ("tcrclaims", "tcrformer/stats", "tcrformer/training", "tcrformer/models")


def decision_code_sha256(package: Path = PACKAGE, library: Path = LIBRARY) -> str:
    """One sha256 over the files of DECISION_CODE, as they are in this checkout (or in the
    copies of the two packages named): each part's file digest (core.manifest.code_digest),
    then one digest of them all."""
    roots = {"tcrclaims": package.parent, "tcrformer": library.parent}
    parts = [code_digest(part, root=roots[part.split("/")[0]]) for part in DECISION_CODE]
    return hashlib.sha256("".join(parts).encode()).hexdigest()


def claims_register(
    settings: Settings,
    claims_file_sha256: str,
    commit: str,
    reviews: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What the claims said before the first arm trained, the code that will judge them,
    and the sha256 of the reviews the design answered (`reviews`: path -> sha256); written
    once, never rewritten."""
    return {
        "registration": {
            "registered_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": commit,
            "claims_file_sha256": claims_file_sha256,
            "reviews_sha256": dict(reviews or {}),
            "decision_code_files": list(DECISION_CODE),
            "decision_code_sha256": decision_code_sha256(),
            "claims": settings.registration(),
        }
    }


# Training ---------------------------------------------------------------------------------------


def train_claim_arm(
    recipe,
    evaluation,
    checkpoints,
    numerics: dict,
    extras: Mapping[str, Sequence[int]] | None = None,
    beam_width: int = 1,
    excess_strings: int | None = None,
) -> dict[str, Any]:
    """Train one arm's seed, then evaluate the weights as saved (`evaluation`: the recipe
    with its evaluation fields; `excess_strings`: the held-out strings of the excess, where
    its claims name them). The weights are not kept: a job leaves only what the summary
    reads. Its timing adds what the job used from its script's start to the end of the
    evaluation, and the machine's load at both ends (core.usage.usage_since; outside a rule
    script, from this call's start)."""
    from tcrformer.training.checkpoints import snapshot_path
    from tcrformer.training.loop import train
    from tcrformer.training.measures import snapshot_models
    from tcrformer.training.model import save_model

    started = job_started() or usage.reading()
    trained = train(recipe, checkpoint_dir=checkpoints)
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
        snapshots = dict(snapshot_models(recipe, checkpoints))
        evaluated = evaluate_claim_arm(evaluation, model_path, history_path, extras or {},
                                       beam_width, snapshots, excess_strings)  # fmt: skip
    used = usage.usage_since(started)
    for step in snapshots:  # measured: the job keeps only what the summary reads
        snapshot_path(checkpoints, recipe, step).unlink()
    return {
        "history": history,
        "numerics": {**numerics, "gpu": trained.gpu},
        "timing": {**trained.timing, "trained": recipe.training_params(), **used},
        **evaluated,
    }


# Evaluation -------------------------------------------------------------------------------------


def evaluate_claim_arm(
    recipe,
    model_path: str,
    history_path: str,
    extras: Mapping[str, Sequence[int]],
    beam_width: int,
    snapshots: Mapping[int, Any] | None = None,
    excess_strings: int | None = None,
) -> dict[str, Any]:
    """Every metric a claim reads of this arm and seed: what every arm gets, then the
    `extras` its claims need, each at its snapshot steps (metrics.EXTRAS: beam search,
    residue attribution, the step-0 signal scales, the excess over the floor, attention's
    entropy), then each registered metric they allow. `snapshots`: step -> the model as
    training kept it then (training.measures.snapshot_models); `excess_strings`: the held-out
    strings the excess is measured on (None: training.measures.EXCESS_STRINGS)."""
    from tcrformer.training.measures import heldout
    from tcrformer.training.model import load_model

    model, architecture = load_model(model_path, recipe.impl)
    history = read_csv(history_path)
    kept = dict(snapshots or {})
    e = metrics.ArmEvaluation(model, recipe, *heldout(recipe), history, beam_width, kept,
                              {"arm_architecture": architecture},
                              excess_strings=excess_strings)  # fmt: skip
    common_evaluation(e)
    for extra, steps in extras.items():
        metrics.EXTRAS[extra](e, steps)
    for name in metrics.computable(extras):
        e.numbers[name] = metrics.METRICS[name].compute(e)
    return {"metrics": finite_or_none(e.numbers)}


def common_evaluation(e: metrics.ArmEvaluation) -> None:
    """What every arm's evaluation measures: held-out exact, the loss curve's numbers,
    calibration, and on a fixed training set the train minus held-out gap. Exact reversals
    are integer counts, the strings right of those evaluated (metrics.COUNTED); each
    fraction beside them is the one divided by the other, in double precision; and which
    strings were right, one bit each in evaluation order (heldout_bits, train_bits:
    metrics.pack_bits)."""
    from tcrformer.training import measures

    rows = measures.exact_rows(e.model, e.src, e.tgt)
    right, total = metrics.count_of(rows)
    e.numbers.update(
        heldout_exact=right,
        heldout_total=total,
        heldout_fraction=right / total,
        heldout_bits=metrics.pack_bits(rows),
        **measures.curve_metrics(e.history, floor=e.floor, stress_step=e.recipe.stress_step),
        **measures.calibration(e.model, e.src, e.tgt),
    )
    train_strings = measures.training_strings(e.recipe)
    if train_strings is not None:
        rows = measures.exact_rows(e.model, *train_strings)
        trained, strings = metrics.count_of(rows)
        e.numbers.update(train_exact=trained, train_total=strings,
                         train_fraction=trained / strings,
                         gap=trained / strings - right / total,
                         train_bits=metrics.pack_bits(rows))  # fmt: skip


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


def claims_cost(settings: Settings, claim: Claim) -> dict[str, Any]:
    """One claim's cost benchmark; the exponents are fitted over L >= its test's
    min_length, or over the two longest lengths when fewer reach it (a reduced run)."""
    rows = analytic.attention_cost(list(settings.cost_lengths))
    lengths = [r["length"] for r in rows]
    min_length = min(claim.test.get("min_length") or 0, sorted(lengths)[-2])
    return {
        "table": pd.DataFrame(rows),
        "summary": {
            "claim": claim.id,
            "memory_exponent": analytic.growth_exponent(
                lengths, [r["allocated_bytes"] for r in rows], min_length
            ),
            "time_exponent": analytic.growth_exponent(
                lengths, [r["seconds"] for r in rows], min_length
            ),
            "min_length": min_length,
            "rows": rows,
        },
    }


def claims_rnn_speed(
    claim: str, transformer, gru, length: int, threads: int, steps: int, blocks: int
) -> dict[str, Any]:
    """One claim's benchmark: training steps per second of both recipes on the same
    batches of strings of `length`, blocks alternating in this process after a warm-up: the
    GRU and the Transformer on `threads` threads, and the Transformer on one (what a second
    thread buys, the benchmark's manipulation check)."""
    import torch

    from tcrformer.training.data import random_batch
    from tcrformer.training.loop import make_step, new_run

    shape = {"min_len": length, "max_len": length}
    runs = {}
    for name, recipe in (("transformer", transformer), ("gru", gru)):
        # autograd's step for both: the claim compares the architectures, not the steps
        run = new_run(recipe.replace(**shape), torch.device("cpu"), hand_written=False)
        runs[name] = make_step(run.recipe, run.model, run.optimizer, run.scheduler, run.device)
    generator = torch.Generator().manual_seed(0)
    batches = [random_batch(transformer.batch_size, length, length, generator)
               for _ in range(steps)]  # fmt: skip
    plan = {"transformer": (runs["transformer"], threads), "gru": (runs["gru"], threads),
            "transformer_1thread": (runs["transformer"], 1)}  # fmt: skip
    before = torch.get_num_threads()
    rates: dict[str, list[float]] = {name: [] for name in plan}
    try:
        for step, n in plan.values():
            torch.set_num_threads(n)
            step(*batches[0])  # warm-up
        for _ in range(blocks):
            for name, (step, n) in plan.items():
                torch.set_num_threads(n)
                start = time.perf_counter()
                for src, tgt in batches:
                    step(src, tgt)
                rates[name].append(steps / (time.perf_counter() - start))
    finally:
        torch.set_num_threads(before)
    speed: dict[str, Any] = {"claim": claim}
    speed.update({f"{name}_steps_per_s": statistics.median(r) for name, r in rates.items()})
    speed.update({f"{name}_blocks": r for name, r in rates.items()})
    speed.update(
        length=length,
        threads=threads,
        parallel_speedup=(
            speed["transformer_steps_per_s"] / speed["transformer_1thread_steps_per_s"]
        ),
    )
    return {"speed": speed}


# The verdicts -----------------------------------------------------------------------------------


def claims_summary(
    settings: Settings,
    metrics: Mapping[str, Sequence[Mapping[str, Any]]],
    histories: Mapping[str, Sequence[pd.DataFrame]],
    analytic_results: Mapping[str, Any],
    benchmarks: Mapping[str, Mapping[str, Any]],
    registration: Mapping[str, Any],
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every claim's effect, intervals, margin, manipulation check and verdict (claims.csv,
    claims.md), marked where the claim or the decision code differs from its registration,
    with the seeds the power plan asked for; and what the figures draw. `benchmarks`: each
    benchmark job's results, by the claim it measures."""
    seeds = {arm: settings.seeds_of(arm) for arm in metrics}
    measurements = Measurements(metrics, analytic_results, benchmarks, settings.eval_n, seeds,
                                at_steps=stepped())  # fmt: skip
    decisions = judge_all(settings, measurements)
    rows = table_rows(settings, decisions, registration, plan, decision_code_sha256())
    table = pd.DataFrame(rows)
    return {
        "table": table,
        "md": claims_markdown(table, settings, registration),
        "figure_data": figure_data(
            settings, metrics, histories, analytic_results, benchmarks, table
        ),  # fmt: skip
    }
