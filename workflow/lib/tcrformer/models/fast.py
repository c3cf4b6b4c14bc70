"""The study-notes encoder-decoder again, built for speed: the same math, the same weights.

`transformer.py` is written to be read; this module is written to be run. Every parameter
has the same name, shape and initialisation order as there, so a state dict saved by one
loads into the other, and the same seed draws the same initial weights. What changes is
how the arithmetic is issued:

- Q, K and V come out of one matmul (the weights are concatenated on the fly, so the
  parameters, and the state dict, stay as they are), laid out straight away as one batch
  of (L, d_k) matrices per role;
- all heads attend at once, written out (scores, softmax, dropout, weighted values), with
  the mask added as a precomputed score bias inside the score product (a `baddbmm`). On
  the CPU, at L <= 18, that beats PyTorch's fused kernel. On a GPU it is the deterministic
  choice: `F.scaled_dot_product_attention` with a float mask and dropout picks its kernel
  by heuristics that change with the GPU and the torch version (memory-efficient, whose
  backward is deterministic only in torch's strict mode; cuDNN's, which has no
  deterministic backward), while these are cuBLAS products, a softmax and a dropout, each
  deterministic under core.numerics.deterministic_cuda;
- training on the CPU skips the padding (`packed_loss`): every position-wise layer runs on
  the real rows only, and attention scatters them into its (B, L) grid and gathers back;
- LayerNorm is `F.layer_norm`; the loss is one fused cross-entropy call;
- dropout can draw its random bits from a fast NumPy generator (`Dropout.draw_bits_from`),
  which on the CPU costs a fraction of PyTorch's per-element Bernoulli draws;
- every matrix product (the linear maps, the scores, the weighted values) goes through
  models.products, which runs it on the portable OpenBLAS kernels when the numerics have
  loaded them (core.numerics), and is torch's own op otherwise.

The same switches as the reference: `norm_first=True` gives a Pre-LN stack (x +
sublayer(LN(x)), then a final LayerNorm per stack), used by the speedrun recipe; and, for the
claims chapter's arms, `positions=False` (no positional encoding), `score_scale=False` (no
1/sqrt(d_k)) and `init` (transformer.initialise). tests/test_fast.py holds
the two to the same numbers under each switch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from tcrformer.models import kernels, products
from tcrformer.models.dropout import Dropout
from tcrformer.models.transformer import (
    MASKED_SCORE,
    decoder_io,
    initialise,
    make_masks,
    positional_table,
    token_loss,
)


class Linear(nn.Linear):
    """nn.Linear (same parameters, initialisation and state-dict keys) whose product is
    models.products.linear."""

    def forward(self, x: Tensor) -> Tensor:
        return products.linear(x, self.weight, self.bias)


class Padded:
    """Rows laid out as (B, L, C), padding included: what the evaluation API passes around."""

    def to_heads(self, x: Tensor, roles: int, h: int) -> Tensor:
        """(B, L, roles h d_k) -> (roles, B h, L, d_k): per role, one batch of head matrices."""
        B, L, _ = x.shape
        x = x.view(B, L, roles, h, -1).permute(2, 0, 3, 1, 4)  # (roles, B, h, L, d_k)
        return x.reshape(roles, B * h, L, -1)

    def from_heads(self, heads: Tensor, h: int) -> Tensor:
        """(B h, L, d_k) -> (B, L, h d_k): the heads side by side again."""
        Bh, L, d_k = heads.shape
        return heads.view(Bh // h, h, L, d_k).transpose(1, 2).reshape(Bh // h, L, h * d_k)


PADDED = Padded()


class Packed:
    """Only the rows that matter, as (N, C): every position-wise layer (the linear maps,
    LayerNorm, dropout, the residual sums) then skips the padding. Attention alone needs
    the (B, L) grid: each of its Q, K, V rows is written straight to its place among the
    heads, zeros elsewhere, and its output rows are read back from there (no grid to permute
    and copy, either way, nor in the backward pass).
    """

    def __init__(self, rows: Tensor):  # rows: (B, L) bool, the positions to compute
        self.grid = rows.shape
        self.index = rows.flatten().nonzero().squeeze(1)  # (N,) positions in the B*L grid
        self.position = self.index % rows.size(1)  # (N,) position within its sequence
        self.sequence = self.index // rows.size(1)  # (N,) which sequence
        self.row_of: np.ndarray | None = None  # to_grid's map, made on first use

    def pack(self, x: Tensor) -> Tensor:  # (B, L, ...) -> (N, ...)
        return x.flatten(0, 1).index_select(0, self.index)

    def to_heads(self, x: Tensor, roles: int, h: int) -> Tensor:
        """(N, roles h d_k) -> (roles, B h, L, d_k), zeros at the rows not kept."""
        B, L = self.grid
        heads = x.new_zeros(roles, B, h, L, x.size(-1) // (roles * h))
        heads[:, self.sequence, :, self.position] = x.view(len(self.index), roles, h, -1)
        return heads.view(roles, B * h, L, -1)

    def from_heads(self, heads: Tensor, h: int) -> Tensor:
        """(B h, L, d_k) -> (N, h d_k): the kept rows, heads side by side."""
        B, L = self.grid
        return heads.view(B, h, L, -1)[self.sequence, :, self.position].flatten(1)

    def to_grid(self, x: Tensor) -> Tensor:
        """(N, C) -> (B, L, C), zeros where there is no row (models.backprop's layout).
        x must be contiguous float32; one pass (models.kernels)."""
        B, L = self.grid
        if self.row_of is None:  # grid row -> packed row, -1 for padding
            self.row_of = np.full(B * L, -1, dtype=np.int64)
            self.row_of[self.index.numpy()] = np.arange(len(self.index))
        grid = x.new_empty(B, L, x.shape[1])
        kernels.rows_to_grid(x.numpy(), self.row_of, grid.view(B * L, -1).numpy())
        return grid

    def from_grid(self, grid: Tensor) -> Tensor:
        """(B, L, C) -> (N, C), from a contiguous float32 grid."""
        rows = grid.new_empty(len(self.index), grid.shape[-1])
        kernels.grid_to_rows(
            grid.view(-1, grid.shape[-1]).numpy(), self.index.numpy(), rows.numpy()
        )
        return rows


@dataclass
class Scope:
    """What one kind of attention may see, and how the rows of its inputs are laid out."""

    bias: Tensor  # (B*h, Lq, Lk): added to the scores, 0 or MASKED_SCORE (score_bias)
    queries: Padded | Packed  # layout of the rows of x
    keys: Padded | Packed  # layout of the rows of memory (or of x, in self-attention)


class Attention(nn.Module):
    """Multi-head attention: one QKV matmul, all heads in one batched product."""

    def __init__(self, d_model: int, num_heads: int, dropout: Dropout):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.h, self.d_k, self.dropout = num_heads, d_model // num_heads, dropout
        self.w_q, self.w_k = Linear(d_model, d_model), Linear(d_model, d_model)
        self.w_v, self.w_o = Linear(d_model, d_model), Linear(d_model, d_model)
        self.record = False  # set by record_attention(): keep the weights in .attn
        self.attn: Tensor | None = None
        self.scale = self.d_k**-0.5  # the 1/sqrt(d_k) of the scores (1.0: the scaling off)
        self.keep: Tensor | None = None  # (h,) multiplier of each head's output: 0 ablates it

    def _project(
        self, x: Tensor, layers: tuple[nn.Linear, ...], layout: Padded | Packed
    ) -> tuple[Tensor, ...]:
        """x [W_1; W_2; ..]^T + b in one matmul, split per role and head: (B h, L, d_k) each."""
        weight = torch.cat([layer.weight for layer in layers])  # (n d, d)
        bias = torch.cat([layer.bias for layer in layers])  # (n d,)
        return layout.to_heads(products.linear(x, weight, bias), len(layers), self.h).unbind(0)

    def forward(self, x: Tensor, memory: Tensor | None, scope: Scope) -> Tensor:
        """x: (B, Lq, d) or packed (Nq, d); memory: the same for the keys, None in
        self-attention. Returns x's shape."""
        if memory is None:
            q, k, v = self._project(x, (self.w_q, self.w_k, self.w_v), scope.queries)
        else:
            (q,) = self._project(x, (self.w_q,), scope.queries)
            k, v = self._project(memory, (self.w_k, self.w_v), scope.keys)
        heads = self._attend(q, k, v, scope.bias)
        if self.keep is not None:  # (B h, Lq, d_k): zero the ablated heads' outputs
            heads = (heads.view(-1, self.h, *heads.shape[1:]) * self.keep.view(-1, 1, 1)).view_as(
                heads
            )
        return self.w_o(scope.queries.from_heads(heads, self.h))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, bias: Tensor) -> Tensor:
        """softmax(Q K^T / sqrt(d_k) + bias) V, written out: (B h, Lq, d_k)."""
        scores = products.baddbmm(bias, q, k.transpose(1, 2), self.scale)  # (B h, Lq, Lk)
        weights = scores.softmax(-1)
        if self.record:
            self.attn = weights.detach().view(-1, self.h, *weights.shape[1:])  # (B, h, Lq, Lk)
        return products.bmm(self.dropout(weights, self.training), v)


