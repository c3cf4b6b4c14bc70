"""The claim experiments that need no training (tcrclaims.analytic)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tcrclaims.analytic import (
    attention_cost,
    cosine_by_distance,
    derangement,
    first_rise,
    growth_exponent,
    permutation_error,
    relative_position_fit,
    rotation_residual,
    scaling_gradients,
    softmax_jacobian_norms,
)
from tcrformer.chapters.toy.compute import head_weights
from tcrformer.chapters.toy.settings import D_K, Settings
from tcrformer.models.chemistry import CHEMISTRY_FEATURES, feature_names, toy_input

from conftest import default_config

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def toy():
    """(X (n, d), heads, W_O = identity (h * d_k, d)) of the toy chapter, from the config."""
    settings = Settings.from_config(default_config())
    pe_dims, pe_base = settings.pe_dims, settings.pe_base
    names = feature_names(pe_dims)
    heads = [head_weights(spec, names, pe_dims, pe_base) for spec in settings.heads]
    x = toy_input(settings.sequence, pe_dims, pe_base)
    w_o = np.eye(len(heads) * D_K, x.shape[1])
    return x, heads, w_o


def test_attention_without_positions_is_permutation_equivariant(toy):
    x, heads, w_o = toy
    positions = slice(len(CHEMISTRY_FEATURES), None)  # the position columns of X
    x_off = x.copy()
    x_off[:, positions] = 0.0
    shuffle = derangement(len(x), seed=0)
    assert permutation_error(x_off, heads, w_o, shuffle, positions) < 1e-12
    assert permutation_error(x, heads, w_o, shuffle, positions) > 1e-3


def test_whole_rows_carry_their_positions_along(toy):
    """Shuffling whole rows moves each letter with its position: still equivariant."""
    x, heads, w_o = toy
    assert permutation_error(x, heads, w_o, derangement(len(x), seed=0)) < 1e-12


def test_derangement_moves_every_index():
    for seed in range(5):
        order = derangement(13, seed)
        assert sorted(order) == list(range(13))
        assert not np.any(order == np.arange(13))
    assert np.array_equal(derangement(13, 3), derangement(13, 3))


def test_permutation_error_rejects_a_non_permutation(toy):
    x, heads, w_o = toy
    with pytest.raises(ValueError, match="not a permutation"):
        permutation_error(x, heads, w_o, np.zeros(len(x), dtype=int))


def test_softmax_jacobian_norm_of_uniform_and_saturated_rows():
    m = 4
    p = np.full(m, 1 / m)
    by_hand = np.linalg.norm(np.diag(p) - np.outer(p, p))  # = sqrt(m - 1) / m
    norms = softmax_jacobian_norms(np.array([np.zeros(m), [100.0, 0.0, 0.0, 0.0]]))
    assert norms[0] == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(np.sqrt(m - 1) / m, rel=1e-12)
    assert norms[1] < 1e-20


def test_unscaled_scores_have_smaller_softmax_gradients():
    sc = Settings.from_config(default_config()).scaling
    assert (sc.d_k, sc.n_keys, sc.seed) == (64, 13, 0)
    result = scaling_gradients(sc.d_k, sc.n_keys, sc.seed)
    assert set(result) == {
        "jacobian_unscaled",
        "jacobian_scaled",
        "ratio",
        "max_weight_unscaled",
        "max_weight_scaled",
    }
    assert result["jacobian_unscaled"] < result["jacobian_scaled"]
    assert result["ratio"] == pytest.approx(result["jacobian_scaled"] / result["jacobian_unscaled"])
    assert result["max_weight_unscaled"] > result["max_weight_scaled"]


def test_relative_position_is_a_linear_map():
    offsets = (1, 5, 20)
    fitted = relative_position_fit(64, offsets, n_positions=200)
    assert set(fitted) == set(offsets)
    for k in offsets:
        assert fitted[k] < 1e-9
        assert rotation_residual(64, k, n_positions=200) < 1e-9


def test_relative_position_fit_needs_more_positions_than_dimensions():
    with pytest.raises(ValueError, match="n_positions"):
        relative_position_fit(64, (1,), n_positions=10)


def test_cosine_by_distance_starts_at_one():
    cosines = cosine_by_distance(64, 50)
    assert cosines.shape == (51,)
    assert cosines[0] == pytest.approx(1.0)
    assert np.all(cosines <= 1.0 + 1e-12)


def test_first_rise():
    assert first_rise(np.array([5.0, 4.0, 3.0, 1.0])) is None
    assert first_rise([3, 2, 4]) == 2
    assert first_rise([1]) is None


def test_the_growth_exponent_recovers_a_square_law():
    lengths = np.array([16, 32, 64, 128, 256])
    assert growth_exponent(lengths, 3 * lengths**2.0) == pytest.approx(2.0, abs=1e-12)
    mixed = np.where(lengths < 64, 1.0, 3 * lengths**2.0)  # flat below 64
    assert growth_exponent(lengths, mixed, min_length=64) == pytest.approx(2.0, abs=1e-12)
    with pytest.raises(ValueError, match="two lengths"):
        growth_exponent(lengths, mixed, min_length=256)


def test_attention_cost_reports_positive_numbers():
    rows = attention_cost([16, 32], repeats=2)
    assert [row["length"] for row in rows] == [16, 32]
    for row in rows:
        assert set(row) == {"length", "seconds", "allocated_bytes", "score_bytes"}
        assert row["seconds"] > 0
        assert row["allocated_bytes"] > 0
        assert row["score_bytes"] == 4 * row["length"] ** 2 * 4
    assert rows[1]["score_bytes"] == 4 * rows[0]["score_bytes"]
