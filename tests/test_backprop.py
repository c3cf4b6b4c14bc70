"""The hand-written step against autograd: the same loss and every gradient, for every switch
a claims arm uses, and the step's chunks, clipping and Adam against torch's own.

The oracle is the fast model (models/fast.py, itself held to the reference by test_fast.py)
under autograd, drawing its dropout masks from the same generator in the same order.
"""

from __future__ import annotations

import math

import pytest
import torch

from tcrformer.models import backprop, fast, flat
from tcrformer.training import data
from tcrformer.training.loop import make_optimizer, make_step, new_run
from tcrformer.training.model import build_model

torch.set_num_threads(1)
V, PAD = data.VOCAB_SIZE, data.PAD
SHAPE = dict(d_model=32, num_heads=4, d_ff=64, num_layers=2)

# Each switch of a claims arm, and the paper's recipe: (model switches, dropout, smoothing)
CASES = {
    "paper": ({}, 0.1, 0.1),
    "pre_ln": ({"norm_first": True}, 0.1, 0.1),
    "no_scaling": ({"score_scale": False}, 0.1, 0.1),
    "no_positions": ({"positions": False}, 0.1, 0.1),
    "no_dropout": ({}, 0.0, 0.1),
    "no_smoothing": ({}, 0.1, 0.0),
    "default_init": ({"init": "default"}, 0.1, 0.1),
    "deep_pre_ln": ({"norm_first": True, "num_layers": 4}, 0.1, 0.0),
}


def hand_and_autograd(switches: dict, dropout: float, smoothing: float, seed: int = 0):
    """(loss, {name: gradient}) of one batch, by the hand-written pass and by autograd."""
    shape = {**SHAPE, **switches}
    torch.manual_seed(seed)
    model = fast.EncoderDecoder(V, V, dropout=dropout, **shape).train()
    src, tgt = data.random_batch(24, 8, 16, torch.Generator().manual_seed(seed + 1))
    model.dropout.draw_bits_from(99)
    loss = model.packed_loss(src, tgt, smoothing, PAD)
    loss.backward()
    oracle = {name: p.grad.clone() for name, p in model.named_parameters()}

    layout = flat.Layout.of(model)
    weights, grads = torch.zeros(layout.size), torch.full((layout.size,), math.nan)
    flat.bind(model, weights, layout)
    draws = fast.Dropout(dropout)
    draws.draw_bits_from(99)
    flags = backprop.Switches(
        shape["num_heads"], shape.get("norm_first", False), shape.get("positions", True),
        shape.get("score_scale", True), smoothing,
    )  # fmt: skip
    network = backprop.Network(
        flat.Weights.of(weights, layout, shape["d_model"]), flags, model.pe,
        backprop.DropoutMasks(draws),
    )  # fmt: skip
    with torch.no_grad():
        hand_loss = network.forward(src, tgt, int((tgt[:, 1:] != PAD).sum()), PAD)
        network.backward(flat.Weights.of(grads, layout, shape["d_model"]))
    return (loss.detach(), oracle), (hand_loss, layout.views(grads))


@pytest.mark.parametrize("case", CASES)
def test_every_gradient_is_autograds(case):
    """Loss and every parameter's gradient as autograd computes them, to float32 rounding:
    each gradient within 1e-5 of the largest gradient entry of the whole model."""
    (loss, oracle), (hand_loss, hand) = hand_and_autograd(*CASES[case])
    assert torch.allclose(hand_loss, loss, rtol=1e-6, atol=1e-6), (hand_loss, loss)
    assert set(hand) == set(oracle)
    scale = max(g.abs().max() for g in oracle.values())
    for name, gradient in oracle.items():
        assert torch.isfinite(hand[name]).all(), name  # every gradient written
        assert (hand[name] - gradient).abs().max() <= 1e-5 * scale, name


def test_the_oracle_sees_a_wrong_gradient():
    """The negative control: a gradient missing one term (the residual's) is caught."""
    original = backprop.Network.sublayer_backward

    def without_residual(self, dy, saved, d_norm, f_backward):
        saved_norm, saved_f, mask = saved
        d_sum = backprop.normalise_backward(dy, saved_norm, d_norm)
        return f_backward(backprop.DropoutMasks.backward(d_sum, mask), saved_f)  # no `d_sum +`

    backprop.Network.sublayer_backward = without_residual
    try:
        with pytest.raises(AssertionError):
            test_every_gradient_is_autograds("paper")
    finally:
        backprop.Network.sublayer_backward = original


def test_the_flat_buffer_holds_each_attentions_projections_side_by_side():
    torch.manual_seed(0)
    model = fast.EncoderDecoder(V, V, **SHAPE)
    layout = flat.Layout.of(model)
    buffer = torch.zeros(layout.size)
    flat.bind(model, buffer, layout)
    assert layout.size == sum(p.numel() for p in model.parameters())
    weights = flat.Weights.of(buffer, layout, SHAPE["d_model"])
    attention = model.decoder.layers[1].cross_attn
    qkv = torch.cat([attention.w_q.weight, attention.w_k.weight, attention.w_v.weight])
    assert torch.equal(weights.decoder[1].attention[1].qkv, qkv)
    attention.w_k.bias.data.fill_(7.0)  # a parameter is a view of the buffer
    assert (weights.decoder[1].attention[1].qkv_bias[SHAPE["d_model"] :][:32] == 7).all()


@pytest.mark.parametrize("chunks", [1, 3])
def test_a_step_is_autograds_step_clip_and_adam_included(chunks):
    """Without dropout, hand-written steps (their chunks summed, the norm clipped, fused
    Adam) give autograd's losses and norms, and move every weight as autograd's steps with
    torch's Adam do."""
    from test_ways_in import tiny

    recipe = tiny(dropout=0.0, chunks=chunks, grad_clip=0.5)
    run = new_run(recipe, torch.device("cpu"))
    assert run.hand is not None
    torch.manual_seed(recipe.seed)
    model = build_model(recipe.architecture(), "fast")
    model.load_state_dict(run.model.state_dict())
    optimizer, scheduler = make_optimizer(recipe, model, torch.device("cpu"))
    autograd_step = make_step(recipe, model, optimizer, scheduler, torch.device("cpu"))
    try:
        for step in (1, 2, 3):
            src, tgt = run.strings.next_batch()
            loss, norm = run.hand(src, tgt, step)
            expected_loss, expected_norm = autograd_step(src, tgt, step)
            assert torch.allclose(loss, expected_loss, atol=1e-6)
            assert torch.allclose(norm, expected_norm, rtol=1e-5)
        for name, value in model.state_dict().items():
            if name.endswith("w_k.bias"):
                # Its true gradient is 0 (a key bias adds the same q.b to a query's every
                # score), so both gradients are rounding noise, and Adam, which divides by
                # its size, turns either into full steps of its own sign.
                continue
            # Adam divides by each gradient's own size, so entries near zero carry float32
            # differences into the weights; a step of the wrong rate or sign moves them ~0.1.
            assert (run.model.state_dict()[name] - value).abs().max() < 2e-3, name
    finally:
        run.close()
