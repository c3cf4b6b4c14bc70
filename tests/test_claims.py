"""The claims chapter (v2): its settings, the decision rule, every criterion evaluated by code,
the arms' changes reaching the trained model, the pre-registration, and the reduced run as CI
runs it."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from tcrformer.chapters.claims import protocol, verdicts
from tcrformer.chapters.claims.compute import claims_sweep, finite_or_none
from tcrformer.chapters.claims.kinds import KINDS, TESTS
from tcrformer.chapters.claims.settings import Settings
from tcrformer.chapters.claims.summary import CHANGED, registration_mark
from tcrformer.core.config import ConfigError
from tcrformer.training import measures
from tcrformer.training.data import random_batch
from tcrformer.training.loop import make_step, new_run
from tcrformer.training.model import build_model
from tcrformer.training.schedule import NoamSchedule, schedule_for

from conftest import ROOT, default_config, snakemake

torch.set_num_threads(1)
CLAIMS = yaml.safe_load((ROOT / "config/claims.yaml").read_text())
CONFIG = {**default_config(), **CLAIMS}
SETTINGS = Settings.from_config(CONFIG)


# The claims file -------------------------------------------------------------------------------


def test_every_claim_names_its_source_criterion_and_a_test_code_can_run():
    assert len(SETTINGS.claims) >= 14 and len(SETTINGS.seeds) >= 8
    assert {c.kind for c in SETTINGS.claims} == set(KINDS)
    used = {(c.kind, c.test["effect"]) for c in SETTINGS.claims}
    for kind, effects in TESTS.items():  # every evaluator is used, and no other
        if kind != "experiment":
            assert {e for k, e in used if k == kind} == set(effects), kind
    for claim in SETTINGS.claims:
        assert claim.source.startswith(("000_", "002_")), claim.id
        assert claim.criterion.startswith(("SUPPORTED", "HOLDS")), claim.id
        assert claim.v1, f"{claim.id}: say what v2 changed"
        assert all(arm in SETTINGS.arms for arm in claim.arms())
    experiments = [c for c in SETTINGS.claims if c.kind == "experiment"]
    assert all("margin" in c.test and "direction" in c.test for c in experiments)


@pytest.mark.parametrize(
    ("arms", "key"),
    [
        ({"baseline": {}, "bad": {"warmup": -1}}, "claims.arms.bad.warmup"),
        ({"baseline": {}, "bad": {"no_such_key": 1}}, "claims.arms.bad"),
        ({"other": {}}, "claims.arms"),
    ],
)
def test_bad_arms_name_their_key(arms, key):
    section = {**CONFIG["claims"], "arms": arms, "list": [], "sweeps": {}}
    with pytest.raises(ConfigError) as err:
        Settings.from_config({**CONFIG, "claims": section})
    assert err.value.key.startswith(key), err.value


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"test": {"effect": "median_difference", "metric": "x", "arm": "nowhere",
                   "reference": "baseline", "margin": 0.1, "direction": "greater"}},
         "claims.list[0].test"),
        ({"test": {"effect": "vibes"}}, "claims.list[0].test.effect"),
        ({"kind": "rumour"}, "claims.list[0].kind"),
        ({"test": {**CLAIMS["claims"]["list"][0]["test"], "direction": "sideways"}},
         "claims.list[0].test.direction"),
    ],
)  # fmt: skip
def test_a_bad_claim_names_its_key(change, key):
    bad = {**CLAIMS["claims"]["list"][0], **change}
    with pytest.raises(ConfigError) as err:
        Settings.from_config({**CONFIG, "claims": {**CONFIG["claims"], "list": [bad]}})
    assert err.value.key == key, err.value


# The decision rule -------------------------------------------------------------------------------


def test_the_bootstrap_interval_and_p_values_see_the_margin():
    base = np.array([0.60, 0.61, 0.62, 0.63, 0.64, 0.65, 0.66, 0.67])
    clear = protocol.effect("median_difference", [base + 0.2, base], 0.05, "greater")
    assert clear.low > 0.05 and clear.side == protocol.SUPPORTED and clear.p_value < 0.001
    small = protocol.effect("median_difference", [base + 0.01, base], 0.05, "greater")
    assert small.high < 0.05 and small.side == protocol.REFUTED and small.p_value < 0.025
    noisy = protocol.effect("median_difference", [base * 1.05, base], 0.03, "greater")
    assert noisy.low < 0.03 < noisy.high and noisy.p_value > 0.01


def test_equivalence_needs_the_whole_interval_inside_the_margin():
    base = np.linspace(0.6, 0.7, 8)
    inside = protocol.effect("relative_difference", [base * 1.01, base], 0.1, "equivalent")
    assert inside.side == protocol.SUPPORTED and inside.p_value < 0.025
    outside = protocol.effect("relative_difference", [base * 1.5, base], 0.1, "equivalent")
    assert outside.side == protocol.REFUTED and outside.p_value < 0.01


def test_rates_get_a_score_interval_that_knows_small_samples():
    """0 of 8 against 0 of 8 cannot rule out a 25 % difference (0 of 8 allows 31 %); a
    bootstrap would call the difference exactly 0. 8 of 8 against 0 of 8 clears it."""
    none = protocol.effect("rate_difference", [np.zeros(8), np.zeros(8)], 0.25, "greater")
    assert none.low < -0.25 and none.high > 0.25 and none.p_value > 0.05
    every = protocol.effect("rate_difference", [np.ones(8), np.zeros(8)], 0.25, "greater")
    assert every.side == protocol.SUPPORTED and every.p_value < 0.05 / 13
    with pytest.raises(ValueError, match="0/1 outcomes"):
        protocol.effect("rate_difference", [np.full(8, 0.5), np.zeros(8)], 0.25, "greater")


def test_holm_steps_down_and_stops_at_the_first_failure():
    # sorted 0.005 <= 0.05/4, 0.01 <= 0.05/3, then 0.03 > 0.05/2: stop
    assert protocol.holm([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert protocol.holm([0.02, 0.02], 0.05) == [True, True]
    assert protocol.holm([0.03, 0.2], 0.05) == [False, False]


def test_a_claim_decided_alone_would_be_inconclusive_in_the_family():
    """Holm at work: p = 0.02 clears 5 % alone, not as one of five tests."""
    effects = {f"c{i}": protocol.Effect("m", 1, 0, 2, 0, "greater", 0.02, 0.9, (8,))
               for i in range(5)}  # fmt: skip
    assert set(protocol.decide(effects, 0.05).values()) == {protocol.INCONCLUSIVE}
    assert protocol.decide({"c0": effects["c0"]}, 0.05)["c0"] == protocol.SUPPORTED


def seeds(n=8, **metrics):
    """n seeds' metrics; a tuple gives one value per seed, anything else is shared."""
    return [
        {k: (v[i] if isinstance(v, tuple) else v) for k, v in metrics.items()} for i in range(n)
    ]


