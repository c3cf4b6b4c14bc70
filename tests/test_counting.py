"""Parameter formulas against the modules they describe."""

import pytest
from torch import nn

from tcrformer.models import counting
from tcrformer.models.transformer import EncoderDecoder

CONFIGS = [
    counting.ModelDims(d_model=16, d_ff=32, num_layers=1, src_vocab=11, tgt_vocab=13),
    counting.ModelDims(d_model=24, d_ff=40, num_layers=2, src_vocab=7, tgt_vocab=5),
    counting.ModelDims(d_model=64, d_ff=256, num_layers=3, src_vocab=23, tgt_vocab=23),
]


def build(dims: counting.ModelDims, num_heads: int = 4) -> EncoderDecoder:
    return EncoderDecoder(
        dims.src_vocab, dims.tgt_vocab, dims.d_model, num_heads, dims.d_ff, dims.num_layers
    )


@pytest.mark.parametrize("dims", CONFIGS, ids=lambda d: f"d{d.d_model}-ff{d.d_ff}-N{d.num_layers}")
def test_formulas_equal_module_counts(dims):
    formulas = counting.formula_counts(dims)
    assert formulas == counting.module_counts(build(dims))
    counting.check_counts_agree(formulas, counting.module_counts(build(dims)))


def test_heads_do_not_change_the_count():
    dims = CONFIGS[0]
    assert counting.count_parameters(build(dims, 2)) == counting.count_parameters(build(dims, 8))


def test_mismatch_raises():
    with pytest.raises(AssertionError, match="encoder_layer: formula 10 vs modules 11"):
        counting.check_counts_agree({"encoder_layer": 10}, {"encoder_layer": 11})


def test_attention_formula_matches_torch_multihead_attention():
    for d in (8, 16, 48):
        assert counting.attention_params(d) == counting.count_parameters(
            nn.MultiheadAttention(d, 4)
        )


def test_encoder_layer_formula_matches_torch_encoder_layer():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32)
    assert counting.encoder_layer_params(16, 32) == counting.count_parameters(layer)


def test_breakdown_table():
    dims = CONFIGS[1]
    table = counting.breakdown_table(dims)
    assert list(table.columns) == ["key", "part", "formula", "count", "share"]
    assert table.set_index("key")["count"]["all_layers"] == table["count"].iloc[-3]
    total = table.set_index("part")["count"]["Total"]
    assert total == counting.count_parameters(build(dims))
    layers, embeddings = table["count"].iloc[-3], table["count"].iloc[-2]
    assert layers + embeddings == total
    assert table["share"].iloc[-1] == 1.0
    assert (table["share"] == table["count"] / total).all()
    assert "| Total |" in counting.breakdown_markdown(table)


def test_myth_strings_come_from_the_coefficients():
    myth = counting.myth_values(d=512, d_ff=2048)
    assert myth["attention_weights_per_block"] == "4d^2"
    assert myth["ffn_weights_per_block"] == "8d^2"
    assert myth["ffn_share_of_block"] == pytest.approx(2 / 3)
    assert counting.myth_values(d=10, d_ff=25)["ffn_weights_per_block"] == "5d^2"


def test_block_weights_match_the_matrices_of_a_layer():
    model = build(CONFIGS[2])
    layer = model.encoder.layers[0]
    weights = counting.block_weights(64, 256)
    assert weights["attention"] == counting.count_weights(layer.self_attn)
    assert weights["ffn"] == counting.count_weights(layer.ffn)
