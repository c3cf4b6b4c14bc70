"""The exact tests (tcrformer.stats): the sign-flip test by enumeration, by
dynamic programming on a lattice and by Monte Carlo, its interval and its t-test beside it;
the exact unconditional test of paired binary outcomes, its interval and McNemar's; Holm
and the exact binomial interval, each defined once."""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

from tcrformer.stats import binary, holm, sides, sign_flip

ROOT = Path(__file__).resolve().parents[1]


def _counts_difference(rng, n, strings=1000):
    """Paired held-out exact fractions out of `strings`, arm minus reference: a lattice."""
    return (rng.integers(300, 700, n) - rng.integers(300, 700, n)) / strings


def _brute_p(d, margin, side):
    """The sign-flip p-value by brute force, independent of tcrformer.stats: every sign vector e
    of the n seeds, T* = sum e_s (d_s - m) against the observed T (all signs +1);
    `greater` is P*(T* >= T), `less` P*(T* <= T), ties within a tiny tolerance counted."""
    centred = np.asarray(d, dtype=float) - margin
    observed = centred.sum()
    tiny = 1e-9 * max(1.0, float(np.abs(centred).sum()))
    flipped = np.array([np.dot(e, centred)
                        for e in itertools.product((1.0, -1.0), repeat=centred.size)])  # fmt: skip
    if side == "greater":
        return float(np.mean(flipped >= observed - tiny))
    return float(np.mean(flipped <= observed + tiny))


def _brute_sides(d, margin, direction):
    """(p_support, p_refute) from the brute-force one-sided p-values, written out per
    direction (the equivalence claim as two one-sided tests)."""
    if direction == "greater":
        return _brute_p(d, margin, "greater"), _brute_p(d, margin, "less")
    if direction == "less":
        return _brute_p(d, margin, "less"), _brute_p(d, margin, "greater")
    support = max(_brute_p(d, -margin, "greater"), _brute_p(d, margin, "less"))
    refute = min(_brute_p(d, -margin, "less"), _brute_p(d, margin, "greater"))
    return support, refute


# The sign-flip test -----------------------------------------------------------------------------


@pytest.mark.parametrize("margin", [-0.2, 0.0, 0.1, 0.3])
def test_sign_flip_is_the_brute_force_enumeration_and_scipys(margin):
    d = np.random.default_rng(3).normal(0.1, 0.4, size=8)
    for side in ("greater", "less"):
        p = sign_flip.sign_flip_p(d, margin, side)
        assert p == _brute_p(d, margin, side)  # both count of 2^8 sign vectors: exact
        found = stats.permutation_test((d - margin,), np.sum, permutation_type="samples",
                                       vectorized=True, n_resamples=np.inf,
                                       alternative=side)  # fmt: skip
        assert p == pytest.approx(found.pvalue, rel=1e-12)
    # the margin matters: the p-values move across it, and the two sides add to just over 1
    # (the observed vector is in both tails)
    greater, less = (
        sign_flip.sign_flip_p(d, margin, "greater"),
        sign_flip.sign_flip_p(d, margin, "less"),
    )
    assert greater + less == pytest.approx(1 + 2.0**-8)
    assert sign_flip.sign_flip_p(d, margin + 1.0, "greater") > greater


def test_sign_flip_counts_ties_as_extreme():
    # d_s on a lattice with many equal subset sums: the tolerance decides the p-value
    d = np.array([0.1, 0.1, 0.2, -0.1, 0.3, 0.1])
    for margin in (0.0, 0.1):
        for side in ("greater", "less"):
            assert sign_flip.enumeration_null(d).p_value(margin, side) == _brute_p(d, margin, side)


