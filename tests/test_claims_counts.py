"""Fractions of strings as counts, so that their exact test runs; the gap as a co-primary
endpoint beside held-out exact, decided jointly; the excess on more held-out strings than
an arm is evaluated on (docs/claims_v5_design.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import yaml

from tcrclaims import metrics, protocol, verdicts
from tcrclaims.compute import train_claim_arm
from tcrclaims.settings import Settings
from tcrformer.core.config import ConfigError
from tcrformer.stats import sign_flip
from tcrformer.training import measures
from tcrformer.training.data import heldout_set
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import ROOT, default_config

torch.set_num_threads(1)
STRINGS = 1000
GAIN = {"effect": "paired_difference", "metric": "heldout_fraction", "arm": "with",
        "reference": "without", "margin": 0.01, "direction": "greater"}  # fmt: skip
GAP = {"metric": "gap", "margin": -0.01, "direction": "less"}  # the gap narrowed by a point


def counts(n: int, seed: int, centre: int = 900) -> np.ndarray:
    return np.random.default_rng(seed).integers(centre - 40, centre + 40, n)


def float32_fraction(count: int, total: int = STRINGS) -> float:
    """What v4 stored: a torch float32 mean, widened to a Python float."""
    return float(torch.tensor([1.0] * count + [0.0] * (total - count)).mean())


def records(right, train=None, *, total=STRINGS, train_total=STRINGS, legacy=False):
    """One arm's per-seed records as common_evaluation writes them now (counts and the
    fractions beside them), or as v4 wrote them (`legacy`: float32 fractions, no totals)."""
    rows = []
    for i, k in enumerate(right):
        row = {"heldout_exact": int(k), "heldout_fraction": float32_fraction(int(k), total)}
        if not legacy:  # the counts; the float32 fraction beside them is never read
            row.update(heldout_total=total)
        if train is not None:
            t = int(train[i])
            row.update(train_fraction=t / train_total, gap=t / train_total - int(k) / total)
            if not legacy:
                row.update(train_exact=t, train_total=train_total)
        rows.append(row)
    return rows


def measured(arms: dict[str, list[dict]]) -> verdicts.Measurements:
    seeds = {arm: list(range(len(rows))) for arm, rows in arms.items()}
    return verdicts.Measurements(arms, {}, {}, STRINGS, seeds=seeds)


# Counts, and the exact test on them -----------------------------------------------------------


def test_float32_fractions_are_off_their_lattice_and_counts_are_on_it():
    """v4's fractions: 48 seeds of float32 held-out fractions, differenced, are no lattice's,
    so the sign-flip null fell to Monte Carlo unseen; told they are counts out of 1,000 the
    null refuses them, and the counts themselves take the exact lattice test."""
    a, b = counts(48, 1), counts(48, 2)
    stored = np.array(
        [float32_fraction(x) - float32_fraction(y) for x, y in zip(a, b, strict=True)]
    )
    assert sign_flip.sign_flip_null(stored).method == "monte_carlo"  # what v4 ran
    with pytest.raises(ValueError, match="not a count out of 1000.*float32"):
        sign_flip.sign_flip_null(stored, "heldout_fraction", lattice=STRINGS)
    with pytest.raises(ValueError, match="not a count out of 1000"):
        sign_flip.continuous_test(stored, 0.01, "greater", lattice=STRINGS)
    exact = (a - b) / STRINGS
    null = sign_flip.sign_flip_null(exact, lattice=STRINGS)
    assert null.method == "lattice" and null.reason.startswith("counts out of")
    reference = sign_flip.lattice_null(exact, STRINGS)
    for margin in (0.0, 0.01, 0.0125):
        assert null.p_greater(margin) == reference.p_greater(margin)
    # a lattice named in a coarser N than the data need still gives the same null
    assert sign_flip.on_lattice(np.array([0.002, -0.004]), 1000) == 500
    with pytest.raises(ValueError, match="never Monte Carlo|exact null"):
        sign_flip.sign_flip_null(exact, lattice=STRINGS, method="monte_carlo")


def test_a_counted_metric_is_read_from_its_integer_counts_and_a_float_count_raises():
    row = {"heldout_exact": 983, "heldout_total": 1000, "heldout_fraction": 0.9829999804496765,
           "train_exact": 197, "train_total": 300}  # fmt: skip
    assert metrics.counted_value(row, "heldout_fraction") == (0.983, 1000)
    gap, lattice = metrics.counted_value(row, "gap")
    assert lattice == 3000 and gap == 197 / 300 - 983 / 1000
    assert metrics.counted_value({"heldout_fraction": 0.98}, "heldout_fraction") is None
    for bad in (983.0, np.float32(983), True):
        with pytest.raises(ValueError, match="not an integer count"):
            metrics.counted_value({**row, "heldout_exact": bad}, "heldout_fraction")
    with pytest.raises(ValueError, match="heldout_exact 1001 of heldout_total 1000"):
        metrics.counted_value({**row, "heldout_exact": 1001}, "heldout_fraction")
    missing = metrics.counted_value({**row, "heldout_exact": None}, "heldout_fraction")
    assert math.isnan(missing[0])


def test_counts_take_the_exact_test_and_fractions_without_them_say_they_did_not():
    """The path v4's dropout and smoothing took: with counts, 48 seeds of held-out exact are
    tested on their lattice, whatever float the fraction beside them holds; without counts,
    the test falls to Monte Carlo, and the effect records it (the table shows it); a count
    stored as a float stops the test."""
    a, b = counts(48, 3, 905), counts(48, 4, 890)
    with_counts = measured({"with": records(a), "without": records(b)})
    found, _ = verdicts.experiment_effect(GAIN, with_counts)
    assert (found.method, found.lattice, found.fallback) == ("lattice", STRINGS, "")
    exact = protocol.effect("paired_difference", [a / STRINGS, b / STRINGS], 0.01, "greater")
    assert (found.p_support, found.p_refute) == (exact.p_support, exact.p_refute)
    legacy = measured({"with": records(a, legacy=True), "without": records(b, legacy=True)})
    fell, _ = verdicts.experiment_effect(GAIN, legacy)
    assert fell.method == "monte_carlo" and fell.lattice is None
    assert fell.fallback.startswith("heldout_fraction: Monte Carlo where counts give an exact")
    broken = records(b)
    broken[5]["heldout_exact"] = float(broken[5]["heldout_exact"])
    with pytest.raises(ValueError, match="heldout_exact is .* not an integer count"):
        verdicts.experiment_effect(GAIN, measured({"with": records(a), "without": broken}))


def test_the_lattice_of_averaged_arms_and_of_the_gap_are_their_counts():
    a, b, t = counts(24, 5), counts(24, 6), np.minimum(counts(24, 7, 980) // 4, 240)
    m = measured({"with": records(a, t, train_total=240), "other": records(b, t, train_total=240),
                  "without": records(b, t, train_total=240)})  # fmt: skip
    assert m.lattice("with", "heldout_fraction", range(24)) == STRINGS
    assert m.lattice("with", "gap", range(24)) == 6000  # lcm(240, 1000)
    assert m.lattice("with", "final_loss", range(24)) is None
    pooled = {**GAIN, "arm": ["with", "other"]}  # two arms averaged: counts out of 2,000
    assert verdicts.experiment_effect(pooled, m)[0].lattice == 2 * STRINGS
    ratio = {**GAIN, "effect": "paired_relative"}  # a ratio of counts is on no lattice
    assert verdicts.experiment_effect(ratio, m)[0].lattice is None


def tiny(**changes):
    tiny_recipe = dict(cross_attention_layer=1, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                       steps=12,
                       batch_size=8, warmup=4, checkpoint_every=12, log_every=12,
                       report_every=12, eval_n=20, device="cpu", train_set=30)  # fmt: skip
    base = recipe_from_config(default_config()["reversal"])
    return with_overrides(base, **{**tiny_recipe, **changes})


def test_an_arms_evaluation_stores_counts_as_integers_and_the_excess_on_its_strings(tmp_path):
    """A claim job: held-out and training exact as integer counts, each fraction their
    quotient; the excess on 600 held-out strings (more than the 20 evaluated: a held-out set
    of 600 from the seed's eval_seed), and on its first 200 and 500 (the pilot's prefixes)."""
    recipe = tiny(snapshot_steps=(12,))
    job = train_claim_arm(recipe, recipe, tmp_path, {}, extras={"snapshots": (12,)},
                          excess_strings=600)  # fmt: skip
    n = job["metrics"]
    for key, total in (("heldout", 20), ("train", 20)):  # train: its first eval_n of 30
        assert type(n[f"{key}_exact"]) is int and type(n[f"{key}_total"]) is int
        assert n[f"{key}_total"] == total
        assert n[f"{key}_fraction"] == n[f"{key}_exact"] / total
    assert n["gap"] == n["train_fraction"] - n["heldout_fraction"]
    assert n["excess_strings"] == 600 and sorted(n["excess_by_prefix"]) == [200, 500]
    e = metrics.ArmEvaluation(None, recipe, *measures.heldout(recipe), None)
    assert torch.equal(e.heldout_strings(7)[0], measures.heldout(recipe)[0][:7])  # its own
    more = heldout_set(600, recipe.min_len, recipe.max_len, recipe.eval_seed)
    assert all(torch.equal(x, y) for x, y in zip(e.heldout_strings(600), more, strict=True))
    default = train_claim_arm(recipe, recipe, tmp_path, {}, extras={"snapshots": (12,)})
    assert default["metrics"]["excess_strings"] == measures.EXCESS_STRINGS
    assert "excess_by_prefix" not in default["metrics"]


def test_the_excess_strings_a_claim_names_reach_its_arms_and_must_agree():
    claims = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
    config = {**default_config(), **claims}
    listed = config["claims"]["list"]
    at = next(i for i, c in enumerate(listed) if c["id"] == "pre_ln_warmup")
    listed[at]["test"] = {**listed[at]["test"], "excess_strings": 2000}
    settings = Settings.from_config(config)
    assert settings.excess_strings_of("deep_pre") == settings.excess_strings_of(
        "deep_pre_flat_1") == 2000  # fmt: skip
    assert settings.excess_strings_of("baseline") is None  # sqrt_dk's: the default
    other = next(i for i, c in enumerate(listed) if c["id"] == "pre_ln_stable")
    listed[other]["test"] = {**listed[other]["test"], "excess_strings": 500}
    with pytest.raises(ConfigError, match="excess_strings"):
        Settings.from_config(config)
    listed[other]["test"]["excess_strings"] = 0
    with pytest.raises(ConfigError, match="a count of strings"):
        Settings.from_config(config)


# The gap as a co-primary endpoint -------------------------------------------------------------


def gap_claim(a, b, train_a, train_b) -> verdicts.Measurements:
    return measured({"with": records(a, train_a), "without": records(b, train_b)})


COPRIMARY = {**GAIN, "co_primary": [GAP]}


def test_supported_needs_every_endpoint_and_refuted_any_one():
    """Held-out exact up 4 points in every seed, so the gain alone is SUPPORTED in each case.
    The gap: narrowed 4 points (both shown: SUPPORTED, p the larger); about on its margin,
    narrowed a point give or take three (INCONCLUSIVE); unchanged, as v4's dropout (better
    fit, not regularisation: shown above its margin, NOT SUPPORTED, p twice the smaller);
    widened by 2 points (NOT SUPPORTED)."""
    n = 24
    a, b = counts(n, 8, 900), counts(n, 8, 900) - 40  # held-out: 40 strings more in every seed
    train_b = counts(n, 9, 900)
    rng = np.random.default_rng(10)
    cases = {"narrowed": train_b, "on its margin": train_b + 30 + rng.integers(-30, 31, n),
             "unchanged": train_b + 40 + rng.integers(-3, 4, n),
             "widened": train_b + 60}  # fmt: skip
    found = {}
    for name, train_a in cases.items():
        m = gap_claim(a, b, train_a, train_b)
        joint, _ = verdicts.experiment_effect(COPRIMARY, m)
        alone, _ = verdicts.experiment_effect(GAIN, m)
        assert [e.metric for e in joint.endpoints] == ["heldout_fraction", "gap"]
        assert joint.estimate == alone.estimate and joint.lattice == STRINGS
        gain, gap = joint.endpoints
        assert joint.p_support == max(gain.p_support, gap.p_support)
        assert joint.p_refute == min(1.0, 2 * min(gain.p_refute, gap.p_refute))
        verdict, adjusted = protocol.decide({"c": joint, "alone": alone}, 0.05)
        found[name] = (verdict["c"], verdict["alone"], adjusted["c"])
    assert found["narrowed"][:2] == (protocol.SUPPORTED, protocol.SUPPORTED)
    assert found["on its margin"][:2] == (protocol.INCONCLUSIVE, protocol.SUPPORTED)
    assert found["unchanged"][:2] == (protocol.REFUTED, protocol.SUPPORTED)
    assert found["widened"][:2] == (protocol.REFUTED, protocol.SUPPORTED)
    # each endpoint's interval at the claim's Holm level: for SUPPORTED, both beyond their
    # margins on the claim's side
    ends = found["narrowed"][2].endpoints
    assert ends[0].holm_low > 0.01 and ends[1].holm_high < -0.01
    assert all(e.holm_level == found["narrowed"][2].holm_level for e in ends)


def test_the_joint_test_keeps_its_level_where_one_endpoint_sits_on_its_margin():
    """The intersection-union test: the gain far above its margin, the gap symmetric about
    its own (the claim false): SUPPORTED at most alpha of the time; and the Bonferroni
    refutation keeps its level where both endpoints sit on the claim's side."""
    rng, n, trials, alpha = np.random.default_rng(11), 10, 400, 0.05
    supported = refuted = 0
    for _ in range(trials):
        gain = 0.05 + rng.normal(0, 0.01, n)
        gap = -0.01 + rng.normal(0, 0.01, n)
        ends = [protocol.effect("seed_mean", [gain], 0.01, "greater", "g"),
                protocol.effect("seed_mean", [gap], -0.01, "less", "gap")]  # fmt: skip
        joint = protocol.joint(ends)
        supported += joint.p_support <= alpha
        true = [
            protocol.effect("seed_mean", [gain], 0.01, "greater", "g"),
            protocol.effect("seed_mean", [-0.05 + rng.normal(0, 0.01, n)], -0.01, "less"),
        ]
        refuted += protocol.joint(true).p_refute <= alpha
    bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)
    assert supported / trials <= bound and refuted / trials <= bound