def measure(arms, **extra):
    return verdicts.Measurements(
        arms, extra.get("analytic", {}), extra.get("cost", {}), extra.get("speed", {}), 1000
    )


def test_divergence_is_judged_against_the_reference_median():
    test = {"effect": "rate_difference", "metric": "diverged", "arm": "a", "reference": "r",
            "divergence_reference": "r", "factor": 2.0, "margin": 0.25,
            "direction": "greater"}  # fmt: skip
    ref = seeds(final_loss=0.6)
    half = seeds(final_loss=(5, 5, 5, 5, None, 0.6, 0.6, 0.6))  # None: a NaN loss, diverged
    found, (arm, reference) = verdicts.experiment_effect(test, measure({"a": half, "r": ref}),
                                                         999, 0)  # fmt: skip
    assert arm.tolist() == [1, 1, 1, 1, 1, 0, 0, 0] and reference.sum() == 0
    assert found.estimate == pytest.approx(5 / 8)


def test_pooled_arms_give_each_seed_the_mean_over_them():
    test = {"effect": "median", "metric": "x", "arm": ["a", "b"], "margin": 0, "direction": "less"}
    m = measure({"a": seeds(2, x=(0.0, 1.0)), "b": seeds(2, x=(1.0, 1.0))})
    assert verdicts.per_seed(test, m, "arm").tolist() == [0.5, 1.0]


def synthetic_measurements():
    by_length = {"8": 1.0, "16": 0.5}
    metric = dict(
        final_loss=0.6, early_loss=1.0, heldout_exact=990, heldout_fraction=0.99,
        overconfidence=0.01, ece=0.02, spikes=1, worst_jump=0.4, max_grad_norm=3.0,
        activation_ratios=[0.8, 1.1], init_scale=0.2, beam_net_wins=0.01, forgetting=0.5,
        exact_by_length=by_length, importance_rho=(0.1, 0.3, 0.2, 0.5, 0.1, 0.2, 0.4, 0.3),
    )  # fmt: skip
    arms = {arm: seeds(**metric) for arm in SETTINGS.arms}
    analytic = {
        "permutation_off": 0.0, "permutation_on": 0.5, "relative_residuals": {"1": 1e-14},
        "cosine_first_rise": 44, "jacobian_ratios": list(np.linspace(1.2, 2.6, 40)),
    }  # fmt: skip
    cost = {"memory_exponent": 2.0, "time_exponent": 1.5, "min_length": 512}
    speed = {"gru_blocks": [5.0, 5.5, 4.8], "transformer_blocks": [9.0, 9.1, 8.7]}
    return measure(arms, analytic=analytic, cost=cost, speed=speed)


