"""The claims chapter: its settings, every criterion evaluated by code, the arms' changes
reaching the trained model, and the reduced run as CI runs it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from tcrformer.chapters.claims import verdicts
from tcrformer.chapters.claims.compute import finite_or_none
from tcrformer.chapters.claims.settings import KINDS, VERDICTS, Settings
from tcrformer.core.config import ConfigError
from tcrformer.training.loop import make_step, new_run
from tcrformer.training.measures import spikes
from tcrformer.training.model import build_model

from conftest import ROOT, default_config, snakemake

torch.set_num_threads(1)
CLAIMS = yaml.safe_load((ROOT / "config/claims.yaml").read_text())
CONFIG = {**default_config(), **CLAIMS}
SETTINGS = Settings.from_config(CONFIG)


def test_every_claim_names_its_source_criterion_and_a_test_code_can_run():
    assert len(SETTINGS.claims) >= 14
    kinds = {claim.test["kind"] for claim in SETTINGS.claims}
    assert kinds == set(KINDS)  # every kind of criterion is used, and no other
    for claim in SETTINGS.claims:
        assert claim.source.startswith(("000_", "002_")) and claim.criterion.startswith("SUPPORTED")
        assert all(arm in SETTINGS.arms for arm in claim.arms())


@pytest.mark.parametrize(
    ("arms", "key"),
    [
        ({"baseline": {}, "bad": {"warmup": -1}}, "claims.arms.bad.warmup"),
        ({"baseline": {}, "bad": {"no_such_key": 1}}, "claims.arms.bad"),
        ({"other": {}}, "claims.arms"),
    ],
)
def test_bad_arms_name_their_key(arms, key):
    config = {**CONFIG, "claims": {**CONFIG["claims"], "arms": arms, "list": []}}
    with pytest.raises(ConfigError) as err:
        Settings.from_config(config)
    assert err.value.key.startswith(key), err.value


def test_a_claim_that_names_no_arm_is_refused():
    bad = {**CLAIMS["claims"]["list"][0], "test": {"kind": "diverges", "arm": "nowhere",
                                                   "reference": "baseline"}}  # fmt: skip
    config = {**CONFIG, "claims": {**CONFIG["claims"], "list": [bad]}}
    with pytest.raises(ConfigError, match="names no arm"):
        Settings.from_config(config)


# The criteria, on measurements made by hand --------------------------------------------------


def seeds(n=4, **metrics):
    """n seeds' metrics; a tuple gives one value per seed, anything else is shared."""
    return [
        {k: (v[i] if isinstance(v, tuple) else v) for k, v in metrics.items()} for i in range(n)
    ]


def measure(arms, **extra):
    return verdicts.Measurements(
        arms, extra.get("analytic", {}), extra.get("cost", {}), extra.get("speed", {}), 1000
    )


def test_divergence_criterion_decides_all_three_ways():
    test = {"kind": "diverges", "arm": "a", "reference": "r", "factor": 2.0, "at_least": 0.5}
    ref = seeds(final_loss=0.6)
    assert verdicts.judge(test, measure({"a": seeds(final_loss=(5, 5, 0.6, 0.6)), "r": ref}))\
        .verdict == verdicts.SUPPORTED  # fmt: skip
    assert verdicts.judge(test, measure({"a": seeds(final_loss=0.61), "r": ref})).verdict == (
        verdicts.REFUTED
    )
    one = seeds(final_loss=(None, 0.6, 0.6, 0.6))  # a NaN loss (stored as None) diverged
    assert verdicts.judge(test, measure({"a": one, "r": ref})).verdict == verdicts.INCONCLUSIVE