@pytest.mark.parametrize("n", [12, 16])
def test_lattice_dynamic_programme_is_enumeration_and_scipy(n):
    # margins on the lattice (0, 0.01, -0.05) and off it (0.0125: 12.5 strings of 1,000)
    d = _counts_difference(np.random.default_rng(n), n)
    lattice, listed = sign_flip.sign_flip_null(d, method="lattice"), sign_flip.enumeration_null(d)
    assert lattice.method == "lattice" and lattice.lattice == 1000
    for margin in (0.0, 0.01, 0.0125, -0.05, float(np.median(d))):
        for side in ("greater", "less"):
            assert lattice.p_value(margin, side) == listed.p_value(margin, side)
    for margin, side in ((0.01, "greater"), (0.0125, "less")):  # scipy lists all 2^n itself
        found = stats.permutation_test((d - margin,), np.sum, permutation_type="samples",
                                       vectorized=True, n_resamples=np.inf,
                                       alternative=side)  # fmt: skip
        assert lattice.p_value(margin, side) == pytest.approx(found.pvalue, rel=1e-12)


def test_the_null_is_chosen_from_the_data_and_says_which(monkeypatch):
    rng = np.random.default_rng(0)
    assert sign_flip.sign_flip_null(rng.normal(size=12)).method == "enumeration"
    on_lattice = sign_flip.sign_flip_null(_counts_difference(rng, 30))
    assert (on_lattice.method, on_lattice.lattice, on_lattice.resamples) == ("lattice", 1000, 2**30)
    monkeypatch.setattr(sign_flip, "RESAMPLES", 999)  # the registered 10^6 is tested below
    found = sign_flip.continuous_test(rng.normal(size=30), 0.0, "greater", name="dropout")
    assert (found.method, found.resamples, found.lattice) == ("monte_carlo", 999, None)
    assert found.monte_carlo_error > 0


@pytest.fixture(scope="module")
def counts_48():
    """48 seeds of count differences (exact by the lattice) and the registered Monte Carlo
    null of the same values (B = 10^6)."""
    d = _counts_difference(np.random.default_rng(48), 48)
    return d, sign_flip.lattice_null(d, 1000), sign_flip.monte_carlo_null(d)


def test_monte_carlo_p_is_within_its_error_of_the_exact_p_and_valid(counts_48):
    d, lattice, carlo = counts_48
    assert carlo.resamples == sign_flip.RESAMPLES == 10**6
    centre = float(d.mean())
    for margin in centre + np.array([-0.04, -0.03, -0.02, 0.0, 0.02]):
        for side in ("greater", "less"):
            p, p_exact = carlo.p_value(margin, side), lattice.p_value(margin, side)
            error = math.sqrt(p_exact * (1 - p_exact) / carlo.resamples) + 1 / carlo.resamples
            assert abs(p - p_exact) <= 4 * error
            k = p * (1 + carlo.resamples) - 1  # p = (1 + k) / (1 + B): k a count
            assert k == pytest.approx(round(k), abs=1e-6) and round(k) >= 0
    # far below every d_s only the unflipped vector is as extreme: 2^-48 exactly, and the
    # Monte Carlo p never below 1 / (1 + B)
    assert lattice.p_greater(-1.0) == 2.0**-48
    assert carlo.p_greater(-1.0) >= 1 / (1 + carlo.resamples)


def test_the_interval_is_the_test_inverted(counts_48):
    d, lattice, _ = counts_48
    gamma, step = 0.025, 1e-7  # a step wider than the lattice's tie tolerance
    low, high = lattice.interval(0.95)
    assert low < d.mean() < high
    assert lattice.p_greater(low - step) <= gamma < lattice.p_greater(low + step)
    assert lattice.p_less(high + step) <= gamma < lattice.p_less(high - step)
    # on continuous values, against the brute-force enumeration: P*(T* >= T) against m is
    # (1 + #{nonempty F: mean_F d <= m}) / 2^n, so the margins the test rejects at gamma end
    # at a subset mean, the floor(gamma 2^n)-th smallest (Hartigan), the top one likewise
    x = np.random.default_rng(5).normal(0.2, 0.5, 10)
    low, high = sign_flip.enumeration_null(x).interval(0.95)
    means = sorted(np.mean(x[list(F)]) for size in range(1, 11)
                   for F in itertools.combinations(range(10), size))  # fmt: skip
    k = math.floor(gamma * 2**10)
    assert (low, high) == pytest.approx((means[k - 1], means[-k]), abs=1e-9)
    assert _brute_p(x, low - 1e-6, "greater") <= gamma < _brute_p(x, low + 1e-6, "greater")
    assert _brute_p(x, high + 1e-6, "less") <= gamma < _brute_p(x, high - 1e-6, "less")
    assert math.isnan(sign_flip.enumeration_null(x[:4]).interval(0.95)[0])  # 2^-4 > 0.025


