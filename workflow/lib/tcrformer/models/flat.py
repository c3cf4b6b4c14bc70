"""The encoder-decoder's weights as one flat buffer: the hand-written step's (models.backprop)
parameters and gradients, and the fast model's parameters as views of it.

One contiguous buffer makes the optimizer one call over every weight, the gradients of a
chunk one block of shared memory, and their sum over the chunks one pass. Each attention's
W_Q, W_K and W_V sit side by side, so [W_Q; W_K; W_V] is one matrix and x [W_Q; W_K; W_V]^T
one product. `Weights` reads a buffer by role: the same layout gives the weights and,
over a buffer of gradients, their gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

# The fused order of an attention's parameters in the flat buffer: W_Q, W_K, W_V and their
# biases side by side, so that [W_Q; W_K; W_V] (and [W_K; W_V]) is one (n d, d) matrix.
ATTENTION_ORDER = ("w_q.weight", "w_k.weight", "w_v.weight",
                   "w_q.bias", "w_k.bias", "w_v.bias", "w_o.weight", "w_o.bias")  # fmt: skip


# The flat buffer ------------------------------------------------------------------------------


def flat_order(names: list[str]) -> list[str]:
    """The model's parameter names in their flat-buffer order: the model's own, except that
    each attention's eight parameters follow ATTENTION_ORDER."""
    order: list[str] = []
    for name in names:
        if name.endswith("w_q.weight"):
            prefix = name.removesuffix("w_q.weight")
            order += [prefix + leaf for leaf in ATTENTION_ORDER]
        elif name not in order:
            order.append(name)
    return order


@dataclass(frozen=True)
class Layout:
    """Where each parameter lives in the flat buffer: name -> (offset, shape)."""

    places: dict[str, tuple[int, torch.Size]]
    size: int

    @classmethod
    def of(cls, model: nn.Module) -> Layout:
        shapes = {name: p.shape for name, p in model.named_parameters()}
        places, offset = {}, 0
        for name in flat_order(list(shapes)):
            places[name] = (offset, shapes[name])
            offset += shapes[name].numel()
        return cls(places, offset)

    def views(self, flat: Tensor) -> dict[str, Tensor]:
        return {name: flat[o : o + s.numel()].view(s) for name, (o, s) in self.places.items()}

    def span(self, flat: Tensor, first: str, count: int, shape: tuple[int, ...]) -> Tensor:
        """`count` floats from parameter `first` on, as `shape` (several fused parameters)."""
        offset = self.places[first][0]
        return flat[offset : offset + count].view(shape)


def bind(model: nn.Module, flat: Tensor, layout: Layout) -> None:
    """Copy the model's parameters into `flat` and make each one a view of its place there:
    the model (its state dict, evaluation, saving) and the step then share the weights."""
    views = layout.views(flat)
    with torch.no_grad():
        for name, param in model.named_parameters():
            views[name].copy_(param)
            param.data = views[name]


@dataclass(frozen=True)
class AttentionWeights:
    qkv: Tensor  # (3d, d): [W_Q; W_K; W_V]
    qkv_bias: Tensor  # (3d,)
    out: Tensor  # (d, d): W_O
    out_bias: Tensor  # (d,)


@dataclass(frozen=True)
class FeedForwardWeights:
    w_1: Tensor  # (d_ff, d)
    b_1: Tensor
    w_2: Tensor  # (d, d_ff)
    b_2: Tensor


@dataclass(frozen=True)
class NormWeights:
    weight: Tensor  # (d,)
    bias: Tensor


@dataclass(frozen=True)
class LayerWeights:
    attention: tuple[AttentionWeights, ...]  # self-attention; in the decoder, cross-attention
    ffn: FeedForwardWeights
    norms: tuple[NormWeights, ...]  # one per sub-layer


@dataclass(frozen=True)
class Weights:
    """The model's parameters (or their gradients) as views of one flat buffer, by role."""

    src_embed: Tensor  # (V, d)
    tgt_embed: Tensor  # (V, d)
    encoder: tuple[LayerWeights, ...]
    decoder: tuple[LayerWeights, ...]
    encoder_norm: NormWeights | None  # Pre-LN only: each stack's final LayerNorm
    decoder_norm: NormWeights | None
    generator: Tensor  # (V, d)
    generator_bias: Tensor  # (V,)

    @classmethod
    def of(cls, flat: Tensor, layout: Layout, d: int) -> Weights:
        v = layout.views(flat)

        def attention(p: str) -> AttentionWeights:
            return AttentionWeights(
                layout.span(flat, f"{p}.w_q.weight", 3 * d * d, (3 * d, d)),
                layout.span(flat, f"{p}.w_q.bias", 3 * d, (3 * d,)),
                v[f"{p}.w_o.weight"], v[f"{p}.w_o.bias"],
            )  # fmt: skip

        def norm(p: str) -> NormWeights | None:
            return NormWeights(v[f"{p}.weight"], v[f"{p}.bias"]) if f"{p}.weight" in v else None

        def layer(p: str, attentions: tuple[str, ...], norms: int) -> LayerWeights:
            names = ("w_1.weight", "w_1.bias", "w_2.weight", "w_2.bias")
            ffn = FeedForwardWeights(*(v[f"{p}.ffn.{n}"] for n in names))
            return LayerWeights(
                tuple(attention(f"{p}.{a}") for a in attentions),
                ffn,
                tuple(norm(f"{p}.norm{i}") for i in range(1, norms + 1)),
            )

        def stack(name: str, attentions, norms) -> tuple[LayerWeights, ...]:
            count = sum(
                1 for n in v if n.startswith(f"{name}.layers.") and n.endswith("norm1.weight")
            )
            return tuple(layer(f"{name}.layers.{i}", attentions, norms) for i in range(count))

        return cls(
            v["src_embed.weight"], v["tgt_embed.weight"],
            stack("encoder", ("self_attn",), 2), stack("decoder", ("self_attn", "cross_attn"), 3),
            norm("encoder.norm"), norm("decoder.norm"), v["generator.weight"], v["generator.bias"],
        )  # fmt: skip