def test_every_claim_gets_a_verdict_of_its_kind_and_a_sentence():
    decisions = verdicts.judge_all(SETTINGS, synthetic_measurements())
    for claim in SETTINGS.claims:
        decision = decisions[claim.id]
        assert decision.verdict in verdicts.VERDICTS[claim.kind], claim.id
        assert len(decision.measured) > 10, claim.id
        assert decision.adjusted == (claim.kind == "experiment")
    assert decisions["attention_importance"].verdict == protocol.SUPPORTED  # |rho| <= 0.5
    assert decisions["rnn_slow"].verdict == protocol.SUPPORTED  # ratios 0.55, 0.60, 0.55
    assert decisions["relative_positions"].verdict == protocol.HOLDS


def test_a_claim_changed_after_registration_is_marked():
    claim, arms = SETTINGS.claims[0], SETTINGS.arms
    registration = {"claims": SETTINGS.registration()}
    assert registration_mark(claim, registration, arms) == "as registered"
    moved = replace(claim, test={**claim.test, "margin": 0.1})  # a criterion moved
    assert registration_mark(moved, registration, arms) == CHANGED
    assert registration_mark(replace(claim, v1="other words"), registration, arms) == (
        "as registered"
    )
    retrained = {**arms, "no_warmup": arms["no_warmup"].replace(warmup=200)}  # an arm moved
    assert registration_mark(claim, registration, retrained) == CHANGED
    reseeded = {name: r.replace(seed=5) for name, r in arms.items()}  # a seed is no change
    assert registration_mark(claim, registration, reseeded) == "as registered"


def test_a_sweep_picks_the_best_median_and_the_first_on_a_tie():
    sweep = SETTINGS.sweeps["gru"]
    results = {arm: seeds(2, heldout_exact=(900, 910)) for arm in sweep.candidates}
    results[sweep.candidates[2]] = seeds(2, heldout_exact=(950, 990))
    values = {arm: i for i, arm in enumerate(sweep.candidates)}
    assert claims_sweep(sweep, results, values)["choice"]["chosen"] == sweep.candidates[2]
    results[sweep.candidates[2]] = results[sweep.candidates[0]]
    assert claims_sweep(sweep, results, values)["choice"]["value"] == 0


# The measures ------------------------------------------------------------------------------------


def test_the_worst_jump_sees_a_doubled_excess_loss_near_the_floor():
    floor = 0.611
    losses = np.full(300, floor + 0.02)
    assert measures.worst_jump(losses, floor) == pytest.approx(0.0)
    losses[200] = floor + 0.04  # a 3 % rise of the loss, a doubled excess
    assert measures.worst_jump(losses, floor) == pytest.approx(1.0)
    assert measures.spikes(losses) == 0  # the old criterion could not see it
    losses[250] = math.nan
    assert measures.worst_jump(losses, floor) == math.inf