def test_higher_and_importance_criteria():
    higher = {"kind": "higher", "metric": "heldout_exact", "arm": "a", "reference": "r"}
    same = measure({"a": seeds(heldout_exact=999), "r": seeds(heldout_exact=999)})
    assert verdicts.judge(higher, same).verdict == verdicts.INCONCLUSIVE
    test = {"kind": "importance", "arm": "a", "supported_below": 0.5, "refuted_at": 0.8}
    aligned = [{"antidiagonal": m, "drop": m * 10} for m in (0.1, 0.5, 0.9, 0.3)]
    assert verdicts.judge(test, measure({"a": [{"heads": aligned}]})).verdict == verdicts.REFUTED
    constant = [{"antidiagonal": m, "drop": 0} for m in (0.1, 0.5, 0.9)]
    assert verdicts.judge(test, measure({"a": [{"heads": constant}]})).verdict == (
        verdicts.INCONCLUSIVE
    )


def test_spearman_handles_ties_and_constants():
    assert verdicts.spearman(np.array([1, 2, 3]), np.array([10, 20, 30])) == pytest.approx(1.0)
    assert verdicts.spearman(np.array([1, 2, 3]), np.array([3, 2, 1])) == pytest.approx(-1.0)
    assert np.isnan(verdicts.spearman(np.array([1, 2, 3]), np.array([0, 0, 0])))


def test_every_kind_returns_a_verdict_and_a_sentence():
    """Synthetic measurements for every claim of the claims file: each judged by code."""
    by_length = {"8": 1.0, "16": 0.5}
    metric = dict(
        final_loss=0.6, early_loss=1.0, heldout_exact=990, overconfidence=0.01, ece=0.02,
        spikes=1, max_grad_norm=3.0, activation_ratios=[0.8, 1.1], greedy_logprob=-2.0,
        beam_logprob=-1.9, greedy_exact=990, beam_exact=991, exact_by_length=by_length,
        heads=[{"antidiagonal": 0.2, "drop": 3}, {"antidiagonal": 0.9, "drop": 1}],
    )  # fmt: skip
    arms = {arm: seeds(**metric) for arm in SETTINGS.arms}
    analytic = {
        "permutation_off": 0.0, "permutation_on": 0.5, "relative_residuals": {"1": 1e-14},
        "cosine_first_rise": 44,
        "scaling": {"jacobian_unscaled": 0.2, "jacobian_scaled": 0.3, "ratio": 1.5,
                    "max_weight_unscaled": 0.99, "max_weight_scaled": 0.4},
    }  # fmt: skip
    cost = {"memory_exponent": 2.0, "time_exponent": 1.5, "min_length": 512}
    speed = {"gru_steps_per_s": 5.0, "transformer_steps_per_s": 9.0}
    m = measure(arms, analytic=analytic, cost=cost, speed=speed)
    for claim in SETTINGS.claims:
        verdict = verdicts.judge(claim.test, m)
        assert verdict.verdict in VERDICTS and verdict.measured, claim.id


def test_loss_spikes_and_non_finite_metrics():
    losses = np.full(300, 1.0)
    losses[200] = 2.0  # one spike, after step 100
    losses[20] = 9.0  # in the first 100 steps: not counted
    assert spikes(losses) == 1
    assert finite_or_none({"a": [1.0, float("nan")], "b": float("inf")}) == {"a": [1.0, None],
                                                                             "b": None}  # fmt: skip


# The arms' changes reach the model ----------------------------------------------------------


def test_the_no_positions_arm_has_no_positional_term():
    recipe = SETTINGS.recipe("no_positions", 0)
    assert recipe.architecture()["positions"] is False
    model = build_model(recipe.architecture(), recipe.impl).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    shuffled = src[:, [3, 0, 7, 1, 6, 2, 5, 4]]
    mask = src != 0
    with torch.no_grad():
        out, out_shuffled = model.encode(src, mask[:, None]), model.encode(shuffled, mask[:, None])
    # Without positions the encoder is permutation-equivariant: a bag of letters.
    torch.testing.assert_close(out[:, [3, 0, 7, 1, 6, 2, 5, 4]], out_shuffled)
    with_positions = build_model(SETTINGS.recipe("baseline", 0).architecture(), "fast").eval()
    with torch.no_grad():
        a, b = (
            with_positions.encode(src, mask[:, None]),
            with_positions.encode(shuffled, mask[:, None]),
        )
    assert (a[:, [3, 0, 7, 1, 6, 2, 5, 4]] - b).abs().max() > 1e-3


