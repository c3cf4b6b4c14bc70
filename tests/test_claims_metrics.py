"""The per-arm metrics' registry (chapters/claims/metrics.py): each metric computed from what
the evaluation has, where its extra ran; the extras an arm's claims need; top-1 agreement
wired to the attribution's arrays on a model whose answer is known."""

from __future__ import annotations

import math
from dataclasses import replace

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

from tcrformer.chapters.claims import metrics
from tcrformer.chapters.claims.metrics import EXTRAS, METRICS, ArmEvaluation
from tcrformer.chapters.claims.settings import Settings
from tcrformer.core.config import ConfigError

from conftest import ROOT, default_config

torch.set_num_threads(1)
SETTINGS = Settings.from_config(
    {**default_config(), **yaml.safe_load((ROOT / "config/claims.yaml").read_text())}
)


def evaluated(**numbers) -> ArmEvaluation:
    return ArmEvaluation(None, None, list(range(10)), None, None, numbers=numbers)


def test_every_metric_needs_a_known_extra_or_none():
    assert {m.extra for m in METRICS.values()} <= {None, *EXTRAS}
    assert metrics.computable([]) == ["diverged", "forgetting"]
    assert set(metrics.computable(EXTRAS)) == set(METRICS)
    assert metrics.extras_for(["init_scale", "beam_net_wins", "heldout_fraction"]) == [
        "beam", "init"]  # fmt: skip


@pytest.mark.parametrize(
    ("fraction", "final_loss", "diverged"),
    [(0.04, 0.7, 1.0), (0.5, math.inf, 1.0), (0.5, 0.7, 0.0), (0.05, 0.7, 0.0)],
)
def test_diverged_is_under_five_percent_exact_or_a_loss_not_finite(fraction, final_loss, diverged):
    e = evaluated(heldout_fraction=fraction, final_loss=final_loss)
    assert METRICS["diverged"].compute(e) == diverged


def test_the_metrics_read_like_their_definitions():
    e = evaluated(
        exact_by_length={8: 1.0, 12: 0.6, 16: 0.25},
        beam_wins=5, beam_ties=3, beam_losses=2,
        activation_ratios=[2.0, 0.5],
        residue_rho_by_layer=[0.2, 0.4],
        heads=[{"antidiagonal": a, "drop": d} for a, d in ((0.9, 30), (0.5, 10), (0.1, 1))],
    )  # fmt: skip
    assert METRICS["forgetting"].compute(e) == 0.75  # shortest minus longest
    assert METRICS["beam_net_wins"].compute(e) == pytest.approx((5 - 2) / 10)
    assert METRICS["init_scale"].compute(e) == 1.0  # a factor 2 each way
    assert METRICS["residue_rho"].compute(e) == pytest.approx(0.3)
    assert METRICS["importance_rho"].compute(e) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("looks", "top1", "rho"), [(looks_where_it_reads, 1.0, 1.0), (looks_everywhere_else, 0.0, -1.0)]
)
def test_top1_agreement_reads_the_attribution_extra(looks, top1, rho):
    """The reverser reads source residue L-1-t at step t: attention there agrees with the
    occlusion importance at every residue step, attention everywhere else at none."""
    src, tgt = strings(n=30)
    e = ArmEvaluation(Reverser(looks), None, src, tgt, None)
    EXTRAS[METRICS["top1_agreement"].extra](e)
    assert METRICS["top1_agreement"].compute(e) == pytest.approx(top1)
    assert METRICS["mass_on_top"].compute(e) == pytest.approx(top1)
    assert METRICS["residue_rho"].compute(e) == pytest.approx(rho)


def test_top1_agreement_on_a_trained_shape_pads_no_top():
    """On a real model (random weights) and strings of many lengths, the padded rows the
    metric reads give what the residues alone give, a length at a time (eos steps out)."""
    import numpy as np

    from tcrformer.chapters.claims import v4_metrics
    from tcrformer.training import attribution

    src, tgt = strings(n=40, low=4, high=12, seed=3)
    e = ArmEvaluation(tiny_model(), None, src, tgt, None)
    EXTRAS["attribution"](e)
    attention, importance = e.arrays["attribution"][:2]
    groups = attribution.residue_steps(attention[-1:], importance, src, tgt)
    rows = np.concatenate([v4_metrics.top1_agreement_rows(a[0], i) for a, i in groups])
    assert 0 < rows.size and METRICS["top1_agreement"].compute(e) == pytest.approx(rows.mean())


def test_an_arms_extras_are_what_its_claims_read():
    assert SETTINGS.extras_of("baseline") == ["beam", "importance", "attribution", "init"]
    assert SETTINGS.extras_of("default_init") == ["init"]  # xavier's init_scale
    assert SETTINGS.extras_of("gru") == []
    claim = SETTINGS.claim("dropout")
    reported = replace(claim, test={**claim.test, "report": ["top1_agreement"]})
    claims = tuple(reported if c.id == "dropout" else c for c in SETTINGS.claims)
    assert replace(SETTINGS, claims=claims).extras_of("fixed_no_dropout") == ["attribution"]


def test_an_unknown_claim_id_names_itself():
    with pytest.raises(ConfigError, match="claims.list = 'no_such_claim'"):
        SETTINGS.claim("no_such_claim")