def test_init_scale_and_the_rank_correlation():
    assert measures.init_scale([1.0, 1.0]) == 0 and measures.init_scale([2.0, 0.5]) == 1.0
    assert measures.rank_correlation([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert math.isnan(measures.rank_correlation([1, 2, 3], [0, 0, 0]))
    assert finite_or_none({"a": [1.0, float("nan")], "b": float("inf")}) == {"a": [1.0, None],
                                                                             "b": None}  # fmt: skip


def tiny(arm, **changes):
    small = dict(d_model=16, num_heads=2, d_ff=32, batch_size=8, device="cpu", eval_n=40)
    return SETTINGS.recipe(arm, 0).replace(**{**small, **changes})


def test_beam_and_greedy_outputs_are_scored_by_one_function():
    """Width 1 writes greedy's output, so every string is a tie and the scores are equal to
    the bit; at width 4 an equal output is a tie too, never a win or a loss."""
    recipe = tiny("baseline")
    torch.manual_seed(0)
    model = build_model(recipe.architecture(), recipe.impl).eval()
    src, tgt = random_batch(64, 4, 12, torch.Generator().manual_seed(1))
    narrow = measures.beam_metrics(model, src, tgt, width=1)
    assert narrow["beam_logprob"] == narrow["greedy_logprob"] and narrow["beam_ties"] == 64
    wide = measures.beam_metrics(model, src, tgt, width=4)
    assert wide["beam_wins"] + wide["beam_ties"] + wide["beam_losses"] == 64
    same = measures.same_through_eos(torch.tensor([[1, 5, 2, 7]]), torch.tensor([[1, 5, 2, 0]]))
    assert same.tolist() == [True]  # what follows <eos> does not count


# The arms' changes reach the model ---------------------------------------------------------------


def test_no_warmup_starts_at_the_baselines_peak_rate_and_decays_alike():
    base, flat = (schedule_for(SETTINGS.recipe(a, 0))[1] for a in ("baseline", "no_warmup"))
    peak = base(399)  # step 400, the baseline's peak
    assert flat(0) == pytest.approx(peak) and flat(199) == pytest.approx(peak)
    assert all(flat(i) == pytest.approx(base(i)) for i in (399, 1000, 2999))
    assert NoamSchedule(64, 0)(0) > 19 * peak  # what v1's warmup 0 did at step 1
    quarter = schedule_for(SETTINGS.recipe("deep_post_flat_q", 0))[1]
    assert quarter(0) == pytest.approx(0.25 * peak)


def test_the_no_positions_arm_has_no_positional_term():
    recipe = SETTINGS.recipe("no_positions", 0)
    model = build_model(recipe.architecture(), recipe.impl).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    order = [3, 0, 7, 1, 6, 2, 5, 4]
    mask = (src != 0)[:, None]
    with torch.no_grad():
        out, shuffled = model.encode(src, mask), model.encode(src[:, order], mask)
    torch.testing.assert_close(out[:, order], shuffled)  # a bag of letters


def test_default_init_changes_the_linear_layers_and_nothing_else():
    xavier, default = (new_run(tiny(arm), torch.device("cpu")).model
                       for arm in ("baseline", "default_init"))  # fmt: skip
    assert torch.equal(xavier.src_embed.weight, default.src_embed.weight)
    assert torch.equal(xavier.tgt_embed.weight, default.tgt_embed.weight)
    assert not torch.equal(xavier.generator.weight, default.generator.weight)


def test_a_fixed_training_set_repeats_its_strings():
    recipe = tiny("fixed", train_set=20, batch_size=64, steps=3)
    run = new_run(recipe, torch.device("cpu"))
    seen = {tuple(row) for _ in range(3) for row in run.strings.next_batch()[0].tolist()}
    assert len(seen) <= 20
    train_src, _ = measures.training_strings(recipe)
    assert {tuple(r) for r in train_src.tolist()} >= seen
    fresh = new_run(tiny("baseline", batch_size=64), torch.device("cpu")).strings
    assert len({tuple(r) for r in fresh.next_batch()[0].tolist()}) == 64


def test_no_clipping_takes_the_norm_and_clips_nothing():
    recipe = tiny("no_clipping", steps=2)
    assert recipe.grad_clip == 0
    run = new_run(recipe, torch.device("cpu"))
    step = make_step(recipe, run.model, run.optimizer, run.scheduler, run.device)
    loss, norm = step(*random_batch(8, 8, 16, torch.Generator().manual_seed(0)))
    assert torch.isfinite(loss) and norm > 0


# The reduced run, as CI runs it ------------------------------------------------------------------


@pytest.mark.slow
def test_the_reduced_run_gives_every_claim_a_row_a_figure_and_a_verdict(workflow_copy):
    reduced = str(workflow_copy / "config/claims_reduced.yaml")
    done = snakemake(workflow_copy, "claims", "--configfile", reduced, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = workflow_copy / "results/claims_reduced"
    table = pd.read_csv(folder / "claims/claims.csv")
    assert list(table["id"]) == [c.id for c in SETTINGS.claims]
    for row in table.itertuples():
        assert row.verdict in verdicts.VERDICTS[row.kind], row.id
    assert set(table["registered"]) == {"as registered"}
    assert "Reduced run: not a verdict" in (folder / "claims/claims.md").read_text()
    for figure in ("figC1_training_arms", "figC2_gradients_and_calibration",
                   "figC3_attention_importance", "figC4_positional_encoding",
                   "figC5_attention_cost", "figC6_recurrent_and_beam",
                   "figC7_effects"):  # fmt: skip
        assert (folder / f"figures/{figure}.png").stat().st_size > 10_000, figure
    data = json.loads((folder / "claims/figure_data.json").read_text())
    assert data["reduced"] is True and set(data["verdicts"]) == set(table["id"])
    assert not list(folder.glob("claims/arms/*/seed*/model.safetensors"))  # evaluated, not kept
    registered = json.loads((folder / "claims/registration.json").read_text())
    assert set(registered["claims"]) == set(table["id"]) and registered["claims_file_sha256"]
    # Finished jobs stay finished from their files alone (a later session restores them into
    # a fresh clone): without Snakemake's own records, and without the deleted weights,
    # there is nothing to redo.
    import shutil

    shutil.rmtree(workflow_copy / ".snakemake")
    done = snakemake(workflow_copy, "claims", "--configfile", reduced, "-n")
    assert done.returncode == 0 and "Nothing to be done" in done.stdout + done.stderr, done.stdout[
        -3000:
    ]
    report = workflow_copy / "claims_report.zip"
    args = ("claims", "--configfile", reduced, "--report", str(report))
    done = snakemake(workflow_copy, *args)
    assert done.returncode == 0 and report.stat().st_size > 10_000, done.stderr[-2000:]


def test_the_archive_carries_finished_jobs_and_their_times(tmp_path):
    """A long run spans sessions: what its finished jobs wrote goes into an archive that a
    fresh clone unpacks, times and all (unfinished jobs, without metrics, stay behind)."""
    import os
    import tarfile

    from tcrformer.chapters.claims import archive

    old, new = tmp_path / "old", tmp_path / "new"
    done = old / "results/paper/claims/arms/baseline/seed0"
    half = old / "results/paper/claims/arms/baseline/seed1"
    for folder in (done, half):
        folder.mkdir(parents=True)
    for name in archive.JOB_FILES:
        (done / name).write_text(name)
        os.utime(done / name, (1_000_000, 1_000_000))
    (half / "history.csv").write_text("training, not yet evaluated")
    (old / "results/paper/claims/registration.json").write_text("{}")
    (old / "results/paper/claims/claims.md").write_text("the table")  # a finished run's
    figures = old / "results/paper/figures"
    figures.mkdir(parents=True)
    (figures / "figC7_effects.png").write_text("C7")  # a claims figure: carried
    (figures / "fig01_toy_input.png").write_text("toy")  # another chapter's: not
    packed = tmp_path / "claims.tar.gz"
    assert archive.save_finished("paper", packed, root=old) == 1
    assert archive.restore_finished(packed, root=new) == 1
    restored = new / "results/paper/claims/arms/baseline/seed0/metrics.json"
    assert restored.read_text() == "metrics.json" and restored.stat().st_mtime == 1_000_000
    assert not (new / "results/paper/claims/arms/baseline/seed1").exists()
    assert (new / "results/paper/claims/claims.md").read_text() == "the table"
    assert (new / "results/paper/figures/figC7_effects.png").exists()
    assert not (new / "results/paper/figures/fig01_toy_input.png").exists()
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(packed, arcname="../outside.txt")
    with pytest.raises(ValueError, match="outside results"):
        archive.restore_finished(evil, root=new)


@pytest.mark.slow
def test_a_restored_job_is_done_for_the_resumed_run(workflow_copy, tmp_path):
    """What the archive's README says to run after a restore plans the missing jobs only:
    not the registration again, not a restored (arm, seed). The files are as old as a
    session's before (older than the clone's code)."""
    import os

    from tcrformer.chapters.claims import archive

    claims = workflow_copy / "results/claims_reduced/claims"
    done = claims / "arms/baseline/seed0"
    done.mkdir(parents=True)
    files = [claims / "registration.json", *(done / name for name in archive.JOB_FILES)]
    for age, path in enumerate(files):
        path.write_text(path.name)
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    packed = tmp_path / "claims.tar.gz"
    archive.save_finished("claims_reduced", packed, root=workflow_copy)
    shutil.rmtree(workflow_copy / "results")
    archive.restore_finished(packed, root=workflow_copy)
    reduced = str(workflow_copy / "config/claims_reduced.yaml")
    plan = snakemake(workflow_copy, "claims", "--configfile", reduced, "-n",
                     *archive.RESUME.split())  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-2000:]
    lines = (plan.stdout + plan.stderr).splitlines()
    outputs = " ".join(line for line in lines if line.strip().startswith("output:"))
    assert "arms/baseline/seed1/metrics.json" in outputs
    assert "arms/baseline/seed0/metrics.json" not in outputs
    assert "registration.json" not in outputs