@pytest.mark.parametrize("direction", ["greater", "less", "equivalent"])
def test_support_and_refute_follow_the_direction(direction):
    d = np.random.default_rng(11).normal(0.05, 0.1, size=8)
    found = sign_flip.continuous_test(d, 0.02, direction, name="pre_ln_warmup")
    brute = _brute_sides(d, 0.02, direction)
    assert (found.p_support, found.p_refute) == pytest.approx(brute, rel=1e-12)
    assert found.p_value == min(brute) and found.supports == (brute[0] <= brute[1])
    # the claims' effect of the same d_s (a seed mean) is the same test
    from tcrclaims import protocol

    effect = protocol.effect("seed_mean", [d], 0.02, direction)
    assert (effect.p_support, effect.p_refute) == pytest.approx(brute, rel=1e-12)
    assert (effect.method, effect.secondary, effect.seeds) == ("enumeration", "t-test", (8, 8))
    paired = binary.paired_binary_test([1, 1, 0, -1, 1, 0, 1, 1], 0.1, direction)
    expected = sides.support_and_refute(
        lambda m, side: binary.paired_binary_p(5, 1, 8, m, side), 0.1, direction
    )
    assert (paired.p_support, paired.p_refute) == expected


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_values_that_are_not_finite_raise_naming_them(bad):
    d = [0.1, 0.2, bad, 0.05]
    for test in (sign_flip.sign_flip_p, sign_flip.t_test_p):
        with pytest.raises(ValueError, match=r"sqrt_dk: per-seed values not finite at \[2\]"):
            test(d, 0.0, "greater", name="sqrt_dk")
    with pytest.raises(ValueError, match="sqrt_dk"):
        sign_flip.continuous_test(d, 0.0, "greater", name="sqrt_dk")
    with pytest.raises(ValueError, match="warmup"):
        binary.paired_binary_test([1, 0, bad], 0.25, "greater", name="warmup")


def test_the_t_test_is_reported_beside_and_a_disagreement_marked():
    # eleven seeds a little above the margin and one far above: every sign-flip but the
    # identity puts a seed below, so the sign-flip rejects (2^-12); the outlier's spread
    # keeps the t-test from rejecting
    d = np.array([0.01] * 11 + [10.0])
    found = sign_flip.continuous_test(d, 0.0, "greater", name="outlier")
    assert found.p_support == 2.0**-12 and found.method == "enumeration"
    t_test = stats.ttest_1samp(d, 0.0, alternative="greater").pvalue
    assert found.t_support == pytest.approx(t_test)
    assert found.t_support > 0.05 and found.disagree(0.05) and not found.disagree(1e-5)
    assert sides.disagree(0.01, 0.02, 0.05) is False and sides.disagree(0.01, 0.2, 0.05) is True
    assert sides.disagree(0.3, 0.04, 0.05) is True and sides.disagree(0.3, math.nan, 0.05) is False
    assert math.isnan(sign_flip.t_test_p([0.5, 0.5, 0.5], 0.0, "greater"))


