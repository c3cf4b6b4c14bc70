"""The reference encoder-decoder: shapes, masks, positions, the state-dict contract."""

import math

import pytest
import torch
from torch import nn

from tcrformer.models.transformer import (
    AddNorm,
    EncoderDecoder,
    LayerNorm,
    MultiHeadAttention,
    PositionalEncoding,
    causal_mask,
    greedy_decode,
    make_masks,
    padding_mask,
    positional_table,
    scaled_dot_product_attention,
    shift_right,
)

PAD, BOS, EOS = 0, 1, 2


def tiny_model(**overrides) -> EncoderDecoder:
    torch.manual_seed(0)
    dims = dict(src_vocab=11, tgt_vocab=13, d_model=16, num_heads=4, d_ff=32, num_layers=2)
    return EncoderDecoder(**(dims | overrides)).eval()


# Positional encoding -----------------------------------------------------------------------


def test_sinusoidal_table_follows_the_formula():
    d = 8
    table = positional_table(5, d)
    assert table.shape == (5, d)
    for pos in range(5):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def offset_map(d_model: int, k: int) -> torch.Tensor:
    """The (d, d) block-diagonal rotation R_k with PE[p + k] = PE[p] @ R_k for every p."""
    rotation = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        # [sin a, cos a] @ [[cos b, -sin b], [sin b, cos b]] = [sin(a + b), cos(a + b)]
        rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(b), -math.sin(b)], [math.sin(b), math.cos(b)]], dtype=torch.float64
        )
    return rotation


@pytest.mark.parametrize("k", [1, 3, 10])
def test_position_plus_k_is_one_linear_map_of_position(k):
    d = 16
    table = positional_table(60 + k, d).double()
    rotation = offset_map(d, k)
    shifted = table[:60] @ rotation  # the same matrix for every position p
    torch.testing.assert_close(shifted, table[k : 60 + k], atol=1e-5, rtol=0)


def test_positional_table_is_a_non_persistent_buffer():
    module = PositionalEncoding(d_model=8, dropout=0.0, max_len=20)
    assert "pe" in dict(module.named_buffers())
    assert module.state_dict() == {}
    assert list(module.parameters()) == []
    x = torch.zeros(2, 7, 8)
    torch.testing.assert_close(module(x), positional_table(7, 8).expand(2, 7, 8))


# Attention ---------------------------------------------------------------------------------


def test_attention_weights_are_a_softmax_over_keys():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 5, 6) and weights.shape == (2, 3, 5, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    expected = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1) @ v  # sqrt(d_k) = 2
    torch.testing.assert_close(out, expected)


def test_a_fully_masked_row_stays_finite():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    mask = torch.tensor([[[True, True, False], [False, False, False], [True, False, True]]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(weights[0, 1], torch.full((3,), 1 / 3))  # uniform, not NaN
    assert weights[0, 0, 2] == 0 and weights[0, 2, 1] == 0


def test_causal_mask_lets_position_i_see_0_to_i_only():
    mask = causal_mask(5)
    assert mask.shape == (1, 5, 5) and mask.dtype == torch.bool
    for i in range(5):
        assert mask[0, i].tolist() == [j <= i for j in range(5)]


def test_multi_head_attention_equals_a_loop_over_heads():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, num_heads=3, dropout=0.0).eval()
    x, memory = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    out = mha(x, memory, memory)
    assert out.shape == (2, 4, 12) and mha.attn.shape == (2, 3, 4, 6)

    queries, keys, values = mha.w_q(x), mha.w_k(memory), mha.w_v(memory)
    heads = []
    for h in range(3):
        cols = slice(4 * h, 4 * h + 4)
        q, k, v = queries[..., cols], keys[..., cols], values[..., cols]
        heads.append(scaled_dot_product_attention(q, k, v)[0])
    torch.testing.assert_close(out, mha.w_o(torch.cat(heads, dim=-1)))


def test_multi_head_attention_rejects_uneven_heads():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(d_model=10, num_heads=4)


# Add & Norm --------------------------------------------------------------------------------


def test_layer_norm_matches_torch():
    torch.manual_seed(0)
    ours, theirs = LayerNorm(8), nn.LayerNorm(8)
    with torch.no_grad():
        ours.weight.normal_(), ours.bias.normal_()
    theirs.load_state_dict(ours.state_dict())  # same parameter names
    x = torch.randn(3, 5, 8) * 4 + 1
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=0)