def test_an_endpoints_refute_side_interval_is_at_the_bonferroni_level():
    """NOT SUPPORTED needs k times an endpoint's refute p at the level, so the refuting end of
    each endpoint's Holm-level interval is one-sided at 1 - level / k: a gap shown above its
    margin at the level but not at half of it leaves the claim INCONCLUSIVE, and its interval
    keeps the margin (at 1 - 2 level it would exclude it). Over random claims, an interval
    beyond its margin on the refute side shows exactly NOT SUPPORTED, and every endpoint's
    beyond it on the claim's side exactly SUPPORTED."""
    rng, alpha, n = np.random.default_rng(5), 0.05, 12
    z = rng.standard_normal((2, n))
    gain = 0.01 + 0.01 * (z[0] - z[0].mean())  # centred on its margin: shown on neither side
    null = sign_flip.sign_flip_null(0.01 * z[1])
    at = next(m for m in np.linspace(-0.05, 0.05, 2001) if 0.03 < null.p_greater(m) <= 0.045)
    gap = -0.01 + 0.01 * z[1] - at  # above its margin: refute p between alpha/2 and alpha
    ends = [protocol.effect("seed_mean", [gain], 0.01, "greater", "gain"),
            protocol.effect("seed_mean", [gap], -0.01, "less", "gap")]  # fmt: skip
    assert alpha / 2 < ends[1].p_refute <= alpha
    verdict, adjusted = protocol.decide({"c": protocol.joint(ends)}, alpha)
    assert verdict["c"] == protocol.INCONCLUSIVE
    shown = adjusted["c"].endpoints[1]
    assert shown.holm_low <= -0.01 and shown.holm_refute_level == 1 - alpha / 2
    assert protocol.interval("seed_mean", gap, 1 - 2 * alpha)[0] > -0.01
    assert "lower end one-sided at 97.500%" in protocol.effect_text(shown)
    for _ in range(40):
        shifts = rng.normal(0, 0.012, 2)
        ends = [protocol.effect("seed_mean", [0.01 + shifts[0] + 0.01 * rng.standard_normal(10)],
                                0.01, "greater", "gain"),
                protocol.effect("seed_mean", [-0.01 + shifts[1] + 0.01 * rng.standard_normal(10)],
                                -0.01, "less", "gap")]  # fmt: skip
        verdict, adjusted = protocol.decide({"c": protocol.joint(ends)}, alpha)
        gain_, gap_ = adjusted["c"].endpoints
        refuted = gain_.holm_high < 0.01 or gap_.holm_low > -0.01
        supported = gain_.holm_low > 0.01 and gap_.holm_high < -0.01
        assert refuted == (verdict["c"] == protocol.REFUTED)
        assert supported == (verdict["c"] == protocol.SUPPORTED)