def test_the_continuous_test_keeps_its_level_and_finds_an_effect():
    # 1,000 simulated claims of 10 seeds from a symmetric null at the margin (Laplace d_s):
    # the rejection rate at alpha is at most alpha within 3 Monte Carlo errors; shifted by
    # one scale unit above the margin (the positive control) most claims reject.
    rng, alpha, margin, claims = np.random.default_rng(7), 0.05, 0.01, 1000

    def rejection_rate(shift):
        d = margin + shift + rng.laplace(0.0, 1.0, size=(claims, 10))
        return np.mean([sign_flip.sign_flip_p(row, margin, "greater") <= alpha for row in d])

    assert rejection_rate(0.0) <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / claims)
    assert rejection_rate(1.0) >= 0.6


def test_the_lattice_test_keeps_its_level_at_48_seeds():
    # counts out of 100 strings, symmetric about a margin of 1 string: exact by the lattice
    rng, alpha, claims = np.random.default_rng(8), 0.05, 300
    k = rng.binomial(8, 0.5, size=(claims, 48)) - rng.binomial(8, 0.5, size=(claims, 48))
    p = [sign_flip.sign_flip_p((1 + row) / 100, 0.01, "greater") for row in k]
    assert sign_flip.sign_flip_null((1 + k[0]) / 100).method == "lattice"
    assert np.mean(np.array(p) <= alpha) <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / claims)


# Paired binary outcomes -------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "margin"), [(8, 0.25), (10, 0.25), (6, 0.0), (9, -0.2)])
def test_paired_binary_all_plus_is_the_most_extreme_outcome_at_most_discordance(n, margin):
    # With every seed +1 only that outcome is as extreme; its probability is largest when
    # p01 is largest on the boundary, p10 = (1 + m) / 2: the p-value is ((1 + m) / 2)^n.
    assert binary.paired_binary_p(n, 0, n, margin, "greater") == pytest.approx(
        ((1 + margin) / 2) ** n
    )


def test_paired_binary_gives_the_published_p_of_seven_plus_one_tie():
    # 7 seeds +1 and 1 tie against margin 0.25: the exact unconditional p is 0.02873
    found = binary.paired_binary_test([1] * 7 + [0], 0.25, "greater", name="warmup")
    assert found.p_support == pytest.approx(0.02873, abs=5e-6) and found.supports
    assert (found.plus, found.minus, found.seeds, found.estimate) == (7, 0, 8, 0.875)
    assert found.mcnemar_p == pytest.approx(2**-7)
    assert found.low < 0.25 < 0.875 < found.high  # p > 0.025: the margin is inside the 95 %


def _brute_supremum(plus, minus, n, margin, points=200_001):
    """The tail probability's largest value over a fine grid of the nuisance p01."""
    b, c, log_coef = binary._outcomes(n)
    z = binary.tango_z(b, c, n, margin)
    observed = binary.tango_z(np.array([plus]), np.array([minus]), n, margin)[0]
    extreme = z >= observed - 1e-9 * max(1.0, abs(observed))
    b, c, log_coef = b[extreme], c[extreme], log_coef[extreme]
    p01 = np.linspace(max(0.0, -margin), (1 - margin) / 2, points)[:, None]
    log_p = log_coef + special.xlogy(b, p01 + margin) + special.xlogy(c, p01)
    log_p = log_p + special.xlogy(n - b - c, np.maximum(1 - 2 * p01 - margin, 0))
    return float(np.exp(log_p).sum(axis=1).max())


@pytest.mark.parametrize(("plus", "minus", "n", "margin"), [(7, 0, 8, 0.25), (5, 1, 12, 0.25)])
def test_the_supremum_over_the_nuisance_is_found(plus, minus, n, margin):
    found = binary.paired_binary_p(plus, minus, n, margin, "greater")
    assert found == pytest.approx(_brute_supremum(plus, minus, n, margin), abs=1e-10)