def test_add_norm_is_post_ln():
    torch.manual_seed(0)
    add_norm = AddNorm(6, dropout=0.0)
    x = torch.randn(2, 3, 6)
    sublayer = nn.Linear(6, 6)
    expected = nn.functional.layer_norm(x + sublayer(x), (6,), eps=1e-5)
    torch.testing.assert_close(add_norm(x, sublayer), expected, atol=1e-6, rtol=0)


# The full model ----------------------------------------------------------------------------


def test_state_dict_follows_the_contract():
    model = tiny_model(num_layers=1)
    attn = [f"{w}.{p}" for w in ("w_q", "w_k", "w_v", "w_o") for p in ("weight", "bias")]
    ffn = [f"ffn.{w}.{p}" for w in ("w_1", "w_2") for p in ("weight", "bias")]

    def norms(n):
        return [f"norm{i}.{p}" for i in range(1, n + 1) for p in ("weight", "bias")]

    enc = [f"self_attn.{a}" for a in attn] + ffn + norms(2)
    dec = [f"self_attn.{a}" for a in attn] + [f"cross_attn.{a}" for a in attn] + ffn + norms(3)
    expected = (
        {"src_embed.weight", "tgt_embed.weight", "generator.weight", "generator.bias"}
        | {f"encoder.layers.0.{k}" for k in enc}
        | {f"decoder.layers.0.{k}" for k in dec}
    )
    state = model.state_dict()
    assert set(state) == expected
    assert state["encoder.layers.0.ffn.w_1.weight"].shape == (32, 16)
    assert state["generator.weight"].shape == (13, 16)


def test_matrices_get_xavier_uniform_init():
    model = tiny_model()
    for name, p in model.named_parameters():
        if p.dim() > 1:
            bound = math.sqrt(6 / (p.size(0) + p.size(1)))
            assert p.abs().max() <= bound, name
    assert (model.encoder.layers[0].norm1.weight == 1).all()


def test_forward_shapes_and_masks():
    model = tiny_model()
    src = torch.tensor([[3, 4, 5, 6, PAD], [7, 8, 9, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 3, 4, 5], [BOS, 6, PAD, PAD]])
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)
    assert src_mask.shape == (2, 1, 5) and tgt_mask.shape == (2, 4, 4)
    assert src_mask[1, 0].tolist() == [True, True, True, False, False]
    assert tgt_mask[1, 3].tolist() == [True, True, False, False]
    assert tgt_mask[0].tolist() == causal_mask(4)[0].tolist()
    logits = model(src, tgt_in, src_mask, tgt_mask)
    assert logits.shape == (2, 4, 13) and torch.isfinite(logits).all()
    assert model.decoder.layers[1].cross_attn.attn.shape == (2, 4, 4, 5)
    # No weight on padded source positions.
    assert model.decoder.layers[1].cross_attn.attn[1, :, :, 3:].abs().max() == 0


def test_decoder_cannot_see_the_future():
    model = tiny_model()
    src = torch.randint(3, 11, (2, 6))
    tgt_in = torch.randint(3, 13, (2, 5))
    changed = tgt_in.clone()
    changed[:, 3:] = torch.randint(3, 13, (2, 2))
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)
    before, after = model(src, tgt_in, src_mask, tgt_mask), model(src, changed, src_mask, tgt_mask)
    torch.testing.assert_close(before[:, :3], after[:, :3])


def test_dropout_is_active_in_training_only():
    model = tiny_model(dropout=0.5)
    src, tgt_in = torch.randint(3, 11, (2, 6)), torch.randint(3, 13, (2, 5))
    masks = make_masks(src, tgt_in, PAD)
    torch.testing.assert_close(model(src, tgt_in, *masks), model(src, tgt_in, *masks))
    model.train()
    assert not torch.equal(model(src, tgt_in, *masks), model(src, tgt_in, *masks))


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = tiny_model(dropout=0.0)
    tokens = torch.tensor([[3, 4, 5]])
    expected = model.src_embed(tokens) * 4.0 + positional_table(3, 16)  # sqrt(16) = 4
    torch.testing.assert_close(model.embed(model.src_embed, tokens), expected)


def test_padding_mask():
    mask = padding_mask(torch.tensor([[5, 6, 0], [0, 7, 0]]), pad_idx=0)
    assert mask.shape == (2, 1, 3)
    assert mask.tolist() == [[[True, True, False]], [[False, True, False]]]


