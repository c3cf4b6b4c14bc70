"""The fast encoder-decoder against the reference: same weights, same numbers, same file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tcrformer.core.io import ResultFileError
from tcrformer.models import fast, transformer
from tcrformer.training import data
from tcrformer.training.loop import batch_loss
from tcrformer.training.model import load_model, save_model

torch.set_num_threads(1)
V = data.VOCAB_SIZE
SHAPE = dict(d_model=32, num_heads=4, d_ff=64, num_layers=2, dropout=0.1)
ARCH = {**SHAPE, "norm": "post"}


def pair(seed: int = 0):
    """A reference and a fast model built from the same seed (hence the same weights)."""
    torch.manual_seed(seed)
    reference = transformer.EncoderDecoder(V, V, **SHAPE)
    torch.manual_seed(seed)
    return reference, fast.EncoderDecoder(V, V, **SHAPE)


def batch(n: int = 24, seed: int = 1):
    src, tgt = data.random_batch(n, 8, 16, torch.Generator().manual_seed(seed))
    tgt_in = tgt[:, :-1]
    return src, tgt, tgt_in, *transformer.make_masks(src, tgt_in)


def test_same_keys_shapes_and_initial_weights_from_the_same_seed():
    reference, quick = pair()
    ref_state, fast_state = reference.state_dict(), quick.state_dict()
    assert list(ref_state) == list(fast_state)
    assert all(torch.equal(ref_state[k], fast_state[k]) for k in ref_state)


SWITCHES = [
    {},
    {"norm_first": True},
    {"positions": False},
    {"score_scale": False},
    {"init": "default"},
    {"init": "linear_default"},
]


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: next(iter(s), "paper"))
def test_each_switch_gives_the_same_model_in_both_implementations(switch):
    """The oracle: the reference and the fast model, built from one seed with one switch,
    hold the same weights and compute the same logits, loss and gradients."""
    torch.manual_seed(3)
    reference = transformer.EncoderDecoder(V, V, **SHAPE, **switch)
    torch.manual_seed(3)
    quick = fast.EncoderDecoder(V, V, **SHAPE, **switch)
    assert list(reference.state_dict()) == list(quick.state_dict())
    for name, value in reference.state_dict().items():
        assert torch.equal(value, quick.state_dict()[name]), name
    src, tgt, tgt_in, src_mask, tgt_mask = batch()
    losses = []
    for model in (reference, quick):
        model.eval()
        model.zero_grad()
        loss = batch_loss(model, src, tgt, label_smoothing=0.1)
        loss.backward()
        losses.append(loss.detach())
    assert torch.allclose(*losses, atol=1e-6), losses
    for (name, p), q in zip(reference.named_parameters(), quick.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-6), name
    logits = reference(src, tgt_in, src_mask, tgt_mask)
    assert (quick(src, tgt_in, src_mask, tgt_mask) - logits).abs().max() < 1e-5
    torch.manual_seed(3)
    paper = transformer.EncoderDecoder(V, V, **SHAPE).eval()
    if "init" in switch:  # the switch changes the initial weights
        assert not torch.equal(paper.generator.weight, reference.generator.weight)
    elif switch:  # the switch changes what the same weights compute
        paper.load_state_dict(reference.state_dict(), strict=False)
        assert not torch.allclose(paper(src, tgt_in, src_mask, tgt_mask), logits)


def test_logits_agree_within_1e_5_with_dropout_off():
    reference, quick = pair()
    quick.load_state_dict(reference.state_dict())
    reference.eval(), quick.eval()
    src, _, tgt_in, src_mask, tgt_mask = batch()
    expected = reference(src, tgt_in, src_mask, tgt_mask)
    got = quick(src, tgt_in, src_mask, tgt_mask)
    assert got.shape == expected.shape == (24, 17, V)
    assert (got - expected).abs().max() < 1e-5
    memory = quick.encode(src, src_mask)
    assert (memory - reference.encode(src, src_mask)).abs().max() < 1e-5


def test_loss_and_gradients_agree():
    reference, quick = pair()
    quick.load_state_dict(reference.state_dict())
    src, tgt, *_ = batch()
    grads = []
    for model in (reference, quick):
        model.eval()  # dropout off, autograd on
        model.zero_grad()
        loss = batch_loss(model, src, tgt, label_smoothing=0.1)
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (ref_loss, ref_grads), (fast_loss, fast_grads) = grads
    assert torch.allclose(ref_loss, fast_loss, atol=1e-6)
    assert ref_grads.keys() == fast_grads.keys()
    for name, g in ref_grads.items():
        assert torch.allclose(fast_grads[name], g, rtol=1e-4, atol=1e-6), name


@pytest.mark.parametrize("norm_first", [False, True])
def test_packed_loss_skips_padding_and_changes_nothing(norm_first):
    """Loss and gradients on the real rows only equal those of the padded reference batch."""
    torch.manual_seed(0)
    padded = fast.EncoderDecoder(V, V, **SHAPE, norm_first=norm_first).eval()
    src, tgt, *_ = batch(32, seed=5)
    assert (src == data.PAD).any()  # the batch does have padding to skip
    padded.zero_grad()
    expected = batch_loss(padded, src, tgt, label_smoothing=0.1)
    expected.backward()
    expected_grads = {n: p.grad.clone() for n, p in padded.named_parameters()}
    padded.zero_grad()
    got = padded.packed_loss(src, tgt, label_smoothing=0.1, pad=data.PAD)
    got.backward()
    assert abs(got.item() - expected.item()) < 1e-6
    for name, param in padded.named_parameters():
        assert torch.allclose(param.grad, expected_grads[name], rtol=1e-4, atol=1e-6), name


def test_packed_rows_round_trip_through_the_head_grid():
    rows = torch.tensor([[True, True, False], [True, False, False]])
    packing = fast.Packed(rows)
    assert packing.index.tolist() == [0, 1, 3] and packing.position.tolist() == [0, 1, 0]
    x = torch.arange(2 * 3 * 4.0).view(2, 3, 4)  # (B, L, roles h d_k) with roles 1, h 2, d_k 2
    packed = packing.pack(x)  # (N, 4)
    assert packed.tolist() == [x[0, 0].tolist(), x[0, 1].tolist(), x[1, 0].tolist()]
    (heads,) = packing.to_heads(packed, roles=1, h=2)  # (B h, L, d_k)
    (expected,) = fast.PADDED.to_heads(x * rows.unsqueeze(-1), roles=1, h=2)
    assert torch.equal(heads, expected)  # the kept rows, zeros elsewhere
    assert torch.equal(packing.from_heads(heads, h=2), packed)


def test_attention_weights_can_be_recorded_and_match():
    reference, quick = pair()
    reference.eval(), quick.eval()
    src, _, tgt_in, src_mask, tgt_mask = batch(4)
    reference(src, tgt_in, src_mask, tgt_mask)
    with fast.record_attention(quick):
        quick(src, tgt_in, src_mask, tgt_mask)
    for ref_layer, fast_layer in zip(reference.decoder.layers, quick.decoder.layers, strict=True):
        assert fast_layer.cross_attn.attn.shape == (4, 4, 17, 16)
        assert torch.allclose(fast_layer.cross_attn.attn, ref_layer.cross_attn.attn, atol=1e-6)
    quick.decoder.layers[0].cross_attn.attn = None
    quick(src, tgt_in, src_mask, tgt_mask)  # outside the block nothing is kept
    assert quick.decoder.layers[0].cross_attn.attn is None


@pytest.mark.parametrize(("writer", "reader"), [("fast", "reference"), ("reference", "fast")])
def test_weights_saved_by_one_load_into_the_other(tmp_path, writer, reader):
    reference, quick = pair(seed=3)
    model = quick if writer == "fast" else reference
    with torch.no_grad():
        model.generator.bias.add_(1.0)  # not the initial weights any more
    save_model(tmp_path / "w.safetensors", model, ARCH)
    loaded, architecture = load_model(tmp_path / "w.safetensors", reader)
    assert architecture == ARCH and not loaded.training
    assert type(loaded).__module__.endswith("fast" if reader == "fast" else "transformer")
    src, _, tgt_in, src_mask, tgt_mask = batch(6)
    model.eval()
    assert (
        loaded(src, tgt_in, src_mask, tgt_mask) - model(src, tgt_in, src_mask, tgt_mask)
    ).abs().max() < 1e-5


def test_a_pre_ln_file_loads_in_both_and_a_mislabelled_one_in_neither(tmp_path):
    torch.manual_seed(0)
    pre = fast.EncoderDecoder(V, V, **SHAPE, norm_first=True)
    assert "encoder.norm.weight" in pre.state_dict()
    save_model(tmp_path / "pre.safetensors", pre, {**ARCH, "norm": "pre"})
    for impl in ("fast", "reference"):
        loaded, _ = load_model(tmp_path / "pre.safetensors", impl)
        assert loaded.encoder.norm is not None, impl
    save_model(tmp_path / "lie.safetensors", pre, ARCH)  # pre-LN weights labelled post
    with pytest.raises(ResultFileError, match="do not fit"):
        load_model(tmp_path / "lie.safetensors", "reference")


# The fast dropout -----------------------------------------------------------------------------


def test_fast_dropout_drops_the_right_fraction_and_keeps_the_mean():
    dropout = fast.Dropout(0.1)
    dropout.draw_bits_from(0)
    x = torch.ones(1000, 1000)
    y = dropout(x, training=True)
    dropped = float((y == 0).float().mean())
    p_eff = round(0.1 * 2**16) / 2**16
    assert abs(dropped - p_eff) < 5 * (p_eff * (1 - p_eff) / x.numel()) ** 0.5
    assert torch.allclose(y[y != 0], torch.tensor(1 / (1 - p_eff)))
    assert dropout(x, training=False) is x


def test_fast_dropout_is_reproducible_from_its_seed_and_its_saved_state():
    a, b = fast.Dropout(0.3), fast.Dropout(0.3)
    a.draw_bits_from(7), b.draw_bits_from(7)
    x = torch.randn(50, 33)
    assert torch.equal(a(x, True), b(x, True))
    saved = a.state()
    first = a(x, True)
    b.set_state(saved)
    assert torch.equal(b(x, True), first)
    assert not torch.equal(a(x, True), first)


def test_fast_dropout_gradient_is_the_mask():
    dropout = fast.Dropout(0.5)
    dropout.draw_bits_from(1)
    x = torch.randn(40, 40, requires_grad=True)
    y = dropout(x, True)
    y.sum().backward()
    assert torch.equal(x.grad == 0, y == 0)


def test_without_a_bit_source_it_is_pytorch_dropout():
    dropout = fast.Dropout(0.2)
    x = torch.ones(30, 30)
    torch.manual_seed(0)
    expected = F.dropout(x, 0.2, True)
    torch.manual_seed(0)
    assert torch.equal(dropout(x, True), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_attention_on_cuda_matches_the_reference():
    reference, quick = pair()
    reference, quick = reference.cuda().eval(), quick.cuda().eval()
    src, _, tgt_in, src_mask, tgt_mask = (t.cuda() for t in batch())
    expected = reference(src, tgt_in, src_mask, tgt_mask)
    assert (quick(src, tgt_in, src_mask, tgt_mask) - expected).abs().max() < 1e-4


def test_fast_dropout_mask_is_the_draw_threshold_rule():
    """The cheap float mask keeps exactly the elements whose 16-bit draw is >= the cut."""
    p = 0.1
    a, b = fast.Dropout(p), fast.Dropout(p)
    a.draw_bits_from(3), b.draw_bits_from(3)
    shape = (7, 13, 11)  # an element count that is not a multiple of 4
    keep = a.keep_multiplier(torch.Size(shape), torch.float32)
    n = keep.numel()
    draws = b.bits.random_raw((n + 3) // 4).view(np.int16)[:n].reshape(shape)
    cut = round(p * 2**16)
    expected = np.where(draws >= cut - 2**15, 2**16 / (2**16 - cut), 0.0).astype(np.float32)
    assert np.array_equal(keep.numpy(), expected)
    assert set(np.unique(expected)) == {0.0, np.float32(2**16 / (2**16 - cut))}
