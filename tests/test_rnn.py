"""The GRU encoder-decoder: shapes, encoding at the true length, size matching, decoding."""

from __future__ import annotations

import warnings

import pytest
import torch

from tcrformer.models import transformer
from tcrformer.models.counting import count_parameters
from tcrformer.models.rnn import (
    GruAttentionEncoderDecoder,
    GruEncoderDecoder,
    gru_hidden_for,
    gru_parameter_count,
)

torch.set_num_threads(1)
PAD, BOS, EOS, V = 0, 1, 2, 12
HIDDEN, LAYERS = 16, 2


def build(seed: int = 0, kind=GruEncoderDecoder, **kwargs) -> GruEncoderDecoder:
    """A small GRU encoder-decoder of `kind` (with attention or without), eval mode."""
    torch.manual_seed(seed)
    return kind(V, V, **{"hidden": HIDDEN, "num_layers": LAYERS, **kwargs}).eval()


def sources(n: int = 6, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 8) residue ids 3..11 padded with PAD at the end, and the lengths (n,) in 3..8."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (n, 8), generator=generator)
    lengths = torch.randint(3, 9, (n,), generator=generator)
    return src.masked_fill(torch.arange(8) >= lengths[:, None], PAD), lengths


def test_shapes():
    model, (src, _) = build(), sources()
    tgt_in = torch.randint(3, V, (6, 5))
    memory = model.encode(src)
    assert memory.shape == (LAYERS, 6, HIDDEN)
    logits = model.decode(tgt_in, memory)
    assert logits.shape == (6, 5, V)
    assert torch.equal(model(src, tgt_in), logits)
    src_mask, tgt_mask = transformer.make_masks(src, tgt_in)
    assert torch.equal(model(src, tgt_in, src_mask, tgt_mask), logits)  # masks are ignored
    assert model.repeat_memory(memory, 3).shape == (LAYERS, 18, HIDDEN)


def test_the_encoding_is_read_at_each_rows_true_length():
    model, (src, lengths) = build(), sources()
    memory = model.encode(src)
    longer = torch.cat([src, torch.zeros(6, 4, dtype=torch.long)], dim=1)  # more padding
    torch.testing.assert_close(model.encode(longer), memory, atol=1e-6, rtol=0)
    for row, length in enumerate(lengths.tolist()):  # each row alone, without padding
        alone = model.encode(src[row : row + 1, :length])
        torch.testing.assert_close(alone[:, 0], memory[:, row], atol=1e-6, rtol=0)
    with torch.no_grad():
        model.src_embed.weight[PAD] = torch.randn(HIDDEN) * 10  # what padding would feed in
    torch.testing.assert_close(model.encode(src), memory, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", [GruEncoderDecoder, GruAttentionEncoderDecoder])
def test_the_decoder_is_causal(kind):
    model, (src, _) = build(kind=kind), sources()
    memory = model.encode(src)
    tgt_in = torch.randint(3, V, (6, 5))
    changed = tgt_in.clone()
    changed[:, 3:] = BOS
    torch.testing.assert_close(
        model.decode(changed, memory)[:, :3], model.decode(tgt_in, memory)[:, :3]
    )


@pytest.mark.parametrize(
    ("hidden", "src_vocab", "tgt_vocab", "layers"), [(16, 12, 12, 2), (7, 30, 5, 1), (32, 4, 9, 3)]
)
def test_the_closed_form_counts_the_modules(hidden, src_vocab, tgt_vocab, layers):
    model = GruEncoderDecoder(src_vocab, tgt_vocab, hidden, layers)
    expected = count_parameters(model)
    assert gru_parameter_count(hidden, src_vocab, tgt_vocab, layers) == expected


@pytest.mark.parametrize("target", [1_000, 25_000, 123_457, 2_000_000])
@pytest.mark.parametrize("layers", [1, 2])
def test_gru_hidden_for_matches_a_target_count(target, layers):
    hidden = gru_hidden_for(target, V, V, layers)
    count = count_parameters(GruEncoderDecoder(V, V, hidden, layers))
    one_unit = gru_parameter_count(hidden + 1, V, V, layers) - count
    assert abs(count - target) <= one_unit  # within one hidden unit's worth of parameters
    nearby = range(max(1, hidden - 5), hidden + 6)
    errors = [abs(gru_parameter_count(h, V, V, layers) - target) for h in nearby]
    assert abs(count - target) == min(errors)  # and the closest of its neighbours


def test_gru_hidden_for_recovers_an_exact_size():
    for hidden in (1, 16, 100, 513):
        assert gru_hidden_for(gru_parameter_count(hidden, V, 20, 2), V, 20, 2) == hidden


def test_sized_like_the_tiny_transformer():
    torch.manual_seed(0)
    reference = transformer.EncoderDecoder(V, V, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    target = count_parameters(reference)
    hidden = gru_hidden_for(target, V, V)
    step = gru_parameter_count(hidden + 1, V, V) - gru_parameter_count(hidden, V, V)
    assert abs(gru_parameter_count(hidden, V, V) - target) <= step


def test_greedy_decode_runs_the_gru():
    model, (src, _) = build(), sources()
    ys = transformer.greedy_decode(model, src, max_len=7, bos=BOS, eos=EOS)
    assert ys.shape[0] == 6 and 2 <= ys.shape[1] <= 8 and (ys[:, 0] == BOS).all()
    first = model.decode(torch.full((6, 1), BOS), model.encode(src))[:, -1].argmax(-1)
    assert torch.equal(ys[:, 1], first)
    for step in range(1, ys.shape[1]):  # each token is the argmax given the ones before
        logits = model.decode(ys[:, :step], model.encode(src))[:, -1]
        assert torch.equal(ys[:, step], logits.argmax(-1))


def test_dropout_only_while_training_and_no_warning_with_one_layer():
    model, (src, _) = build(dropout=0.5), sources()
    tgt_in = torch.randint(3, V, (6, 5))
    with torch.no_grad():
        assert torch.equal(model(src, tgt_in), model(src, tgt_in))
        model.train()
        assert not torch.equal(model(src, tgt_in), model(src, tgt_in))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GruEncoderDecoder(V, V, HIDDEN, num_layers=1, dropout=0.1)
