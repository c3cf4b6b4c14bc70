"""Claims v4's measures of one run: weight snapshots, the eval-mode excess, attention's
spikiness at step 0 (docs/claims_v4_design.md, answers 4 and 6 of its review)."""

from __future__ import annotations

import math

import pytest
import torch

from tcrclaims import protocol
from tcrclaims.kinds import REFUTED, SUPPORTED
from tcrformer.training import measures
from tcrformer.training.checkpoints import snapshot_path
from tcrformer.training.data import PAD, VOCAB_SIZE
from tcrformer.training.loop import train
from tcrformer.training.model import load_model, state_dicts_equal
from tcrformer.training.recipe import Recipe, recipe_from_config, with_overrides
from tcrformer.training.schedule import label_smoothing_floor

from conftest import default_config

TINY = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, steps=8, batch_size=8, warmup=4,
            checkpoint_every=4, log_every=4, report_every=4, eval_n=20, device="cpu")  # fmt: skip


def tiny(**changes) -> Recipe:
    return with_overrides(recipe_from_config(default_config()["reversal"]), **{**TINY, **changes})


def test_snapshots_keep_the_weights_of_their_steps_and_change_no_bit(tmp_path):
    plain = train(tiny())
    kept = train(tiny(snapshot_steps=(3, 8)), checkpoint_dir=tmp_path)
    assert torch.equal(plain.losses, kept.losses)  # saving a snapshot touches no weight
    recipe = tiny(snapshot_steps=(3, 8))
    assert snapshot_path(tmp_path, recipe, 3).exists()
    last, _ = load_model(snapshot_path(tmp_path, recipe, 8), recipe.impl)
    assert state_dicts_equal(last, kept.model)
    early, _ = load_model(snapshot_path(tmp_path, recipe, 3), recipe.impl)
    assert not state_dicts_equal(early, kept.model)
    assert [step for step, _ in measures.snapshot_models(recipe, tmp_path)] == [3, 8]


def test_snapshot_steps_leave_other_rules_params_as_they_were():
    recipe = tiny()
    assert "snapshot_steps" not in recipe.params()  # an unchanged param reruns no rule
    assert "snapshot_steps" not in recipe.training_params()
    asked = tiny(snapshot_steps=(3, 8))
    assert asked.params()["snapshot_steps"] == (3, 8)
    assert Recipe.from_params({**asked.params(), "snapshot_steps": [3, 8]}) == asked
    assert asked.fingerprint() == recipe.fingerprint()  # where it writes, not what it trains


def test_eval_excess_is_dropout_free_and_finite_for_a_diverged_run():
    recipe = tiny(dropout=0.3, steps=40)
    model = train(recipe).model  # better than uniform, so nothing is capped
    src, tgt = measures.heldout(recipe)
    worst = math.log(VOCAB_SIZE) - label_smoothing_floor(recipe.label_smoothing)
    first = measures.eval_excess(model.train(), src, tgt, recipe.label_smoothing)
    assert 0 < first < worst
    assert first == measures.eval_excess(model.train(), src, tgt, recipe.label_smoothing)
    from tcrformer.training.loop import batch_loss

    model.train()  # the control: with dropout on, two passes differ
    a = float(batch_loss(model, src, tgt, recipe.label_smoothing))
    assert a != float(batch_loss(model, src, tgt, recipe.label_smoothing))
    with torch.no_grad():  # logits all equal: the uniform predictor, ln V under any target
        model.generator.weight.zero_()
        model.generator.bias.zero_()
    assert measures.eval_excess(model, src, tgt, recipe.label_smoothing) == pytest.approx(worst)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    assert measures.eval_excess(model, src, tgt, recipe.label_smoothing) == worst


def test_attention_entropy_tells_spiky_from_flat():
    recipe = tiny(d_model=64, num_heads=4, d_ff=64)
    src, _ = measures.heldout(recipe)
    flat = measures.initial_model(recipe)
    with torch.no_grad():  # queries of zero: every real key weighs the same
        for layer in flat.encoder.layers:
            layer.self_attn.w_q.weight.zero_()
            if layer.self_attn.w_q.bias is not None:
                layer.self_attn.w_q.bias.zero_()
    lengths = (src != PAD).sum(1).double()  # each real query spreads over its string
    flat_entropy = float((lengths * lengths.log()).sum() / lengths.sum())
    assert measures.attention_entropy(flat, src) == pytest.approx(flat_entropy, rel=1e-6)
    # positive control of `spiky`: the same weights without the 1/sqrt(d_k) are spikier
    scaled = measures.initial_attention_entropy(recipe, src)
    unscaled = measures.initial_attention_entropy(tiny(d_model=64, num_heads=4, d_ff=64,
                                                       score_scale=False), src)  # fmt: skip
    assert unscaled < scaled
    # negative control: the same arm twice is no spikier
    assert measures.initial_attention_entropy(recipe, src) == scaled