def _null_size(n, margin, level):
    """The largest rejection probability over the whole null p10 - p01 <= margin, by
    enumeration of every outcome on a grid of (delta, p01)."""
    b, c, _ = binary._outcomes(n)
    rejected = [binary.paired_binary_p(int(i), int(j), n, margin, "greater") <= level
                for i, j in zip(b, c, strict=True)]  # fmt: skip
    b, c = b[rejected], c[rejected]
    log_coef = special.gammaln(n + 1) - special.gammaln(b + 1) - special.gammaln(c + 1)
    log_coef = log_coef - special.gammaln(n - b - c + 1)
    largest = 0.0
    for delta in np.linspace(-1, margin, 200):
        p01 = np.linspace(0, 1, 401)
        p01 = p01[(p01 + delta >= 0) & (2 * p01 + delta <= 1)][:, None]
        p00 = np.clip(1 - 2 * p01 - delta, 0, 1)
        log_p = log_coef + special.xlogy(b, p01 + delta) + special.xlogy(c, p01)
        probability = np.exp(log_p + special.xlogy(n - b - c, p00)).sum(axis=1)
        largest = max(largest, float(probability.max(initial=0.0)))
    return largest


@pytest.mark.parametrize(
    ("n", "level", "reviewer"), [(8, 0.05, 0.0472), (12, 0.005, 0.0044), (20, 0.005, 0.0035)]
)
def test_paired_binary_test_keeps_its_level_over_the_whole_null(n, level, reviewer):
    size = _null_size(n, 0.25, level)
    assert size <= level
    assert size == pytest.approx(reviewer, abs=5e-5)  # docs/claims_v4_review.md


def test_paired_binary_rejects_a_clear_effect_and_keeps_a_null():
    assert binary.paired_binary_p(12, 0, 12, 0.25, "greater") <= 0.005  # 0.625^12
    assert binary.paired_binary_p(3, 3, 10, 0.0, "greater") > 0.5
    assert binary.paired_binary_p(0, 9, 10, 0.25, "less") <= 0.005  # refuted side
    assert binary.paired_binary_p(2, 5, 10, 0.1, "less") == binary.paired_binary_p(
        5, 2, 10, -0.1, "greater"
    )
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        binary.paired_binary_test([1, 0, 0.5], 0.25, "greater", name="warmup")


def test_the_paired_binary_interval_covers_at_its_level():
    # every outcome of 8 seeds, its 95 % interval; coverage of the true p10 - p01 at
    # several (p10, p01), including the boundary of v3's warmup and the all-or-none edges
    n = 8
    b, c, _ = binary._outcomes(n)
    intervals = np.array([binary.paired_binary_interval(int(i), int(j), n, 0.95, resolution=1e-4)
                          for i, j in zip(b, c, strict=True)])  # fmt: skip
    assert (intervals[:, 0] <= (b - c) / n).all() and ((b - c) / n <= intervals[:, 1]).all()
    for p10, p01 in [(0.5, 0.1), (0.875, 0.0), (0.25, 0.0), (0.2, 0.2), (0.3, 0.6), (0.05, 0.0)]:
        chance = stats.multinomial.pmf(np.stack([b, c, n - b - c], 1), n, [p10, p01, 1 - p10 - p01])
        delta = p10 - p01
        covered = (intervals[:, 0] <= delta + 1e-12) & (delta - 1e-12 <= intervals[:, 1])
        assert chance[covered].sum() >= 0.95


def test_the_paired_binary_interval_is_the_hull_of_the_kept_margins(monkeypatch):
    # a test that keeps an island of margins beyond where bisection stops: the hull takes it
    def island(plus, minus, n, margin, alternative):
        kept = abs(margin) < 0.3 or abs(margin + 0.7) < 0.015
        return 0.5 if kept else 0.0

    monkeypatch.setattr(binary, "paired_binary_p", island)
    low, high = binary.paired_binary_interval(4, 4, 8, 0.95)
    assert low == pytest.approx(-0.7, abs=1e-9) and high == pytest.approx(0.3, abs=1e-5)


