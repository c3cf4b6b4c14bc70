"""The claims chapter (v4): its settings, the decision rule, every criterion evaluated by code,
the arms' changes reaching the trained model, the pre-registration, and the reduced run as CI
runs it."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from tcrclaims import protocol, verdicts
from tcrclaims.compute import (
    DECISION_CODE,
    claims_register,
    decision_code_sha256,
    finite_or_none,
)
from tcrclaims.kinds import KINDS, TESTS
from tcrclaims.metrics import exact_bits, stepped
from tcrclaims.settings import Settings
from tcrclaims.summary import (
    CHANGED,
    CODE_CHANGED,
    code_checked,
    registration_mark,
)
from tcrformer.core.config import ConfigError
from tcrformer.stats.holm import holm, holm_levels
from tcrformer.stats.sign_flip import sign_flip_p
from tcrformer.training import measures
from tcrformer.training.data import random_batch
from tcrformer.training.loop import new_run
from tcrformer.training.model import build_model
from tcrformer.training.schedule import NoamSchedule, schedule_for

from conftest import ROOT, default_config, snakemake, write_config

torch.set_num_threads(1)
CLAIMS = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
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
        assert claim.criterion.startswith(("SUPPORTED", "HOLDS", "If")), claim.id
        assert bool(claim.precondition) == claim.criterion.startswith("If"), claim.id
        assert claim.revision, f"{claim.id}: say what v3 changed"
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
    section = {**CONFIG["claims"], "arms": arms, "list": []}
    with pytest.raises(ConfigError) as err:
        Settings.from_config({**CONFIG, "claims": section})
    assert err.value.key.startswith(key), err.value


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"test": {"effect": "paired_difference", "metric": "x", "arm": "nowhere",
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


BASE = np.array([0.60, 0.61, 0.62, 0.63, 0.64, 0.65, 0.66, 0.67])


def test_the_sign_flip_test_and_its_interval_see_the_margin():
    clear = protocol.effect("paired_difference", [BASE + 0.2, BASE], 0.05, "greater")
    assert clear.low > 0.05 and clear.side == protocol.SUPPORTED
    assert clear.p_value == pytest.approx(2**-8)  # every seed above: the smallest p of 8
    small = protocol.effect("paired_difference", [BASE + 0.01, BASE], 0.05, "greater")
    assert small.high < 0.05 and small.side == protocol.REFUTED
    noise = np.array([0.05, -0.04, 0.03, -0.02, 0.06, -0.01, 0.02, -0.03])
    noisy = protocol.effect("paired_difference", [BASE + 0.03 + noise, BASE], 0.03, "greater")
    assert noisy.low < 0.03 < noisy.high and noisy.p_value > 0.1


def test_the_interval_is_the_test_inverted():
    """A margin outside the 95 % interval is rejected by a one-sided test at 2.5 %, one
    inside is not: the interval and the decision never disagree."""
    d = np.array([0.3, 0.1, 0.5, -0.1, 0.4, 0.2, 0.6, 0.05, 0.35, 0.15])
    found = protocol.effect("seed_mean", [d], 0.0, "greater")

    def p(m):
        return min(sign_flip_p(d, m, "greater"), sign_flip_p(d, m, "less"))

    for m in (found.low - 1e-6, found.high + 1e-6):
        assert p(m) <= 0.025
    for m in (found.low + 1e-3, found.high - 1e-3, d.mean()):
        assert p(m) > 0.025


def test_paired_binary_outcomes_take_the_exact_unconditional_test():
    """Divergence in 7 of 8 seeds without warm-up and in none with it: v3's sign-flip gave
    p 1/256; the exact unconditional test against 0.25 gives its own (0.029, v3's worst
    case), and McNemar's beside it. Outcomes that are not 0 or 1 are refused."""
    found = protocol.effect("paired_binary", [np.array([1.0] * 7 + [0.0]), np.zeros(8)], 0.25,
                            "greater")  # fmt: skip
    assert found.method == "exact_unconditional" and found.estimate == pytest.approx(7 / 8)
    assert found.p_support == pytest.approx(0.02873, abs=5e-5)
    assert found.secondary.startswith("McNemar") and found.secondary_p == pytest.approx(2**-7)
    assert found.low < 0.25 < found.estimate <= found.high <= 1  # p 0.029 > 0.025: 0.25 kept
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        protocol.effect("paired_binary", [np.array([0.5] * 8), np.zeros(8)], 0.25, "greater")


def test_few_seeds_cannot_decide_and_say_so():
    """With n seeds the smallest p-value is 2^-n: four seeds all far above the margin give
    1/16, which no Holm level of 5 % over several claims admits."""
    four = protocol.effect("seed_mean", [np.array([0.9, 0.95, 0.92, 0.97])], 0.1, "greater")
    assert four.p_support == pytest.approx(1 / 16) and four.method == "enumeration"
    assert math.isnan(four.low)  # a 95 % interval needs p <= 0.025: more than 5 seeds
    one = protocol.effect("seed_mean", [np.array([0.9, math.nan])], 0.1, "greater")
    assert one.seeds == (1, 2) and one.p_value == 1.0 and math.isnan(one.estimate)
    with pytest.raises(ValueError, match="not finite"):  # missing is NaN; infinite is a fault
        protocol.effect("seed_mean", [np.array([0.9, 0.8, math.inf])], 0.1, "greater")


