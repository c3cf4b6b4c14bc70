"""Golden check v4's held-out validation (tools/golden_v4/validate.py): its primary tests
hold their 5 % level when the bands are right, and see bands that are exceeded too often."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tools.golden_v4 import validate

KEYS = ("a", "b", "c", "d")  # three two-sided keys and one upper-only, as the judged keys
SIDES = 7  # 3 x 2 + 1
BUDGET = 0.01


def exact_bands(inflation: float = 1.0):
    """Bands of a standard normal at a per-side share; `inflation` < 1 makes them too narrow
    (each side then exceeded more often than its share)."""

    def band_at(share: float):
        z = stats.norm.isf(share) * inflation
        return {**{k: (-z, z) for k in KEYS[:3]}, "d": (-np.inf, z)}

    return band_at


def held_out(rng, seeds: int = 100):
    return {k: rng.standard_normal(seeds) for k in KEYS}


def test_the_pooled_critical_count_is_the_smallest_with_an_exact_p_of_5_percent():
    counts = [validate.SideCount("k", "high", 0, 100, 0.05 / 9, 1.0)] * 9
    record = validate.pooled_test(counts)
    c = record["critical"]
    assert c == 10  # 900 draws at 0.556 %: P(X >= 10) = 0.03, P(X >= 9) = 0.07
    assert validate.excess_p(c, 900, 0.05 / 9) <= 0.05 < validate.excess_p(c - 1, 900, 0.05 / 9)


def test_zero_fails_of_100_support_a_rate_up_to_2_95_percent():
    record = validate.family_wise(np.zeros(100, bool))
    assert record["fail"] == 0 and record["upper"] == pytest.approx(0.0295, abs=5e-5)


def test_an_infinite_end_is_not_a_judged_side():
    assert validate.sides(exact_bands()(0.01)) == [
        ("a", "low"), ("a", "high"), ("b", "low"), ("b", "high"), ("c", "low"), ("c", "high"),
        ("d", "high"),
    ]  # fmt: skip


def rejection_rates(inflation: float, runs: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    pooled = per_side = 0
    for _ in range(runs):
        record = validate.validate(held_out(rng), exact_bands(inflation), BUDGET)
        pooled += record["pooled"]["rejects"]
        per_side += any(row["rejects"] for row in record["per_side"])
    return pooled / runs, per_side / runs


def test_right_bands_are_rejected_at_most_at_the_tests_level():
    """Held-out draws from the bands' own model: each primary test rejects at most 5 % of
    the time (exact tests of discrete counts: below it), within Monte-Carlo error."""
    runs = 1500
    pooled, per_side = rejection_rates(1.0, runs, seed=11)
    se = np.sqrt(0.05 * 0.95 / runs)
    assert pooled <= 0.05 + 3 * se and per_side <= 0.05 + 3 * se, (pooled, per_side)


def test_bands_that_are_too_narrow_are_seen():
    """Bands whose ends sit at 0.75 of the right quantile (each side's rate several times its
    share): the primary tests reject most held-out sets of 100 seeds."""
    pooled, per_side = rejection_rates(0.75, 200, seed=12)
    assert pooled > 0.8 and per_side > 0.8, (pooled, per_side)


def test_the_committed_bands_count_fails_per_seed_not_per_side():
    values = {k: np.zeros(4) for k in KEYS}
    values["a"][0], values["b"][0], values["d"][1] = 10.0, -10.0, 10.0  # seed 0 twice, 1 once
    record = validate.validate(values, exact_bands(), BUDGET)
    assert record["family_wise"]["fail"] == 2 and record["family_wise"]["seeds"] == 4


def test_a_shift_between_fitting_and_held_out_seeds_is_reported():
    rng = np.random.default_rng(3)
    fitting = {"a": rng.standard_normal(80)}
    same = validate.location_tests(fitting, {"a": rng.standard_normal(100)})
    moved = validate.location_tests(fitting, {"a": rng.standard_normal(100) + 1.0})
    assert same["a"]["p"] > 0.01 and moved["a"]["p"] < 1e-6
    assert moved["a"]["shift_sd"] == pytest.approx(1.0, abs=0.35)