def test_with_eval_seed_per_seed_each_seed_has_its_own_held_out_strings_shared_by_its_arms():
    import yaml

    from tcrclaims.settings import Settings

    from conftest import ROOT

    claims = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
    assert claims["claims"]["eval_seed_per_seed"] == 6000  # v4 registers it
    v4 = Settings.from_config({**default_config(), **claims})
    assert v4.recipe("baseline", 3).eval_seed == v4.recipe("no_scaling", 3).eval_seed == 6003
    first, second = v4.seeds[:2]  # the registered seeds: 6000 + s
    assert v4.recipe("deep_pre", first).eval_seed == v4.recipe("deep_pre_flat_1", first).eval_seed
    assert v4.recipe("deep_pre", second).eval_seed == 6000 + second
    held_out = [measures.heldout(v4.recipe("baseline", s).replace(eval_n=50))[0] for s in (3, 4)]
    assert not torch.equal(*held_out)
    # the control: without it every seed of an arm has the arm's strings, as v1-v3
    del claims["claims"]["eval_seed_per_seed"]
    v3 = Settings.from_config({**default_config(), **claims})
    assert v3.recipe("baseline", 3).eval_seed == v3.recipe("baseline", 4).eval_seed


def test_a_claim_job_measures_the_excess_at_its_snapshots_and_keeps_no_weights(tmp_path):
    from tcrclaims import metrics, verdicts
    from tcrclaims.compute import train_claim_arm
    from tcrformer.core.config import ConfigError

    recipe = tiny(steps=40, snapshot_steps=(30, 40), dropout=0.3)
    job = train_claim_arm(recipe, recipe, tmp_path, {},
                          extras={"snapshots": (30, 40), "entropy": ()})  # fmt: skip
    numbers = job["metrics"]
    excess = numbers["excess_by_step"]
    assert sorted(excess) == [30, 40] and excess[30] != excess[40]  # neither capped
    worst = math.log(VOCAB_SIZE) - label_smoothing_floor(recipe.label_smoothing)
    assert all(0 < v < worst for v in excess.values())
    assert numbers["log2_excess"] == excess  # by step; a claim reads log2 of their mean
    m = verdicts.Measurements({"arm": [numbers]}, {}, {}, 20, at_steps=metrics.stepped())
    read = verdicts.arm_values({"snapshots": [30, 40]}, m, "arm", "log2_excess", [0])
    assert read.tolist() == pytest.approx([math.log2(sum(excess.values()) / 2)])
    assert numbers["initial_entropy"] == measures.initial_attention_entropy(
        recipe, measures.heldout(recipe)[0][:200]
    )
    assert not list(tmp_path.rglob("*.safetensors"))  # measured, then removed
    with pytest.raises(ConfigError, match="snapshot_steps"):
        tiny(snapshot_steps=(9,))


# Controls of log2_excess through the real measure and the real decision rule ----------------
#
# Six seeds of a 1-layer model on short strings, 240 steps each (under 2 s a seed on one
# core), kept at weight snapshots as a claim job keeps them. The stall (positive control):
# each seed's weights frozen at step FROZEN, read at the claim's snapshot steps, against the
# same seed trained on; its excess is 2.4-2.8 times the trained one's, its plain loss under
# twice (the floor, 0.61, is most of the trained loss). No stall (negative control): each
# seed's trained weights against the next seed's, the same recipe twice, on the first
# seed's strings (a seed's arms share them). Both are judged as sqrt_dk (above 1) and as
# pre_ln_warmup (non-inferiority, below 0.5): verdicts.experiment_effect reads log2_excess
# by metrics.stepped()'s rule, protocol.decide decides it as a family of one.

CONTROL_SEEDS = range(6)
CONTROL_SNAPSHOTS = [220, 240]
FROZEN = 60
LEARNS = dict(d_model=32, num_heads=2, d_ff=64, num_layers=1, cross_attention_layer=1,
              min_len=3, max_len=6, cdr3="CASS", steps=240, batch_size=32, schedule="linear",
              peak_lr=5e-3, warmup=10, dropout=0.0, checkpoint_every=240, log_every=240,
              report_every=240, eval_n=measures.EXCESS_STRINGS,
              snapshot_steps=(FROZEN, *CONTROL_SNAPSHOTS))  # fmt: skip
STALL = {"effect": "paired_difference", "metric": "log2_excess", "arm": "stalled",
         "reference": "trained", "margin": 1.0, "direction": "greater",
         "snapshots": CONTROL_SNAPSHOTS}  # sqrt_dk's form  # fmt: skip
