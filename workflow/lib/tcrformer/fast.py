"""The study-notes encoder-decoder again, built for speed: the same math, the same weights.

`transformer.py` is written to be read; this module is written to be run. Every parameter
has the same name, shape and initialisation order as there, so a state dict saved by one
loads into the other, and the same seed draws the same initial weights. What changes is
how the arithmetic is issued:

- Q, K and V come out of one matmul (the weights are concatenated on the fly, so the
  parameters, and the state dict, stay as they are);
- all heads attend at once; on a GPU through `F.scaled_dot_product_attention`, on the CPU
  written out, which at these lengths (L <= 18) beats PyTorch's fused CPU kernel;
- LayerNorm is `F.layer_norm`; the loss is one fused cross-entropy call;
- dropout can draw its random bits from a fast NumPy generator (`Dropout.draw_bits_from`),
  which on the CPU costs about a fifth of PyTorch's per-element Bernoulli draws.

One option the reference does not have: `norm_first=True` gives a Pre-LN stack
(x + sublayer(LN(x)), then a final LayerNorm per stack), used by the speedrun recipe only.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .transformer import MASKED_SCORE, sinusoidal_table

_DRAW_LEVELS = 1 << 16  # dropout draws are 16-bit integers


class Dropout:
    """Inverted dropout, one object shared by every dropout site of a model.

    By default it is `F.dropout`. After `draw_bits_from(seed)` it reads 16-bit draws from a
    NumPy SFC64 generator instead (four per 64-bit word) and drops an element when its draw
    falls below round(p * 2^16): the drop probability is that count / 2^16 (0.1 -> 0.100006)
    and the kept elements are scaled by the exact 1 / (1 - p) of that probability.
    The generator's state is plain integers, so a checkpoint can hold it.
    """

    def __init__(self, p: float):
        self.p = p
        self.bits: np.random.SFC64 | None = None

    def draw_bits_from(self, seed: int | None) -> None:
        self.bits = None if seed is None else np.random.SFC64(seed)

    def state(self) -> dict | None:
        """The generator's state as plain integers (None when using F.dropout)."""
        if self.bits is None:
            return None
        state = self.bits.state
        return {
            "words": [int(w) for w in state["state"]["state"]],
            "has_uint32": int(state["has_uint32"]),
            "uinteger": int(state["uinteger"]),
        }

    def set_state(self, state: dict) -> None:
        self.bits = np.random.SFC64()
        self.bits.state = {
            "bit_generator": "SFC64",
            "state": {"state": np.array(state["words"], dtype=np.uint64)},
            "has_uint32": state["has_uint32"],
            "uinteger": state["uinteger"],
        }

    def __call__(self, x: Tensor, training: bool) -> Tensor:
        if not training or self.p == 0:
            return x
        if self.bits is None or x.device.type != "cpu":
            return F.dropout(x, self.p, True)
        n = x.numel()
        words = torch.from_numpy(self.bits.random_raw((n + 3) // 4))  # (ceil(n/4),) uint64
        draws = words.view(torch.int16)[:n].view(x.shape)  # uniform on [-2^15, 2^15)
        cut = round(self.p * _DRAW_LEVELS)
        scale = _DRAW_LEVELS / (_DRAW_LEVELS - cut)
        keep = torch.where(draws >= cut - _DRAW_LEVELS // 2, scale, 0.0).to(x.dtype)  # one pass
        return x * keep


class Attention(nn.Module):
    """Multi-head attention: one QKV matmul, all heads in one batched product."""

    def __init__(self, d_model: int, num_heads: int, dropout: Dropout):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.h, self.d_k, self.dropout = num_heads, d_model // num_heads, dropout
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.record = False  # set by record_attention(): keep the weights in .attn
        self.attn: Tensor | None = None

    def _project(self, x: Tensor, layers: tuple[nn.Linear, ...]) -> tuple[Tensor, ...]:
        """x [W_1; W_2; ..]^T + b in one matmul, split per role and per head: (B, h, L, d_k)."""
        weight = torch.cat([layer.weight for layer in layers])  # (n d, d)
        bias = torch.cat([layer.bias for layer in layers])  # (n d,)
        B, L, _ = x.shape
        parts = F.linear(x, weight, bias).view(B, L, len(layers), self.h, self.d_k)
        return parts.permute(2, 0, 3, 1, 4).unbind(0)

    def forward(self, x: Tensor, memory: Tensor | None, mask: Tensor) -> Tensor:
        """x: (B, Lq, d); memory: (B, Lk, d), or None for self-attention; mask (B, Lq|1, Lk)."""
        B, Lq, d = x.shape
        if memory is None:
            q, k, v = self._project(x, (self.w_q, self.w_k, self.w_v))
        else:
            (q,) = self._project(x, (self.w_q,))
            k, v = self._project(memory, (self.w_k, self.w_v))
        mask = mask.unsqueeze(1)  # (B, 1, Lq|1, Lk): the same mask for every head
        if x.is_cuda and not self.record:
            p = self.dropout.p if self.training else 0.0
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            heads = self._attend(q, k, v, mask)
        return self.w_o(heads.transpose(1, 2).reshape(B, Lq, d))  # (B, Lq, d)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        """softmax(Q K^T / sqrt(d_k)) V, written out: (B, h, Lq, d_k)."""
        scores = (q * self.d_k**-0.5) @ k.transpose(-2, -1)  # (B, h, Lq, Lk)
        weights = scores.masked_fill(~mask, MASKED_SCORE).softmax(-1)
        if self.record:
            self.attn = weights.detach()
        return self.dropout(weights, self.training) @ v


class FeedForward(nn.Module):
    """w_2(dropout(relu(w_1 x))), applied to every position on its own."""

    def __init__(self, d_model: int, d_ff: int, dropout: Dropout):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:  # (B, L, d) -> (B, L, d_ff) -> (B, L, d)
        return self.w_2(self.dropout(F.relu(self.w_1(x)), self.training))


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm (weight, bias, eps 1e-5) that can also wrap a sub-layer: Add & Norm."""

    def add(self, x: Tensor, sublayer, dropout: Dropout, norm_first: bool) -> Tensor:
        if norm_first:  # Pre-LN: x + dropout(sublayer(LN(x)))
            return x + dropout(sublayer(self(x)), self.training)
        return self(x + dropout(sublayer(x), self.training))  # Post-LN, the paper


class EncoderLayer(nn.Module):
    """Self-attention -> Add & Norm -> FFN -> Add & Norm."""

    def __init__(self, d_model, num_heads, d_ff, dropout: Dropout, norm_first=False):
        super().__init__()
        self.self_attn = Attention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout, self.norm_first = dropout, norm_first

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:  # (B, Ls, d)
        sub = (self.dropout, self.norm_first)
        x = self.norm1.add(x, lambda y: self.self_attn(y, None, src_mask), *sub)
        return self.norm2.add(x, self.ffn, *sub)


class DecoderLayer(nn.Module):
    """Masked self-attention -> cross-attention -> FFN, each followed by Add & Norm."""

    def __init__(self, d_model, num_heads, d_ff, dropout: Dropout, norm_first=False):
        super().__init__()
        self.self_attn = Attention(d_model, num_heads, dropout)
        self.cross_attn = Attention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model) for _ in range(3))
        self.dropout, self.norm_first = dropout, norm_first

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        sub = (self.dropout, self.norm_first)
        x = self.norm1.add(x, lambda y: self.self_attn(y, None, tgt_mask), *sub)
        x = self.norm2.add(x, lambda y: self.cross_attn(y, memory, src_mask), *sub)
        return self.norm3.add(x, self.ffn, *sub)


class Stack(nn.Module):
    """N identical layers; a Pre-LN stack ends with one more LayerNorm (key `norm`)."""

    def __init__(self, layers: list[nn.Module], d_model: int, norm_first: bool):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, *masks_and_memory: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, *masks_and_memory)
        return self.norm(x) if self.norm is not None else x


class EncoderDecoder(nn.Module):
    """Same constructor, methods and state-dict keys as transformer.EncoderDecoder."""

    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        num_layers=6,
        dropout=0.1,
        max_len=5000,
        norm_first=False,
    ):
        super().__init__()
        self.d_model = d_model
        self.dropout = Dropout(dropout)  # shared by every site; not a module, not saved
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        args = (d_model, num_heads, d_ff, self.dropout, norm_first)
        self.encoder = Stack([EncoderLayer(*args) for _ in range(num_layers)], d_model, norm_first)
        self.decoder = Stack([DecoderLayer(*args) for _ in range(num_layers)], d_model, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab)
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def _embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        """dropout(E[tokens] sqrt(d_model) + PE[:L]): (B, L) -> (B, L, d)."""
        x = embedding(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.size(1)]
        return self.dropout(x, self.training)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:  # -> (B, Ls, d)
        return self.encoder(self._embed(self.src_embed, src), src_mask)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor):
        x = self.decoder(self._embed(self.tgt_embed, tgt_in), memory, src_mask, tgt_mask)
        return self.generator(x)  # (B, Lt, tgt_vocab)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_mask: Tensor):
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)


@contextlib.contextmanager
def record_attention(model: nn.Module) -> Iterator[None]:
    """Within the block every fast Attention keeps its last weights in `.attn` (B, h, Lq, Lk)."""
    modules = [m for m in model.modules() if isinstance(m, Attention)]
    for module in modules:
        module.record = True
    try:
        yield
    finally:
        for module in modules:
            module.record = False