def test_a_co_primary_endpoint_is_checked_read_and_said():
    claims = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
    config = {**default_config(), **claims}
    listed = config["claims"]["list"]
    at = next(i for i, c in enumerate(listed) if c["id"] == "dropout")
    listed[at]["test"] = {**listed[at]["test"], "co_primary": [GAP], "report": []}
    settings = Settings.from_config(config)
    assert "gap" in settings.claim("dropout").metrics()
    for bad in ([{"metric": "gap", "margin": -0.01}], [{**GAP, "direction": "equivalent"}],
                [], {"metric": "gap"}, [{**GAP, "margin": "a point"}]):  # fmt: skip
        listed[at]["test"]["co_primary"] = bad
        with pytest.raises(ConfigError, match="co_primary"):
            Settings.from_config(config)
    warm = next(i for i, c in enumerate(listed) if c["id"] == "warmup")
    listed[at]["test"]["co_primary"] = [GAP]
    listed[warm]["test"] = {**listed[warm]["test"], "co_primary": [GAP]}
    with pytest.raises(ConfigError, match="not paired_binary"):
        Settings.from_config(config)
    n = 12
    a, b, train_b = counts(n, 12, 900), counts(n, 12, 900) - 40, counts(n, 13, 950)
    m = gap_claim(a, b, train_b, train_b)
    joint, samples = verdicts.experiment_effect(COPRIMARY, m)
    said = verdicts.experiment_sentence(COPRIMARY, samples, joint, m)
    assert "; gap (co-primary) with " in said and "every endpoint must be shown" in said
    assert "gap -0.04 " in said  # the gap endpoint's own estimate, beside the gain's


def test_the_tested_arms_leave_out_a_baseline_no_claim_reads():
    claims = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
    config = {**default_config(), **claims}
    config["claims"]["list"] = [c for c in config["claims"]["list"] if c["id"] == "dropout"]
    settings = Settings.from_config(config)
    assert settings.tested_arms() == ["fixed", "fixed_no_dropout"]
    assert settings.used_arms() == ["baseline", "fixed", "fixed_no_dropout"]