def test_the_other_arms_change_what_they_say():
    attention = [m for m in build_model(SETTINGS.recipe("no_scaling", 0).architecture(),
                                        "fast").modules() if hasattr(m, "scale")]  # fmt: skip
    assert attention and all(m.scale == 1.0 for m in attention)
    xavier, default = (new_run(SETTINGS.recipe(arm, 0), torch.device("cpu")).model
                       for arm in ("baseline", "default_init"))  # fmt: skip
    assert not torch.equal(xavier.src_embed.weight, default.src_embed.weight)
    assert default.src_embed.weight.std() > 5 * xavier.src_embed.weight.std()  # N(0, 1) vs Xavier
    assert (
        SETTINGS.recipe("deep_pre", 0).num_layers == 6
        and SETTINGS.recipe("deep_pre", 0).norm == "pre"
    )
    assert SETTINGS.recipe("no_warmup", 0).warmup == 0
    gru = SETTINGS.recipe("gru", 0)
    assert gru.arch == "gru"


def test_no_clipping_takes_the_norm_and_clips_nothing():
    recipe = SETTINGS.recipe("no_clipping", 0)
    assert recipe.grad_clip == 0
    from dataclasses import replace

    small = replace(recipe, d_model=16, num_heads=2, d_ff=32, batch_size=8, steps=2, device="cpu")
    run = new_run(small, torch.device("cpu"))
    step = make_step(small, run.model, run.optimizer, run.scheduler, run.device)
    from tcrformer.training.data import random_batch

    loss, norm = step(*random_batch(8, 8, 16, torch.Generator().manual_seed(0)))
    assert torch.isfinite(loss) and norm > 0


def test_beam_and_greedy_outputs_are_scored_by_one_function():
    """Width 1 writes greedy's output, so the two scores are the same to the bit: an equal
    output must never look better or worse (the beam's incremental float32 score differs
    from the teacher-forced one by ~1e-8)."""
    from dataclasses import replace

    from tcrformer.training.data import random_batch
    from tcrformer.training.measures import beam_metrics

    recipe = replace(SETTINGS.recipe("baseline", 0), d_model=16, num_heads=2, d_ff=32)
    torch.manual_seed(0)
    model = build_model(recipe.architecture(), recipe.impl).eval()
    src, tgt = random_batch(64, 4, 12, torch.Generator().manual_seed(1))
    scores = beam_metrics(model, src, tgt, width=1)
    assert scores["beam_exact"] == scores["greedy_exact"]
    assert scores["beam_logprob"] == scores["greedy_logprob"]


# The reduced run, as CI runs it -------------------------------------------------------------


@pytest.mark.slow
def test_the_reduced_run_gives_every_claim_a_row_a_figure_and_a_verdict(workflow_copy):
    reduced = str(workflow_copy / "config/claims_reduced.yaml")
    done = snakemake(workflow_copy, "claims", "--configfile", reduced, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = workflow_copy / "results/claims_reduced"
    table = pd.read_csv(folder / "claims/claims.csv")
    assert list(table["id"]) == [c.id for c in SETTINGS.claims]
    assert set(table["verdict"]) <= set(VERDICTS) and table["measured"].str.len().min() > 10
    assert "Reduced run: not a verdict" in (folder / "claims/claims.md").read_text()
    for figure in ("figC1_training_arms", "figC2_gradients_and_calibration",
                   "figC3_attention_importance", "figC4_positional_encoding",
                   "figC5_attention_cost", "figC6_recurrent_and_beam"):  # fmt: skip
        assert (folder / f"figures/{figure}.png").stat().st_size > 10_000, figure
    data = json.loads((folder / "claims/figure_data.json").read_text())
    assert data["reduced"] is True and set(data["verdicts"]) == set(table["id"])
    report = workflow_copy / "claims_report.zip"
    args = ("claims", "--configfile", reduced, "--report", str(report))
    done = snakemake(workflow_copy, *args)
    assert done.returncode == 0 and report.stat().st_size > 10_000, done.stderr[-2000:]