def test_equivalence_needs_both_one_sided_tests():
    inside = protocol.effect("paired_relative", [BASE * 1.01, BASE], 0.1, "equivalent")
    assert inside.side == protocol.SUPPORTED and inside.p_value == pytest.approx(2**-8)
    outside = protocol.effect("paired_relative", [BASE * 1.5, BASE], 0.1, "equivalent")
    assert outside.side == protocol.REFUTED and outside.p_value == pytest.approx(2**-8)


def test_pairing_sees_what_the_seeds_share():
    """Seeds differ a lot (0.1 to 0.8), the arm adds 0.02 to each: paired, that is plain;
    shuffling the pairing (what an unpaired analysis amounts to) hides it."""
    ref = np.linspace(0.1, 0.8, 8)
    paired = protocol.effect("paired_difference", [ref + 0.02, ref], 0.0, "greater")
    assert paired.p_value == pytest.approx(2**-8) and paired.low > 0
    unpaired = protocol.effect("paired_difference", [(ref + 0.02)[::-1], ref], 0.0, "greater")
    assert unpaired.p_value > 0.2
    with pytest.raises(ValueError, match="pairs seeds"):
        protocol.effect("paired_difference", [ref, ref[:7]], 0.0, "greater")


def test_holm_steps_down_and_stops_at_the_first_failure():
    # sorted 0.005 <= 0.05/4, 0.01 <= 0.05/3, then 0.03 > 0.05/2: stop
    assert holm([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert holm([0.02, 0.02], 0.05) == [True, True]
    assert holm([0.03, 0.2], 0.05) == [False, False]
    # after the stop every claim keeps the stopping level (0.05/2, not 0.05 for the last)
    assert holm_levels([0.01, 0.04, 0.03, 0.005], 0.05) == pytest.approx(
        [0.05 / 3, 0.05 / 2, 0.05 / 2, 0.05 / 4]
    )


def test_each_holm_level_interval_says_what_holm_decided():
    """The outside review's case, 8 claims of 12 seeds: p 1/4096, then 30/4096 (above its
    step's 0.05/7: Holm stops), then 34/4096 (below its own step's 0.05/6, yet not rejected).
    Every interval at its Holm level keeps the margin exactly when Holm did not reject: the
    third at the stopping level; at its own step's level it would exclude the margin."""
    stops = [-0.83, 1.02, 0.73, 0.86, 0.88, 0.43, 0.72, -0.01, 1.05, 0.98, -0.22, 2.73]
    below_own = [0.49, 1.41, 0.08, 0.85, 1.2, 1.15, 1.31, 0.09, -0.85, 0.64, 0.11, 0.3]
    rows = [np.linspace(0.5, 1.6, 12), stops, below_own] + [np.linspace(-1, 1, 12)] * 5
    effects = {f"c{i}": protocol.effect("seed_mean", [np.array(d)], 0.0, "greater")
               for i, d in enumerate(rows)}  # fmt: skip
    assert [round(effects[c].p_value * 4096) for c in ("c0", "c1", "c2")] == [1, 30, 34]
    verdicts_, adjusted = protocol.decide(effects, 0.05)
    assert [verdicts_[c] for c in ("c0", "c1", "c2")] == [protocol.SUPPORTED,
                                                         protocol.INCONCLUSIVE,
                                                         protocol.INCONCLUSIVE]  # fmt: skip
    for claim_id, found in adjusted.items():
        rejected = verdicts_[claim_id] != protocol.INCONCLUSIVE
        assert (found.holm_low > 0 or found.holm_high < 0) == rejected, claim_id
    own_low, _ = protocol.interval("seed_mean", np.array(below_own), 1 - 2 * 0.05 / 6)
    assert own_low > 0  # what v4's first draft showed for c2


def test_a_claim_decided_alone_would_be_inconclusive_in_the_family():
    """Holm at work: p = 0.02 clears 5 % alone, not as one of five tests; and each claim's
    Holm-level interval is wider than its 95 % one."""
    d = (0.1, 0.2, 0.15, 0.3, 0.25, 0.05, 0.2, 0.1)
    effects = {f"c{i}": protocol.Effect(0.02, 0.9, "seed_mean", 1, 0, 2, 0, "greater", (8, 8), d)
               for i in range(5)}  # fmt: skip
    verdicts_, adjusted = protocol.decide(effects, 0.05)
    assert set(verdicts_.values()) == {protocol.INCONCLUSIVE}
    assert protocol.decide({"c0": effects["c0"]}, 0.05)[0]["c0"] == protocol.SUPPORTED
    alone = protocol.effect("seed_mean", [np.array(d)], 0.0, "greater")
    held = adjusted["c0"]
    assert held.holm_low < alone.low and held.holm_high > alone.high and held.holm_level > 0.95


def seeds(n=8, **metrics):
    """n seeds' metrics; a tuple gives one value per seed, anything else is shared."""
    return [
        {k: (v[i] if isinstance(v, tuple) else v) for k, v in metrics.items()} for i in range(n)
    ]


def measure(arms, **extra):
    return verdicts.Measurements(
        arms, extra.get("analytic", {}), extra.get("benchmarks", {}), 1000,
        extra.get("seeds", {}), at_steps=stepped(),
    )  # fmt: skip


def test_arms_are_paired_by_seed_number_and_pooled_arms_averaged():
    test = {"effect": "paired_difference", "metric": "x", "arm": ["a", "b"], "reference": "r",
            "margin": 0, "direction": "greater"}  # fmt: skip
    m = measure({"a": seeds(3, x=(0.0, 1.0, 2.0)), "b": seeds(3, x=(1.0, 1.0, 2.0)),
                 "r": seeds(2, x=(10.0, 30.0))},
                seeds={"a": [0, 1, 2], "b": [0, 1, 2], "r": [2, 0]})  # fmt: skip
    assert verdicts.shared_seeds(test, m) == [0, 2]
    assert verdicts.per_seed(test, m, "arm", [0, 2]).tolist() == [0.5, 2.0]
    assert verdicts.per_seed(test, m, "reference", [0, 2]).tolist() == [30.0, 10.0]


def synthetic_measurements(**changes):
    """Every arm's seeds with metrics where each manipulation check passes; `changes`
    replaces metrics of named arms ({arm: {metric: value}})."""
    steps = {str(s) for c in SETTINGS.claims for s in c.test.get("snapshots", ())}
    metric = dict(
        final_loss=0.6, early_loss=1.0, heldout_exact=990, heldout_fraction=0.99,
        overconfidence=0.01, ece=0.02, spikes=1, worst_jump=0.4, max_grad_norm=3.0,
        activation_ratios=[0.8, 1.1], init_scale=0.2,
        residue_rho=(0.1, 0.3, 0.2, 0.45, 0.1, 0.2, 0.4, 0.3), diverged=0.0,
        stress_damage=0.1, stress_norm_ratio=1e4, gap=0.05, top_defined=0.8, mass_on_top=0.3,
        top1_agreement=(0.1, 0.3, 0.2, 0.45, 0.1, 0.2, 0.4, 0.3), initial_entropy=1.5,
        beam_net_wins=0.05, has_room=1.0, beam_step=300.0, beam_exact_gain=0.01,
        log2_excess={s: 0.04 for s in steps},
    )  # fmt: skip
    unclipped = {"stress_damage": 2.0}  # the bad batch blew the unclipped arm up
    changes = {**changes, "stress_unclipped": {**unclipped, **changes.get("stress_unclipped", {})}}
    arms = {}
    for arm in SETTINGS.arms:
        n = len(SETTINGS.seeds_of(arm))
        values = {**metric, **changes.get(arm, {})}
        arms[arm] = seeds(n, **{k: (v[: min(n, len(v))] * (n // len(v) + 1))[:n]
                                if isinstance(v, tuple) else v
                                for k, v in values.items()})  # fmt: skip
    analytic = {
        "permutation_off": 0.0, "permutation_on": 0.5, "relative_residuals": {"1": 1e-14},
        "cosine_first_rise": 44, "jacobian_ratios": list(np.linspace(1.2, 2.6, 40)),
    }  # fmt: skip
    cost = {"memory_exponent": 2.0, "time_exponent": 1.5, "min_length": 512}
    speed = {"gru_blocks": [5.0, 5.5, 4.8], "transformer_blocks": [9.0, 9.1, 8.7],
             "parallel_speedup": 1.6, "threads": 2}  # fmt: skip
    benchmarks = {"quadratic_memory": cost, "rnn_slow": speed}  # each claim's own job
    return measure(arms, analytic=analytic, benchmarks=benchmarks,
                   seeds={arm: SETTINGS.seeds_of(arm) for arm in SETTINGS.arms},
)  # fmt: skip


def test_every_claim_gets_a_verdict_of_its_kind_and_a_sentence():
    decisions = verdicts.judge_all(SETTINGS, synthetic_measurements())
    by_design = {c.id for c in SETTINGS.claims
                 if any(p["check"] == "by_design" for p in c.precondition)}  # fmt: skip
    assert by_design == {"attention_importance"}
    for claim in SETTINGS.claims:
        decision = decisions[claim.id]
        assert decision.verdict in verdicts.VERDICTS[claim.kind], claim.id
        testable = claim.id not in by_design  # every other check passes here
        assert (decision.verdict != protocol.NOT_TESTABLE) == testable, claim.id
        assert len(decision.measured) > 10, claim.id
        assert decision.adjusted == (claim.kind == "experiment" and testable)
        assert decision.precondition.startswith("met") == (bool(claim.precondition)
                                                           and testable), claim.id  # fmt: skip
        assert claim.kind != "experiment" or claim.predicted in verdicts.VERDICTS[claim.kind]
    assert "mass_on_top (reported) baseline 0.3" in decisions["attention_importance"].measured
    sqrt_dk = decisions["sqrt_dk"].measured  # a report shows every arm of the test
    assert "initial_entropy (reported) no_scaling 1.5" in sqrt_dk and "; baseline 1.5" in sqrt_dk
    assert decisions["beam_search"].verdict == protocol.SUPPORTED  # 0.05 net wins, 12 seeds
    assert "beam_step (reported) baseline 300" in decisions["beam_search"].measured
    assert decisions["warmup"].effect.method == "exact_unconditional"
    assert decisions["clipping"].verdict == protocol.HOLDS  # clipped damage 0.1 < 0.5
    assert decisions["rnn_slow"].verdict == protocol.SUPPORTED  # ratios 0.55, 0.60, 0.55
    assert decisions["relative_positions"].verdict == protocol.HOLDS
    assert decisions["sqrt_dk_jacobian"].verdict == protocol.HOLDS  # every draw above 1


def test_attention_is_measured_but_not_judged_by_design():
    """The registered design cannot tell the attention claim's answers apart in reversal:
    whatever the agreement, NOT TESTABLE HERE, outside the family, its effect still shown."""
    for agreement in (0.9, 0.1):
        m = synthetic_measurements(baseline={"top1_agreement": agreement})
        found = verdicts.judge_all(SETTINGS, m)["attention_importance"]
        assert found.verdict == protocol.NOT_TESTABLE and not found.adjusted
        assert found.effect.estimate == pytest.approx(agreement)
        assert found.precondition.startswith("not met: by design: in reversal")


def test_beam_is_judged_where_each_seed_had_room():
    """A seed without a snapshot where greedy has room has no net wins and leaves the pairs
    (counted); fewer than half the seeds with room makes the claim NOT TESTABLE HERE."""
    room, wins = (1.0,) * 9 + (0.0,) * 3, (0.05,) * 9 + (None,) * 3
    some = synthetic_measurements(baseline={"has_room": room, "beam_net_wins": wins})
    found = verdicts.judge_all(SETTINGS, some)["beam_search"]
    assert found.verdict == protocol.SUPPORTED and found.effect.seeds == (9, 12)
    few = synthetic_measurements(baseline={"has_room": (1.0,) * 5 + (0.0,) * 7})
    decision = verdicts.judge_all(SETTINGS, few)["beam_search"]
    assert decision.verdict == protocol.NOT_TESTABLE
    assert "has_room baseline 0" in decision.precondition


def test_the_excess_is_the_log2_of_its_mean_over_the_claims_snapshots():
    """sqrt_dk reads steps 2,600..3,000 of both arms: the unscaled excess 4x the scaled at
    each gives d_s = 2 in every seed; a value at any other step is not read."""
    late = {str(s): 0.16 for s in (2600, 2700, 2800, 2900, 3000)}
    m = synthetic_measurements(no_scaling={"log2_excess": {**late, "300": 100.0}},
                               baseline={"log2_excess": {**{k: 0.04 for k in late},
                                                         "300": 0.001}})  # fmt: skip
    found = verdicts.judge_all(SETTINGS, m)["sqrt_dk"]
    assert found.effect.estimate == pytest.approx(2.0) and found.verdict == protocol.SUPPORTED


@pytest.mark.parametrize(
    ("untestable", "changes"),
    [
        ({"clipping"}, {"stress_unclipped": {"stress_damage": 0.2}}),  # no blow-up unclipped
        ({"clipping"}, {"stress_unclipped": {"stress_norm_ratio": 1.0}}),  # nothing injected
        ({"warmup", "pre_ln_stable"}, {"deep_post": {"heldout_fraction": 0.3}}),  # never learnt
        ({"dropout"}, {"fixed_no_dropout": {"gap": 0.0}}),  # nothing to close
        ({"beam_search"}, {"baseline": {"has_room": 0.0}}),  # greedy never had room
        ({"rnn_slow"}, {}),  # no second thread to gain from (below)
    ],
)
def test_a_failed_manipulation_check_is_not_testable_here(untestable, changes):
    m = synthetic_measurements(**changes)
    if untestable == {"rnn_slow"}:
        slow = {**m.benchmarks["rnn_slow"], "parallel_speedup": 1.02}
        m = replace(m, benchmarks={**m.benchmarks, "rnn_slow": slow})
    decisions = verdicts.judge_all(SETTINGS, m)
    found = {i for i, d in decisions.items() if d.verdict == protocol.NOT_TESTABLE}
    untestable = untestable | {"attention_importance"}  # by design, always
    assert found == untestable
    for claim_id in untestable:
        assert decisions[claim_id].precondition.startswith("not met")
        assert not decisions[claim_id].adjusted  # out of the Holm family
    experiments = {c.id for c in SETTINGS.claims if c.kind == "experiment"}
    assert {i for i, d in decisions.items() if d.adjusted} == experiments - untestable


def with_second_speed_claim(settings):
    """The claims with a second speed claim: the GRU with attention against the baseline."""
    slow = settings.claim("rnn_slow")
    second = replace(slow, id="rnn_slow_attention", test={**slow.test, "reference": "deep_pre"})
    return replace(settings, claims=(*settings.claims, second))


def test_a_second_speed_claim_is_judged_on_its_own_numbers():
    """v3 gave every claim of one test the first one's numbers: each benchmarked claim now
    has a job of its own and is judged on what that job measured."""
    settings = with_second_speed_claim(SETTINGS)
    assert settings.benchmarked_by("claims_rnn_speed") == ["rnn_slow", "rnn_slow_attention"]
    assert settings.benchmarked_by("claims_cost") == ["quadratic_memory"]
    m = synthetic_measurements()
    fast = {**m.benchmarks["rnn_slow"], "gru_blocks": [20.0, 21.0, 19.0]}
    decisions = verdicts.judge_all(
        settings, replace(m, benchmarks={**m.benchmarks, "rnn_slow_attention": fast})
    )
    assert decisions["rnn_slow"].verdict == protocol.SUPPORTED
    assert decisions["rnn_slow_attention"].verdict == protocol.REFUTED


def test_each_benchmarked_claim_is_a_job_of_its_own(workflow_copy):
    listed = [dict(c) for c in CLAIMS["claims"]["list"]]
    second = {**next(c for c in listed if c["id"] == "rnn_slow"), "id": "rnn_slow_attention"}
    second["test"] = {**second["test"], "reference": "deep_pre"}
    extra = write_config(workflow_copy / "second.yaml", {"claims": {"list": [*listed, second]}})
    reduced = str(workflow_copy / "workflow/claims/config/claims_reduced.yaml")
    plan = snakemake(workflow_copy, "claims", "--configfile", reduced, str(extra), "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    jobs = re.findall(r"claims/benchmarks/(\w+)\.json", plan.stdout)
    assert sorted(set(jobs)) == ["quadratic_memory", "rnn_slow", "rnn_slow_attention"]


def test_a_check_without_seeds_fails_and_check_seeds_must_be_trained_seeds():
    none = synthetic_measurements()
    none = replace(none, seeds={**none.seeds, "default_init": [8, 9]})  # no seed shared
    assert verdicts.judge_all(SETTINGS, none)["xavier"].verdict == protocol.FAILS
    with pytest.raises(ConfigError, match="check_seeds"):
        Settings.from_config({**CONFIG, "claims": {**CONFIG["claims"], "check_seeds": [1]}})


def test_a_claims_registration_fixes_the_settings_its_test_reads():
    """The Jacobian check's draws, the memory check's lengths, the benchmark's sizes and
    numerics: each in its own claim's registered context, and only there."""
    contexts = {c.id: SETTINGS.decision_context(c) for c in SETTINGS.claims}
    assert contexts["sqrt_dk_jacobian"]["draws"] == SETTINGS.draws
    assert contexts["quadratic_memory"]["cost_lengths"] == list(SETTINGS.cost_lengths)
    assert contexts["rnn_slow"]["numerics"] == {"mode": "native"}
    assert contexts["rnn_slow"]["speed"] == SETTINGS.speed
    assert not {"draws", "cost_lengths", "speed"} & set(contexts["warmup"])
    more = replace(SETTINGS, draws=SETTINGS.draws + 1)
    assert more.registration()["sqrt_dk_jacobian"] != SETTINGS.registration()["sqrt_dk_jacobian"]
    assert more.registration()["warmup"] == SETTINGS.registration()["warmup"]


def test_a_check_holds_only_when_every_seed_does():
    assert verdicts.judge_all(SETTINGS, synthetic_measurements(
        default_init={"init_scale": 1.0}))["xavier"].verdict == protocol.HOLDS  # fmt: skip
    one_short = synthetic_measurements(default_init={"init_scale": (1.0, 0.6)})
    assert verdicts.judge_all(SETTINGS, one_short)["xavier"].verdict == protocol.FAILS
    learnt = synthetic_measurements(no_positions={"heldout_fraction": (0.01, 0.2)})
    assert verdicts.judge_all(SETTINGS, learnt)["positions"].verdict == protocol.FAILS
    few = synthetic_measurements()
    few = replace(few, analytic={**few.analytic, "jacobian_ratios": [0.9] * 3 + [1.5] * 37})
    assert verdicts.judge_all(SETTINGS, few)["sqrt_dk_jacobian"].verdict == protocol.FAILS


def test_a_claim_or_its_code_changed_after_registration_is_marked():
    claim, arms = SETTINGS.claims[0], SETTINGS.arms
    code, context = "abc", SETTINGS.decision_context(claim)
    registration = {"claims": SETTINGS.registration(), "decision_code_sha256": code}
    assert registration_mark(claim, registration, arms, code, context) == "as registered"
    for key, value in (
        ("alpha", 0.1),
        ("beam_width", 8),
        ("eval_n", 500),
        ("seeds", {"deep_post": [0, 1]}),
    ):  # the run's settings decide it too
        moved = {**context, key: value}
        assert registration_mark(claim, registration, arms, code, moved) == CHANGED, key
    registration = {"claims": {claim.id: claim.digest(arms)}, "decision_code_sha256": code}
    moved = replace(claim, test={**claim.test, "margin": 0.1})  # a criterion moved
    assert registration_mark(moved, registration, arms, code) == CHANGED
    unchecked = replace(claim, precondition=())  # its manipulation check dropped
    assert registration_mark(unchecked, registration, arms, code) == CHANGED
    assert registration_mark(replace(claim, revision="other words"), registration, arms,
                             code) == "as registered"  # fmt: skip
    retrained = {**arms, "deep_post": arms["deep_post"].replace(warmup=200)}  # an arm moved
    assert registration_mark(claim, registration, retrained, code) == CHANGED
    reseeded = {name: r.replace(seed=5) for name, r in arms.items()}  # a seed is no change
    assert registration_mark(claim, registration, reseeded, code) == "as registered"
    assert registration_mark(claim, registration, arms, "abd") == CODE_CHANGED  # code edited
    assert code_checked(registration)


@pytest.mark.parametrize(
    "decision_code",
    [{"dropout": "function by function"}, {"chapters/claims/protocol.py": "file by file"}],
)
def test_a_registration_of_code_in_another_form_is_said_once_and_marks_nothing(decision_code):
    """A registration that fixed its decision code otherwise than by the file digest (by
    function, or by file under other names) cannot be checked: the table says so in one
    line, and marks no row for code."""
    claim = SETTINGS.claims[0]
    registration = {"claims": SETTINGS.registration(), "decision_code": decision_code}
    context = SETTINGS.decision_context(claim)
    assert registration_mark(claim, registration, SETTINGS.arms, "abc", context) == (
        "as registered"
    )
    assert not code_checked(registration)
    assert code_checked({"claims": {}}) and code_checked({"decision_code_sha256": "abc"})


def test_the_registration_freezes_the_files_of_the_decision_code():
    registered = claims_register(SETTINGS, "sha", "commit")["registration"]
    assert registered["decision_code_files"] == list(DECISION_CODE)
    assert registered["decision_code_sha256"] == decision_code_sha256()
    assert DECISION_CODE[0] == "tcrclaims"  # the claims' package whole, then library parts
    assert all(part.startswith("tcrformer/") for part in DECISION_CODE[1:])


def test_the_code_digest_sees_every_file_of_its_parts_and_nothing_else(tmp_path):
    """An edit, a new file and a rename under a frozen part, the claims' package or the
    library's, change the digest; a file outside the parts, and the bytecode cache, do not;
    copies of the two packages anywhere give the checkout's digest."""
    import shutil

    from tcrclaims.compute import PACKAGE
    from tcrformer.core.manifest import LIBRARY

    ignore = shutil.ignore_patterns("__pycache__")
    library, package = tmp_path / "lib/tcrformer", tmp_path / "elsewhere/tcrclaims"
    shutil.copytree(LIBRARY, library, ignore=ignore)
    shutil.copytree(PACKAGE, package, ignore=ignore)
    digest = lambda: decision_code_sha256(package, library)  # noqa: E731
    before = digest()
    assert before == decision_code_sha256()  # the same files, named alike: the same digest
    (library / "plotting/style.py").write_text("# drawn otherwise\n", encoding="utf-8")
    (library / "stats/__pycache__").mkdir()
    (library / "stats/__pycache__/holm.cpython-311.pyc").write_bytes(b"cache")
    assert digest() == before
    metrics_file = package / "metrics.py"
    metrics_file.write_text(metrics_file.read_text() + "\n", encoding="utf-8")
    edited = digest()
    assert edited != before
    (library / "stats/extra.py").write_text("", encoding="utf-8")
    added = digest()
    assert added != edited
    (library / "stats/extra.py").rename(library / "stats/other.py")
    renamed = digest()
    assert renamed != added
    (package / "extra.py").write_text("", encoding="utf-8")
    assert digest() != renamed


def test_the_power_plan_is_what_the_pilot_archive_gives():
    """The power plan (workflow/claims/config/claims_power.yaml) is computed from the archived
    pilot run, never typed; and the plan asks more seeds of a noisier effect, and at least
    the feasible count of any."""
    from tools import claims_power as power

    committed = yaml.safe_load((ROOT / "workflow/claims/config/claims_power.yaml").read_text())
    pilot = power.pilot_metrics(ROOT / "results/archive/claims_v2.tar.gz")
    again = power.plan(CLAIMS["claims"]["list"], pilot, CLAIMS["claims"]["alpha"])
    assert {k: r["seeds"] for k, r in again["claims"].items()} == {
        k: r["seeds"] for k, r in committed["claims"].items()
    }
    level = again["level"]
    assert power.feasible_seeds(level) == 8 and 2**-8 <= level < 2**-7
    assert (
        power.seeds_needed(0.01, "greater", 0.02, level)
        > power.seeds_needed(0.01, "greater", 0.01, level)
        >= 8
    )
    assert min(r["seeds"] for r in again["claims"].values()) >= 8


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


def test_init_scale_and_finite_values():
    assert measures.init_scale([1.0, 1.0]) == 0 and measures.init_scale([2.0, 0.5]) == 1.0
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


def test_no_warmup_starts_at_the_references_peak_rate_and_decays_alike():
    base, flat = (schedule_for(SETTINGS.recipe(a, 0))[1] for a in ("deep_post", "deep_post_flat_1"))
    peak = base(399)  # step 400, the reference's peak
    assert flat(0) == pytest.approx(peak) and flat(199) == pytest.approx(peak)
    assert all(flat(i) == pytest.approx(base(i)) for i in (399, 1000, 1199))
    assert NoamSchedule(64, 0)(0) > 19 * peak  # what v1's warmup 0 did at step 1


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


def test_the_bad_batch_scales_one_steps_gradient_and_only_that_one():
    """Steps before the bad batch train the same bits as without it; at its step the
    pre-clip norm is stress_scale times what it would have been; the clipped arm clips it,
    the unclipped does not (its norm is still taken)."""
    calm, stressed = (tiny(arm, steps=6, stress_step=4, warmup=2)
                      for arm in ("stress_clipped", "stress_clipped"))  # fmt: skip
    calm = calm.replace(stress_step=0)
    norms = {}
    for name, recipe in (("calm", calm), ("stressed", stressed)):
        run = new_run(recipe, torch.device("cpu"))  # the hand-written step
        step = run.step_function()
        norms[name] = [float(step(*run.strings.next_batch(), i)[1])
                       for i in range(1, recipe.steps + 1)]  # fmt: skip
        run.close()
    assert norms["calm"][:3] == norms["stressed"][:3]
    assert norms["stressed"][3] == pytest.approx(norms["calm"][3] * stressed.stress_scale, rel=1e-4)
    assert norms["calm"][4:] != norms["stressed"][4:]
    assert SETTINGS.recipe("stress_unclipped", 0).grad_clip == 0
    assert SETTINGS.recipe("stress_clipped", 0).grad_clip == 1.0
    with pytest.raises(ConfigError, match="stress_step"):
        from tcrformer.training.recipe import _check

        _check(tiny("stress_clipped", steps=10, stress_step=11))


def test_the_bad_batch_response_is_measured():
    floor = 0.6
    losses = np.full(3000, floor + 0.05)
    norms = np.ones(3000)
    norms[999] = 1e4
    losses[1000:1050] = floor + 0.2  # the excess quadruples after the bad step
    found = measures.stress_response(losses, norms, 1000, floor)
    assert found["stress_damage"] == pytest.approx(2.0) and found["stress_norm_ratio"] == 1e4


# The reduced run, as CI runs it ------------------------------------------------------------------


@pytest.mark.slow
def test_the_reduced_run_gives_every_claim_a_row_a_figure_and_a_verdict(workflow_copy):
    reduced = str(workflow_copy / "workflow/claims/config/claims_reduced.yaml")
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
                   "figC5_attention_cost", "figC6_beam",
                   "figC7_effects"):  # fmt: skip
        assert (folder / f"figures/{figure}.png").stat().st_size > 10_000, figure
    data = json.loads((folder / "claims/figure_data.json").read_text())
    assert data["reduced"] is True and set(data["verdicts"]) == set(table["id"])
    assert not list(folder.glob("claims/arms/*/seed*/model.safetensors"))  # evaluated, not kept
    for job in folder.glob("claims/arms/*/seed*"):  # each job's strings and its cost, as run
        record = json.loads((job / "metrics.json").read_text())
        assert exact_bits(record).sum() == record["heldout_exact"], job
        timing = json.loads((job / "training_time.json").read_text())
        assert timing["wall_seconds"] > timing["train_seconds"] > 0, job  # from the script's start
        assert timing["cpu_seconds"] > 0 and len(timing["load_average"]["start"]) == 3, job
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

    from tools import claims_archive as archive

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
    speed = old / "results/paper/claims/benchmarks/rnn_slow.json"  # a benchmark its table read
    speed.parent.mkdir()
    speed.write_text("the speed measurement")
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
    assert (new / "results/paper/claims/benchmarks/rnn_slow.json").exists()
    assert (new / "results/paper/figures/figC7_effects.png").exists()
    assert not (new / "results/paper/figures/fig01_toy_input.png").exists()
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(packed, arcname="../outside.txt")
    with pytest.raises(ValueError, match="outside results"):
        archive.restore_finished(evil, root=new)


def test_the_archive_counts_the_machines_each_arms_seeds_trained_on(tmp_path):
    """Under native numerics a run that spans machines mixes CPUs within an arm: counted
    from each finished job's numerics.json; an unfinished job is not counted."""
    import json

    from tools import claims_archive as archive

    arms = tmp_path / "claims/arms"
    for arm, seed, model in (("baseline", 0, "AMD EPYC"), ("baseline", 1, "Intel Xeon"),
                             ("fixed", 0, "AMD EPYC"), ("fixed", 1, None)):  # fmt: skip
        folder = arms / arm / f"seed{seed}"
        folder.mkdir(parents=True)
        (folder / "numerics.json").write_text(json.dumps({"cpu": {"model": model}}))
        if model is not None:
            (folder / "metrics.json").write_text("{}")
    found = archive.machines(tmp_path)
    assert found == {"baseline": {"AMD EPYC": 1, "Intel Xeon": 1}, "fixed": {"AMD EPYC": 1}}
    table = archive.machines_markdown(found)
    assert "| arm | AMD EPYC | Intel Xeon |" in table and "| fixed | 1 | 0 |" in table
    assert archive.main(["machines", "--run", "no_such_run"]) == 1  # says so, no empty table


@pytest.mark.slow
def test_a_restored_job_is_done_for_the_resumed_run(workflow_copy, tmp_path):
    """What the archive's README says to run after a restore plans the missing jobs only:
    not the registration again, not a restored (arm, seed). The files are as old as a
    session's before (older than the clone's code)."""
    import os

    from tools import claims_archive as archive

    claims = workflow_copy / "results/claims_reduced/claims"
    done = claims / "arms/baseline/seed5000"
    done.mkdir(parents=True)
    files = [claims / "registration.json", *(done / name for name in archive.JOB_FILES)]
    for age, path in enumerate(files):
        path.write_text(path.name)
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    packed = tmp_path / "claims.tar.gz"
    archive.save_finished("claims_reduced", packed, root=workflow_copy)
    shutil.rmtree(workflow_copy / "results")
    archive.restore_finished(packed, root=workflow_copy)
    reduced = str(workflow_copy / "workflow/claims/config/claims_reduced.yaml")
    plan = snakemake(workflow_copy, "claims", "--configfile", reduced, "-n",
                     *archive.RESUME.split())  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-2000:]
    lines = (plan.stdout + plan.stderr).splitlines()
    outputs = " ".join(line for line in lines if line.strip().startswith("output:"))
    assert "arms/baseline/seed5001/metrics.json" in outputs
    assert "arms/baseline/seed5000/metrics.json" not in outputs
    assert "registration.json" not in outputs


def test_the_verdicts_that_changed_are_listed_with_their_revision(tmp_path, monkeypatch, capsys):
    """`archive changes` sets the archived v2 table beside a run's table, claim by claim:
    a verdict that moved (or a claim that moved kind, or is new) is marked changed, an equal
    one is not, and each row carries the claim's revision note from the claims file."""
    import csv
    import io
    import tarfile

    from tools import claims_archive as archive

    v2 = archive.archived_table(ROOT / "results/archive/claims_v2.tar.gz")
    assert v2["attention_importance"]["verdict"] == "NOT SUPPORTED"
    after = {k: dict(row) for k, row in v2.items() if k != "positions"}
    after["attention_importance"]["verdict"] = "SUPPORTED"
    after["new_claim"] = {**after["warmup"], "id": "new_claim"}
    after["sqrt_dk_jacobian"]["kind"] = "check"  # the same verdict word, another kind
    table = tmp_path / "results/paper/claims/claims.csv"
    table.parent.mkdir(parents=True)
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(next(iter(after.values()))))
        writer.writeheader()
        writer.writerows(after.values())
    revisions = archive._revisions(ROOT / "results/archive/claims_v3.yaml")
    rows = {r["id"]: r for r in archive.verdict_changes(v2, archive.run_table(table.parents[1]),
                                                        revisions)}  # fmt: skip
    assert rows["attention_importance"]["changed"] and not rows["warmup"]["changed"]
    assert rows["attention_importance"]["before"] == "NOT SUPPORTED (experiment)"
    assert rows["new_claim"]["before"] == "—" and rows["positions"]["after"] == "—"
    assert rows["positions"]["changed"] and rows["new_claim"]["changed"]
    assert rows["sqrt_dk_jacobian"]["changed"]
    assert rows["attention_importance"]["revision"] == revisions["attention_importance"] != ""
    assert sum(r["changed"] for r in rows.values()) == 4
    gone = archive.verdict_changes(v2, {}, {})  # a claim the later file no longer has
    assert {r["revision"] for r in gone} == {archive.REMOVED} and all(r["changed"] for r in gone)
    monkeypatch.chdir(tmp_path)
    claims = str(ROOT / "results/archive/claims_v3.yaml")
    v2_archive = str(ROOT / "results/archive/claims_v2.tar.gz")
    assert archive.main(["changes", "--before", v2_archive, "--claims", claims]) == 0
    shown = capsys.readouterr().out
    assert "4 of 20 verdicts changed" in shown
    assert "v2 took \\|rho\\| over heads" in shown  # a | inside a cell is escaped
    unfinished = tmp_path / "unfinished.tar.gz"
    with tarfile.open(unfinished, "w:gz") as tar:
        info = tarfile.TarInfo("results/paper/claims/registration.json")
        tar.addfile(info, io.BytesIO(b""))
    assert archive.main(["changes", "--before", str(unfinished), "--claims", claims]) == 1
    assert "holds no claims/claims.csv" in capsys.readouterr().err


DOCUMENTED_CHANGES = [  # (before, after, the later version's claims file)
    ("claims_v2.tar.gz", "claims_v3.tar.gz", "results/archive/claims_v3.yaml"),
    ("claims_v3.tar.gz", "claims_v4.tar.gz", "workflow/claims/config/claims.yaml"),
]


@pytest.mark.parametrize("before, after, claims_file", DOCUMENTED_CHANGES)
def test_the_documented_changes_are_what_the_two_archives_give(before, after, claims_file):
    """results/archive/README.md's table of the verdicts that changed from one claims version
    to the next is computed from the archived tables of both finished runs, never typed: the
    table must appear there whole."""
    from tools import claims_archive as archive

    archives = ROOT / "results/archive"
    rows = archive.verdict_changes(
        archive.archived_table(archives / before),
        archive.archived_table(archives / after),
        archive._revisions(ROOT / claims_file),
    )
    assert archive.changes_markdown(rows) in (archives / "README.md").read_text()
    assert sum(r["changed"] for r in rows) > 0