NON_INFERIOR = {**STALL, "margin": 0.5, "direction": "less"}  # pre_ln_warmup's form


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """Per seed: (recipe, its held-out strings, {snapshot step: weights})."""
    torch.set_num_threads(1)
    torch.manual_seed(0)  # each recipe seeds itself; this pins anything else
    runs = []
    for seed in CONTROL_SEEDS:
        recipe = tiny(**LEARNS, seed=seed, eval_seed=6000 + seed)
        where = tmp_path_factory.mktemp(f"learned{seed}")
        train(recipe, checkpoint_dir=where)
        runs.append(
            (recipe, measures.heldout(recipe), dict(measures.snapshot_models(recipe, where)))
        )
    return runs


def excess_at(models: dict, run) -> dict[int, float]:
    """{step: eval_excess} of `models` ({step: weights}) on `run`'s held-out strings."""
    recipe, (src, tgt), _ = run
    return {step: measures.eval_excess(model, src, tgt, recipe.label_smoothing)
            for step, model in models.items()}  # fmt: skip


def trained(run) -> dict:
    return {step: run[2][step] for step in CONTROL_SNAPSHOTS}


def stall_arms(runs) -> dict[str, list[dict[int, float]]]:
    """Each seed's weights frozen at step FROZEN, and the same seed's trained on."""
    return {
        "stalled": [excess_at({s: run[2][FROZEN] for s in CONTROL_SNAPSHOTS}, run) for run in runs],
        "trained": [excess_at(trained(run), run) for run in runs],
    }


def same_recipe_arms(runs) -> dict[str, list[dict[int, float]]]:
    """Each seed's trained weights, and the next seed's in their place: no stall."""
    others = runs[1:] + runs[:1]
    return {
        "stalled": [
            excess_at(trained(other), run) for run, other in zip(runs, others, strict=True)
        ],
        "trained": [excess_at(trained(run), run) for run in runs],
    }


def judged(arms: dict[str, list[dict[int, float]]], test) -> tuple[str, protocol.Effect]:
    """The verdict of `test` on per-seed excesses by step, as the claims chapter reaches it."""
    from tcrclaims import metrics, verdicts

    per_seed = {arm: [{"log2_excess": by_step} for by_step in seeds]
                for arm, seeds in arms.items()}  # fmt: skip
    m = verdicts.Measurements(per_seed, {}, {}, measures.EXCESS_STRINGS, at_steps=metrics.stepped())
    found, _ = verdicts.experiment_effect(test, m)
    return protocol.decide({"control": found}, alpha=0.05)[0]["control"], found


def mean_excess(by_step: dict[int, float]) -> float:
    return sum(by_step[s] for s in CONTROL_SNAPSHOTS) / len(CONTROL_SNAPSHOTS)


def test_log2_excess_positive_control_a_stall_is_shown_above_its_margin(learned):
    arms = stall_arms(learned)
    ratios = [mean_excess(a) / mean_excess(b) for a, b in zip(*arms.values(), strict=True)]
    assert min(ratios) > 2  # the manipulation: the stalled excess more than doubled, every seed
    verdict, found = judged(arms, STALL)
    assert found.per_seed == pytest.approx([math.log2(r) for r in ratios])
    assert verdict == SUPPORTED and found.seeds == (6, 6)
    assert judged(arms, NON_INFERIOR)[0] == REFUTED  # nor is a stall "as good"


def test_log2_excess_negative_control_no_stall_is_shown_below_its_margin(learned):
    arms = same_recipe_arms(learned)
    verdict, found = judged(arms, STALL)
    assert verdict == REFUTED and found.seeds == (6, 6)  # shown below 1: no stall
    assert judged(arms, NON_INFERIOR)[0] == SUPPORTED  # shown below 0.5: as good


_real_excess = measures.eval_excess


def _plain_loss(model, src, tgt, label_smoothing):  # the floor left in
    return _real_excess(model, src, tgt, label_smoothing) + label_smoothing_floor(label_smoothing)


def _unsmoothed(model, src, tgt, label_smoothing):  # plain cross-entropy, smoothing's floor
    return _real_excess(model, src, tgt, 0.0) - label_smoothing_floor(label_smoothing)


@pytest.mark.filterwarnings("ignore:invalid value encountered in log2")  # below the floor
@pytest.mark.parametrize(
    ("broken", "arms", "verdicts"),
    [
        (_plain_loss, stall_arms, (SUPPORTED, REFUTED)),
        (_unsmoothed, same_recipe_arms, (REFUTED, SUPPORTED)),
    ],
)
def test_log2_excess_controls_fail_on_a_broken_measure(learned, monkeypatch, broken, arms,
                                                         verdicts):  # fmt: skip
    """The controls' teeth: the plain loss cannot see this stall (near the floor a loss ratio
    barely moves), and the loss without smoothing, less smoothing's floor, parts two runs of
    one recipe (near zero, or below it)."""
    assert tuple(judged(arms(learned), t)[0] for t in (STALL, NON_INFERIOR)) == verdicts
    monkeypatch.setattr(measures, "eval_excess", broken)
    assert tuple(judged(arms(learned), t)[0] for t in (STALL, NON_INFERIOR)) != verdicts