def test_shift_right_is_teacher_forcing_input():
    tgt = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD]])
    assert shift_right(tgt, BOS).tolist() == [[BOS, 5, 6, 7], [BOS, 8, 9, EOS]]


def test_greedy_decode_shapes():
    model = tiny_model()
    src = torch.randint(3, 11, (3, 7))
    ys = greedy_decode(model, src, max_len=5, bos=BOS, eos=EOS, pad_idx=PAD)
    assert ys.dtype == torch.long and ys.shape[0] == 3 and 2 <= ys.shape[1] <= 6
    assert (ys[:, 0] == BOS).all()
    assert not model.training


def test_greedy_decode_stops_once_every_row_wrote_eos():
    model = tiny_model()
    with torch.no_grad():  # make <eos> the only answer
        model.generator.weight.zero_()
        model.generator.bias.zero_()
        model.generator.bias[EOS] = 1.0
    ys = greedy_decode(model, torch.randint(3, 11, (2, 4)), max_len=9, bos=BOS, eos=EOS)
    assert ys.tolist() == [[BOS, EOS], [BOS, EOS]]


# An outside oracle: the whole encoder-decoder against torch.nn.Transformer ---------------------


def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    """in_proj = [W_Q; W_K; W_V], out_proj = W_O (same layout for both implementations)."""
    projections = (ours.w_q, ours.w_k, ours.w_v)
    theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def copy_ffn_and_norms(ours, theirs, norms: int) -> None:
    for name_ours, name_theirs in (("w_1", "linear1"), ("w_2", "linear2")):
        getattr(theirs, name_theirs).load_state_dict(getattr(ours.ffn, name_ours).state_dict())
    for i in range(1, norms + 1):
        getattr(theirs, f"norm{i}").load_state_dict(getattr(ours, f"norm{i}").state_dict())


def torch_twin(model, d_model: int, heads: int, d_ff: int, layers: int) -> nn.Transformer:
    """nn.Transformer (Post-LN, ReLU) holding our weights; its final stack LayerNorms,
    which the paper's Post-LN model does not have, are removed."""
    twin = nn.Transformer(
        d_model, heads, layers, layers, d_ff, dropout=0.0, batch_first=True, norm_first=False
    )
    twin.encoder.norm, twin.decoder.norm = nn.Identity(), nn.Identity()
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, twin.encoder.layers, strict=True):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_ffn_and_norms(ours, theirs, 2)
        for ours, theirs in zip(model.decoder.layers, twin.decoder.layers, strict=True):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_attention(ours.cross_attn, theirs.multihead_attn)
            copy_ffn_and_norms(ours, theirs, 3)
    return twin


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_the_whole_model_matches_torch_nn_transformer(impl):
    """Same weights, dropout off, a padded and masked batch: the same logits within 1e-5.
    Embeddings, positions and the generator are ours on both sides."""
    from tcrformer.models import fast

    d_model, heads, d_ff, layers, vocab = 32, 4, 64, 2, 23
    cls = EncoderDecoder if impl == "reference" else fast.EncoderDecoder
    torch.manual_seed(0)
    model = cls(vocab, vocab, d_model, heads, d_ff, layers, dropout=0.0)
    twin = torch_twin(model, d_model, heads, d_ff, layers)
    model.train(), twin.train()  # train mode: torch's eval fast path would zero padded rows
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(3, vocab, (3, 9), generator=generator)
    tgt_in = torch.randint(3, vocab, (3, 7), generator=generator)
    src[0, 6:], src[2, 4:], tgt_in[1, 5:], tgt_in[2, 3:] = PAD, PAD, PAD, PAD
    tgt_in[:, 0] = BOS
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)
    scale = math.sqrt(d_model)
    with torch.no_grad():
        ours = model(src, tgt_in, src_mask, tgt_mask)  # (B, Lt, V)
        pe = model.pe if impl == "fast" else model.positions.pe
        src_x = model.src_embed(src) * scale + pe[: src.size(1)]
        tgt_x = model.tgt_embed(tgt_in) * scale + pe[: tgt_in.size(1)]
        hidden = twin(
            src_x,
            tgt_x,
            tgt_mask=~causal_mask(tgt_in.size(1))[0],  # torch: True = blocked
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src == PAD,
        )
        theirs = model.generator(hidden)
    assert (ours - theirs).abs().max().item() < 1e-5