def score_bias(mask: Tensor, num_heads: int, batch: int, lq: int) -> Tensor:
    """(B|1, Lq|1, Lk) bool mask -> (B*h, Lq, Lk) float scores to add: 0 or MASKED_SCORE.

    Built once per mask and forward pass, then shared by every layer that uses the mask;
    adding it inside the score product (baddbmm) saves a masked_fill per layer.
    """
    Lk = mask.size(-1)
    bias = torch.zeros(mask.shape, device=mask.device).masked_fill(~mask, MASKED_SCORE)
    bias = bias.unsqueeze(1).expand(batch, num_heads, lq, Lk)
    return bias.reshape(batch * num_heads, lq, Lk)


class FeedForward(nn.Module):
    """w_2(dropout(relu(w_1 x))), applied to every position on its own."""

    def __init__(self, d_model: int, d_ff: int, dropout: Dropout):
        super().__init__()
        self.w_1, self.w_2 = Linear(d_model, d_ff), Linear(d_ff, d_model)
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

    def forward(self, x: Tensor, source: Scope) -> Tensor:  # (B, Ls, d) or (Ns, d)
        sub = (self.dropout, self.norm_first)
        x = self.norm1.add(x, lambda y: self.self_attn(y, None, source), *sub)
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

    def forward(self, x: Tensor, memory: Tensor, causal: Scope, cross: Scope) -> Tensor:
        sub = (self.dropout, self.norm_first)
        x = self.norm1.add(x, lambda y: self.self_attn(y, None, causal), *sub)
        x = self.norm2.add(x, lambda y: self.cross_attn(y, memory, cross), *sub)
        return self.norm3.add(x, self.ffn, *sub)