def test_binary_power_by_enumeration():
    from tools.claims_power import binary_power

    # Every seed +1 for sure: the only outcome has p 0.625^8 = 0.0233 at margin 0.25.
    assert binary_power(8, 1.0, 0.0, 0.25, 0.025) == pytest.approx(1.0)
    assert binary_power(8, 1.0, 0.0, 0.25, 0.02) == 0.0
    assert 0 < binary_power(8, 0.75, 0.0, 0.25, 0.05) < 1


def test_mcnemar_is_the_binomial_split_of_the_discordant_seeds():
    assert binary.mcnemar_exact_p(7, 0) == pytest.approx(2**-7)
    assert binary.mcnemar_exact_p(0, 0) == 1.0
    assert binary.mcnemar_exact_p(5, 3) == pytest.approx(stats.binom.sf(4, 8, 0.5))
    assert binary.mcnemar_exact_p(3, 5, "less") == binary.mcnemar_exact_p(5, 3)


# One of each ------------------------------------------------------------------------------------


def test_holm_and_the_exact_binomial_interval():
    assert holm.holm([0.01, 0.04, 0.03], 0.05) == [True, False, False]
    assert holm.holm([0.001, 0.02, 0.03], 0.05) == [True, True, True]
    assert holm.holm([0.03, 0.001, 0.04], 0.05) == [False, True, False]  # 0.03 > 0.05 / 2
    # each claim's level: alpha / (m - rank) up to Holm's first failure, and that stopping
    # level for every claim after it (not its own, larger alpha / (m - rank))
    assert holm.holm_levels([0.03, 0.001, 0.04], 0.05) == pytest.approx([0.025, 0.05 / 3, 0.025])
    assert holm.holm_levels([0.01, 0.04, 0.03, 0.005], 0.05) == pytest.approx(
        [0.05 / 3, 0.05 / 2, 0.05 / 2, 0.05 / 4]
    )
    assert holm.holm_levels([0.001, 0.02, 0.03], 0.05) == pytest.approx(
        [0.05 / 3, 0.05 / 2, 0.05]
    )  # no failure: every claim at its own level
    # so a p-value is within its level exactly when Holm rejects it
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.uniform(0, 0.08, rng.integers(1, 7)).tolist()
        levels = holm.holm_levels(p, 0.05)
        assert [pi <= level for pi, level in zip(p, levels, strict=True)] == holm.holm(p, 0.05)
    low, high = binary.exact_binomial_interval(0, 10)
    assert low == 0 and high == pytest.approx(1 - 0.025 ** (1 / 10))
    low, high = binary.exact_binomial_interval(3, 10, 0.9)
    assert low == pytest.approx(stats.beta.ppf(0.05, 3, 8))
    assert high == pytest.approx(stats.beta.ppf(0.95, 4, 7))


def test_holm_and_the_binomial_interval_are_defined_once():
    from tools.golden import power, validate

    assert validate.exact_binomial_interval is binary.exact_binomial_interval
    assert power.exact_binomial_interval is binary.exact_binomial_interval
    sources = [*(ROOT / "workflow").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]
    definitions = {
        "holm": re.compile(r"^def holm(_levels)?\b|alpha / \(len", re.MULTILINE),
        "interval": re.compile(
            r"^def exact_binomial_interval\b|proportion_ci|beta\.ppf", re.MULTILINE
        ),
    }
    for name, pattern in definitions.items():
        found = sorted(p.relative_to(ROOT).as_posix() for p in sources
                       if pattern.search(p.read_text()))  # fmt: skip
        home = "holm.py" if name == "holm" else "binary.py"
        assert found == [f"workflow/lib/tcrformer/stats/{home}"], name


def test_a_claims_job_imports_scipy_only_when_it_tests():
    """Every claims job imports the statistics through the claims' protocol; only the ones
    that test something load scipy (half a second each, some 700 jobs in a full run)."""
    probe = ("import sys, tcrclaims.compute; print('scipy' in sys.modules); "
             "from tcrformer.stats.binary import exact_binomial_interval as ci; ci(3, 10); "
             "print('scipy.stats' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.stdout.split() == ["False", "True"], done.stderr[-2000:]
