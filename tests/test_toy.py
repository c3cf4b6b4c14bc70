"""The toy chapter's lib: attention maths, hand-set heads, the block and its PyTorch twin."""

import math

import numpy as np
import pytest

from tcrformer.chapters.toy import compute as toy
from tcrformer.chapters.toy.settings import Settings
from tcrformer.models.attention import multi_head_attention, softmax
from tcrformer.models.chemistry import (
    check_sequence,
    chemistry_matrix,
    feature_names,
    toy_input,
)

from conftest import default_config

CONFIG = default_config()
CFG = CONFIG["toy"]


def compute(toy_section):
    """(values, every other output) of toy_values for a `toy:` section."""
    outputs = toy.toy_values(Settings.from_config({**CONFIG, "toy": toy_section}))
    return outputs.pop("values"), outputs


@pytest.fixture(scope="module")
def chapter():
    return compute(CFG)


def heads_for(cfg):
    names = feature_names(cfg["pe_dims"])
    settings = Settings.from_config({**CONFIG, "toy": cfg})
    return [toy.head_weights(s, names, cfg["pe_dims"], cfg["pe_base"]) for s in settings.heads]


def test_every_attention_row_sums_to_one(chapter):
    _, arrays = chapter
    maps = arrays["attention_weights"]
    assert maps.shape == (4, 13, 13)
    np.testing.assert_allclose(maps.sum(axis=-1), 1.0, atol=1e-12)
    assert (maps >= 0).all()


def test_without_positions_attention_is_permutation_equivariant():
    x = chemistry_matrix(CFG["sequence"])  # (n, 4): no position columns
    rng = np.random.default_rng(1)
    heads = [tuple(rng.normal(size=(4, 2)) for _ in range(3)) for _ in range(2)]
    w_o = rng.normal(size=(4, 4))
    perm = rng.permutation(len(x))
    out, _ = multi_head_attention(x, heads, w_o)
    out_perm, _ = multi_head_attention(x[perm], heads, w_o)
    np.testing.assert_allclose(out_perm, out[perm], atol=1e-12)


def test_with_positions_a_shuffle_changes_more_than_the_order():
    seq = CFG["sequence"]
    perm = np.random.default_rng(2).permutation(len(seq))
    shuffled = "".join(seq[i] for i in perm)
    heads = heads_for(CFG)
    out, _ = multi_head_attention(toy_input(seq, 4, 9.0), heads, np.eye(8))
    out_s, _ = multi_head_attention(toy_input(shuffled, 4, 9.0), heads, np.eye(8))
    assert not np.allclose(out_s, out[perm], atol=1e-3)


def test_arginine_weight_on_glutamate_by_hand(chapter):
    values, _ = chapter
    # scores +4 (E), -4 (R itself), 0 for the other 11, divided by sqrt(2)
    s = 4 / math.sqrt(2)
    by_hand = math.exp(s) / (math.exp(s) + 11 + math.exp(-s))
    assert values["toy.head1.weight_R_to_E"] == pytest.approx(by_hand, abs=1e-12)
    assert values["toy.head1.partner_position"] == 10


def test_position_heads_look_one_residue_back_and_forward(chapter):
    _, arrays = chapter
    previous, following = arrays["attention_weights"][2], arrays["attention_weights"][3]
    n = previous.shape[0]
    for i in range(1, n - 1):
        assert previous[i].argmax() == i - 1
        assert following[i].argmax() == i + 1


def test_numpy_block_matches_pytorch(chapter):
    values, arrays = chapter
    assert values["toy.block.max_abs_diff_numpy_vs_torch"] < 1e-5
    assert arrays["block_output"].shape == (13, 8)


def test_block_weights_are_reproducible():
    a = toy.random_block(8, 4, 32, seed=3, std=0.3)
    b = toy.random_block(8, 4, 32, seed=3, std=0.3)
    c = toy.random_block(8, 4, 32, seed=4, std=0.3)
    np.testing.assert_array_equal(a.w_1, b.w_1)
    assert not np.array_equal(a.w_1, c.w_1)


def test_scaling_keeps_softmax_spread():
    demo = toy.scaling_demo(64, 13, seed=0)
    assert demo["weights_unscaled"].max() > demo["weights_scaled"].max()
    np.testing.assert_allclose(demo["weights_scaled"].sum(-1), 1.0)
    # raw scores have standard deviation ~ sqrt(d_k) = 8, scaled ones ~ 1
    assert 4 < demo["raw_scores"].std() < 12


def test_another_receptor_recomputes_everything():
    cfg = {**CFG, "sequence": "CASSLAPGATNEKLFF", "focus_position": 13}
    values, arrays = compute(cfg)
    assert arrays["X"].shape == (16, 8)
    assert values["toy.attention_map.pairs"] == 256
    assert "toy.head1.weights_K" in values  # the focus residue names the key


def test_softmax_is_stable_for_large_scores():
    w = softmax(np.array([[1000.0, 0.0, -1000.0]]))
    assert np.isfinite(w).all() and w[0, 0] == pytest.approx(1.0)


def test_non_amino_acid_letters_are_rejected():
    with pytest.raises(ValueError, match="20 standard amino acids"):
        check_sequence("CASSXZ")