class Stack(nn.Module):
    """N identical layers; a Pre-LN stack ends with one more LayerNorm (key `norm`)."""

    def __init__(self, layers: list[nn.Module], d_model: int, norm_first: bool):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, *memory_and_scopes) -> Tensor:
        for layer in self.layers:
            x = layer(x, *memory_and_scopes)
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
        positions=True,
        score_scale=True,
        init="xavier",
    ):
        super().__init__()
        self.d_model, self.num_heads, self.positions = d_model, num_heads, positions
        self.dropout = Dropout(dropout)  # shared by every site; not a module, not saved
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.register_buffer("pe", positional_table(max_len, d_model), persistent=False)
        args = (d_model, num_heads, d_ff, self.dropout, norm_first)
        self.encoder = Stack([EncoderLayer(*args) for _ in range(num_layers)], d_model, norm_first)
        self.decoder = Stack([DecoderLayer(*args) for _ in range(num_layers)], d_model, norm_first)
        self.generator = Linear(d_model, tgt_vocab)
        initialise(self, init)
        if not score_scale:
            for module in self.modules():
                if isinstance(module, Attention):
                    module.scale = 1.0

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, pe: Tensor) -> Tensor:
        """dropout(E[tokens] sqrt(d_model) + PE): (B, L) -> (B, L, d), or (N,) -> (N, d).
        Without positions (a claims arm), the embedding alone."""
        x = embedding(tokens) * math.sqrt(self.d_model)
        if self.positions:
            x = x + pe
        return self.dropout(x, self.training)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:  # -> (B, Ls, d)
        source = Scope(score_bias(src_mask, self.num_heads, *src.shape), PADDED, PADDED)
        return self.encoder(self._embed(self.src_embed, src, self.pe[: src.size(1)]), source)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor):
        h, (B, Lt) = self.num_heads, tgt_in.shape
        causal = Scope(score_bias(tgt_mask, h, B, Lt), PADDED, PADDED)  # (B h, Lt, Lt)
        cross = Scope(score_bias(src_mask, h, B, Lt), PADDED, PADDED)  # (B h, Lt, Ls)
        x = self._embed(self.tgt_embed, tgt_in, self.pe[:Lt])
        return self.generator(self.decoder(x, memory, causal, cross))  # (B, Lt, tgt_vocab)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_mask: Tensor):
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)

    def packed_loss(self, src: Tensor, tgt: Tensor, label_smoothing: float, pad: int) -> Tensor:
        """The teacher-forced training loss (as train.batch_loss), computed on real rows only.

        The rows are the source residues and the target positions with a token to predict:
        BOS + L residues in, L residues + EOS out. The EOS fed in at position L + 1 is left
        out too: its prediction is padding, and under the causal mask no kept row sees it.
        About a quarter of a batch of 8-16 residue strings is padding.
        """
        tgt_in, tgt_out = decoder_io(tgt)  # (B, Lt) each
        src_mask, tgt_mask = make_masks(src, tgt_in, pad)
        src_rows, tgt_rows = Packed(src != pad), Packed(tgt_out != pad)
        h, (B, Lt) = self.num_heads, tgt_in.shape
        source = Scope(score_bias(src_mask, h, *src.shape), src_rows, src_rows)
        causal = Scope(score_bias(tgt_mask, h, B, Lt), tgt_rows, tgt_rows)
        cross = Scope(score_bias(src_mask, h, B, Lt), tgt_rows, src_rows)
        x = self._embed(self.src_embed, src_rows.pack(src), self.pe[src_rows.position])
        memory = self.encoder(x, source)  # (Ns, d)
        y = self._embed(self.tgt_embed, tgt_rows.pack(tgt_in), self.pe[tgt_rows.position])
        logits = self.generator(self.decoder(y, memory, causal, cross))  # (Nt, tgt_vocab)
        target = tgt_rows.pack(tgt_out)  # (Nt,)
        return token_loss(logits, target, label_smoothing, pad)


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
