"""The per-arm metrics' registry (tcrclaims/metrics.py): each metric computed from what
the evaluation has, where its extra ran; the extras an arm's claims need; top-1 agreement
wired to the attribution's arrays on a model whose answer is known."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
import yaml
from test_attribution import (
    Reverser,
    looks_everywhere_else,
    looks_where_it_reads,
    strings,
    tiny_model,
)

from tcrclaims import metrics
from tcrclaims.metrics import EXTRAS, METRICS, ArmEvaluation
from tcrclaims.settings import Settings
from tcrformer.core.config import ConfigError

from conftest import ROOT, default_config

torch.set_num_threads(1)
SETTINGS = Settings.from_config(
    {
        **default_config(),
        **yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text()),
    }
)


def evaluated(**numbers) -> ArmEvaluation:
    return ArmEvaluation(None, None, list(range(10)), None, None, numbers=numbers)


def test_every_metric_needs_a_known_extra_or_none():
    assert {m.extra for m in METRICS.values()} <= {None, *EXTRAS}
    assert metrics.computable([]) == ["diverged"]
    assert set(metrics.computable(EXTRAS)) == set(METRICS)
    # each extra once, in EXTRAS' order, at the union of the steps its metrics' claims name;
    # a metric the registry does not hold, or one that needs no extra, asks for none
    wanted = [("init_scale", ()), ("beam_net_wins", (500, 300)), ("has_room", (1000, 300)),
              ("greedy_exact", (200,)), ("heldout_fraction", (7,)), ("diverged", (9,))]  # fmt: skip
    found = metrics.extras_for(wanted)
    assert found == {"beam": (300, 500, 1000), "init": ()} and list(found) == ["beam", "init"]
    assert metrics.extras_for([]) == {}
    # the beam's metrics are one number per seed (the beam extra picks the step); only the
    # excess is read at a claim's snapshots
    assert "greedy_exact" not in METRICS
    assert metrics.stepped() == {"log2_excess": "log2_mean"}
    for name in ("beam_net_wins", "has_room", "beam_exact_gain"):
        assert METRICS[name].extra == "beam" and METRICS[name].at_steps is None, name


def test_at_steps_reads_the_snapshots_named_or_the_trained_model():
    e = ArmEvaluation("trained", SimpleNamespace(name="baseline", steps=3000), None, None, None,
                      snapshots={300: "early", 500: "middle"})  # fmt: skip
    assert metrics.at_steps(e, ()) == {3000: "trained"}
    assert metrics.at_steps(e, (500, 300)) == {500: "middle", 300: "early"}
    with pytest.raises(ValueError, match=r"arm baseline: no weight snapshot at steps \[1000\]"):
        metrics.at_steps(e, (300, 1000))


@pytest.mark.parametrize(
    ("fraction", "final_loss", "diverged"),
    [(0.04, 0.7, 1.0), (0.5, math.inf, 1.0), (0.5, 0.7, 0.0), (0.05, 0.7, 0.0)],
)
def test_diverged_is_under_five_percent_exact_or_a_loss_not_finite(fraction, final_loss, diverged):
    e = evaluated(heldout_fraction=fraction, final_loss=final_loss)
    assert METRICS["diverged"].compute(e) == diverged


def test_the_metrics_read_like_their_definitions():
    e = evaluated(
        greedy_by_step={300: 0.1, 500: 0.4, 1000: 0.95},
        beam_step=500,
        beam_wins=5, beam_ties=3, beam_losses=2, greedy_exact=4, beam_exact=7,
        excess_by_step={1040: 0.5, 1080: 0.25},
        activation_ratios=[2.0, 0.5],
        residue_rho_by_layer=[0.2, 0.4],
    )  # fmt: skip
    # the beam, at the step with room the extra picked (of the 10 strings)
    assert METRICS["beam_net_wins"].compute(e) == pytest.approx(0.3)  # (5 - 2) / 10
    assert METRICS["has_room"].compute(e) == 1.0
    assert METRICS["beam_exact_gain"].compute(e) == pytest.approx(0.3)  # (7 - 4) / 10
    # a seed whose snapshots left greedy no room: no beam value, and no room
    none = evaluated(greedy_by_step={300: 0.1, 1000: 0.95}, beam_step=None)
    for name in ("beam_net_wins", "beam_exact_gain"):
        assert math.isnan(METRICS[name].compute(none)), name
    assert METRICS["has_room"].compute(none) == 0.0
    assert METRICS["log2_excess"].compute(e) == {1040: 0.5, 1080: 0.25}  # by step: see below
    assert METRICS["init_scale"].compute(e) == 1.0  # a factor 2 each way
    assert METRICS["residue_rho"].compute(e) == pytest.approx(0.3)


def test_a_claim_reads_a_by_step_metric_at_its_snapshots_by_its_rule():
    from tcrclaims import verdicts

    # two seeds' metrics as metrics.json gives them back (JSON keys are strings); the second
    # seed's snapshots left greedy no room: its beam numbers are None
    seeds = [{"log2_excess": {"1040": 0.5, "1080": 0.25, "1120": 8.0},
              "greedy_by_step": {"300": 0.1, "500": 0.3, "1000": 0.95},
              "beam_net_wins": 0.02, "beam_step": 500.0},
             {"log2_excess": {"1040": 1.0, "1080": 1.0, "1120": 8.0},
              "greedy_by_step": {"300": 0.0, "500": 0.95, "1000": 0.97},
              "beam_net_wins": None, "beam_step": None}]  # fmt: skip
    m = verdicts.Measurements({"a": seeds}, {}, {}, 10, {"a": [7, 8]}, at_steps=metrics.stepped())
    assert set(verdicts.AT_STEPS) == {"log2_mean"}

    def read(metric, snapshots):
        return verdicts.arm_values({"snapshots": snapshots}, m, "a", metric, [7, 8]).tolist()

    # log2 of the mean excess over the claim's snapshots only (not the mean of the log2s)
    assert read("log2_excess", [1040, 1080]) == pytest.approx([math.log2(0.375), 0.0])
    # the beam's net wins are one number per seed, at the step its own evaluation chose
    # (from greedy alone): the claim's snapshots only say where to look, and are not a rule
    beam = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    for snapshots in (beam, [300, 1000], []):
        found = read("beam_net_wins", snapshots)
        assert found[0] == 0.02 and math.isnan(found[1]), snapshots
    assert read("beam_step", beam)[0] == 500.0  # the step the extra recorded, reported
    with pytest.raises(ValueError, match="log2_excess is measured at weight snapshots"):
        read("log2_excess", [])


@pytest.mark.parametrize(
    ("looks", "top1", "rho"), [(looks_where_it_reads, 1.0, 1.0), (looks_everywhere_else, 0.0, -1.0)]
)
def test_top1_agreement_reads_the_attribution_extra(looks, top1, rho):
    """The reverser reads source residue L-1-t at step t: attention there agrees with the
    occlusion importance at every residue step, attention everywhere else at none."""
    src, tgt = strings(n=30)
    e = ArmEvaluation(Reverser(looks), None, src, tgt, None)
    EXTRAS[METRICS["top1_agreement"].extra](e, ())
    assert METRICS["top1_agreement"].compute(e) == pytest.approx(top1)
    assert METRICS["mass_on_top"].compute(e) == pytest.approx(top1)
    assert METRICS["residue_rho"].compute(e) == pytest.approx(rho)
    # one residue costs 10 nats at every step, every other none: each step's top is defined,
    # wherever attention looks
    assert METRICS["top_defined"].extra == "attribution"
    assert METRICS["top_defined"].compute(e) == pytest.approx(1.0)


def test_top_defined_asks_for_a_top_twice_the_second():
    from tcrformer.training import attribution

    assert attribution.TOP_RATIO == 2.0 and attribution.MIN_IMPORTANCE == 1e-3
    defined = [[0.0, 1.0, 0.1], [0.4, 0.2, 0.0], [0.002, 0.0, 0.0]]  # exactly twice: defined
    assert attribution.top_defined(defined) == 1.0
    # a near-tie, two residues that matter alike, and a row where nothing matters
    undefined = [[0.5, 0.3, 0.0], [1.0, 0.0, 1.0], [0.0005, 0.0, 0.0]]
    assert attribution.top_defined(undefined) == 0.0
    assert attribution.top_defined(defined[:2] + undefined[:2]) == 0.5
    assert attribution.top_defined(undefined[2:], min_importance=1e-4) == 1.0


def test_top1_agreement_on_a_trained_shape_pads_no_top():
    """On a real model (random weights) and strings of many lengths, the padded rows the
    metric reads give what the residues alone give, a length at a time (eos steps out)."""
    import numpy as np

    from tcrformer.training import attribution

    src, tgt = strings(n=40, low=4, high=12, seed=3)
    e = ArmEvaluation(tiny_model(), None, src, tgt, None)
    EXTRAS["attribution"](e, ())
    attention, importance = e.arrays["attribution"][:2]
    groups = attribution.residue_steps(attention[-1:], importance, src, tgt)
    rows = np.concatenate([attribution.top1_agreement_rows(a[0], i) for a, i in groups])
    assert 0 < rows.size and METRICS["top1_agreement"].compute(e) == pytest.approx(rows.mean())


def test_an_arms_extras_are_what_its_claims_read():
    late = (2600, 2700, 2800, 2900, 3000)  # sqrt_dk's snapshots
    # beam_search: greedy at its ten snapshots (beam at the first with room; its has_room
    # check and its reports need the same extra); attention_importance: the attribution
    # (its test and its reports); xavier: init; sqrt_dk: the excess at its snapshots, and
    # the step-0 entropy it reports (its steps unused)
    baseline = SETTINGS.extras_of("baseline")
    assert baseline == {"beam": tuple(range(100, 1001, 100)), "attribution": (), "init": (),
                        "snapshots": late, "entropy": late}  # fmt: skip
    assert list(baseline) == ["beam", "attribution", "init", "snapshots", "entropy"]  # EXTRAS'
    assert SETTINGS.extras_of("no_scaling") == {"snapshots": late, "entropy": late}
    pre_ln = (1040, 1080, 1120, 1160, 1200)  # pre_ln_warmup's log2_excess
    assert SETTINGS.extras_of("deep_pre") == SETTINGS.extras_of("deep_pre_flat_1") == {
        "snapshots": pre_ln}  # fmt: skip
    assert SETTINGS.extras_of("default_init") == {"init": ()}  # xavier's init_scale
    for arm in ("gru", "deep_post", "deep_post_flat_1", "fixed", "fixed_no_dropout",
                "no_positions", "stress_unclipped"):  # fmt: skip
        assert SETTINGS.extras_of(arm) == {}, arm  # the metrics every arm computes, or none
    # a metric reported beside a test, or read by a manipulation check, adds its extra
    claim = SETTINGS.claim("dropout")
    reported = replace(claim, test={**claim.test, "report": ["top1_agreement"]})
    claims = tuple(reported if c.id == "dropout" else c for c in SETTINGS.claims)
    assert replace(SETTINGS, claims=claims).extras_of("fixed_no_dropout") == {"attribution": ()}
    check = {"check": "median_at_least", "metric": "top_defined", "arms": ["fixed_no_dropout"],
             "at_least": 0.5}  # fmt: skip
    checked = replace(claim, precondition=(*claim.precondition, check))
    claims = tuple(checked if c.id == "dropout" else c for c in SETTINGS.claims)
    assert replace(SETTINGS, claims=claims).extras_of("fixed_no_dropout") == {"attribution": ()}
    # ... at the snapshot steps its claim names, on that claim's arms only
    stepped = replace(claim, test={**claim.test, "report": ["beam_net_wins"], "snapshots": [500]})
    claims = tuple(stepped if c.id == "dropout" else c for c in SETTINGS.claims)
    assert replace(SETTINGS, claims=claims).extras_of("fixed_no_dropout") == {"beam": (500,)}
    assert replace(SETTINGS, claims=claims).extras_of("fixed_no_smoothing") == {}


def test_an_unknown_claim_id_names_itself():
    with pytest.raises(ConfigError, match="claims.list = 'no_such_claim'"):
        SETTINGS.claim("no_such_claim")
