"""The encoder-decoder's training step written out by hand: the forward and backward passes
over one flat buffer of parameters and one of gradients, with no autograd tape.

`fast.py` runs the model under autograd, which records every operation and replays it
backwards. At this model's size (d = 64, rows of at most 17 tokens) a step is mostly that
bookkeeping and small memory passes, not arithmetic. Here each layer's backward pass is
written beside its forward pass, as in a textbook, and every matrix product goes to
`products.gemm` (OpenBLAS's portable kernels when they are loaded).

The weights and their gradients are views of flat buffers (models.flat). Shapes, for one
chunk of b strings: the source rows are the Ns real source tokens, the
target rows the Nt target positions with a token to predict (fast.Packed). Every
position-wise layer works on those packed rows, (N, d). Attention alone lays its rows out
on the (b, L) grid, and reads each head in place as a strided (L, d_k) matrix of that grid:

    qkv grid (b, L, 3d):  [ Q_1 .. Q_h | K_1 .. K_h | V_1 .. V_h ],  head j at columns j d_k
    scores   (b, h, Lq, Lk) = Q_j K_j^T / sqrt(d_k) + mask bias,  softmax over the keys

The same weights, switches and dropout draws as fast.EncoderDecoder (the oracle,
tests/test_backprop.py): Post-LN or Pre-LN, positions on or off, the 1/sqrt(d_k) on or off,
dropout and label smoothing at any rate. Dropout draws from a dropout.Dropout, in the order the
fast model draws, so the two see the same masks from the same generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from tcrformer.models import fast
from tcrformer.models.dropout import DropoutMasks
from tcrformer.models.flat import (
    AttentionWeights,
    FeedForwardWeights,
    NormWeights,
    Weights,
)
from tcrformer.models.products import gemm
from tcrformer.models.transformer import decoder_io, make_masks

EPS = 1e-5  # LayerNorm's, as nn.LayerNorm's default


# The parts of a step ---------------------------------------------------------------------------


def affine(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """x W^T + b: (N, i) -> (N, o)."""
    y = b.expand(x.shape[0], -1).contiguous()
    return gemm(x, w.t(), y, beta=1.0)


def affine_backward(dy: Tensor, x: Tensor, w: Tensor, dw: Tensor, db: Tensor) -> Tensor:
    """Writes dW = dy^T x and db = the column sums of dy; returns dx = dy W."""
    gemm(dy.t(), x, dw)
    torch.sum(dy, 0, out=db)
    return gemm(dy, w, dy.new_empty(dy.shape[0], w.shape[1]))


def normalise(x: Tensor, n: NormWeights) -> tuple[Tensor, tuple]:
    y, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), n.weight, n.bias, EPS)
    return y, (x, mean, rstd, n)


def normalise_backward(dy: Tensor, saved: tuple, dn: NormWeights) -> Tensor:
    x, mean, rstd, n = saved
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(
        dy, x, (x.shape[-1],), mean, rstd, n.weight, n.bias, (True, True, True)
    )
    dn.weight.copy_(dw)
    dn.bias.copy_(db)
    return dx


class AttentionPass:
    """Multi-head attention on packed rows; every head is a column block of a grid, read in
    place as a strided matrix (one batched product per head, over the b strings).

    Self-attention projects x once to the grid [Q K V]; cross-attention projects x to [Q]
    and the encoder's rows to [K V].
    """

    def __init__(self, h: int, scale: float, dropout: DropoutMasks):
        self.h, self.scale, self.dropout = h, scale, dropout

    def heads(self, grid: Tensor, first: int, d_k: int) -> list[Tensor]:
        """The h (b, L, d_k) views of the grid's column block that starts at `first`."""
        return [grid[:, :, first + j * d_k : first + (j + 1) * d_k] for j in range(self.h)]

    def forward(self, x: Tensor, memory: Tensor | None, w: AttentionWeights, scope: fast.Scope):
        d = w.out.shape[0]
        d_k = d // self.h
        if memory is None:  # self-attention: one (N, 3d) projection
            q_grid = kv_grid = scope.queries.to_grid(affine(x, w.qkv, w.qkv_bias))
            k_first = d
        else:
            q_grid = scope.queries.to_grid(affine(x, w.qkv[:d], w.qkv_bias[:d]))
            kv_grid = scope.keys.to_grid(affine(memory, w.qkv[d:], w.qkv_bias[d:]))
            k_first = 0
        q, k = self.heads(q_grid, 0, d_k), self.heads(kv_grid, k_first, d_k)
        v = self.heads(kv_grid, k_first + d, d_k)
        scores = scope.bias.view(-1, self.h, *scope.bias.shape[1:]).clone()  # (b, h, Lq, Lk)
        for j in range(self.h):
            gemm(q[j], k[j].transpose(1, 2), scores[:, j], alpha=self.scale, beta=1.0)
        weights = torch.softmax(scores, -1)
        dropped, mask = self.dropout(weights)
        out = q_grid.new_empty(*scope.queries.grid, d)
        heads_out = self.heads(out, 0, d_k)
        for j in range(self.h):
            gemm(dropped[:, j], v[j], heads_out[j])
        o = scope.queries.from_grid(out)  # (Nq, d)
        saved = (x, memory, q_grid, kv_grid, k_first, weights, dropped, mask, o, w, scope)
        return affine(o, w.out, w.out_bias), saved

    def backward(self, dy: Tensor, saved: tuple, dw: AttentionWeights):
        """-> (dx, d memory or None); writes the attention's gradients into dw.

        Per head, with Wd = dropout(W):  dWd = dO V^T,  dV = Wd^T dO,
        dS = softmax'(dropout'(dWd)),  dQ = scale dS K,  dK = scale dS^T Q."""
        x, memory, q_grid, kv_grid, k_first, weights, dropped, mask, o, w, scope = saved
        d = w.out.shape[0]
        d_k = d // self.h
        d_o = scope.queries.to_grid(affine_backward(dy, o, w.out, dw.out, dw.out_bias))
        q, k = self.heads(q_grid, 0, d_k), self.heads(kv_grid, k_first, d_k)
        v = self.heads(kv_grid, k_first + d, d_k)
        d_q_grid = torch.empty_like(q_grid)
        d_kv_grid = d_q_grid if memory is None else torch.empty_like(kv_grid)
        dq, dk = self.heads(d_q_grid, 0, d_k), self.heads(d_kv_grid, k_first, d_k)
        dv = self.heads(d_kv_grid, k_first + d, d_k)
        d_out = self.heads(d_o, 0, d_k)
        d_dropped = torch.empty_like(weights)
        for j in range(self.h):
            gemm(d_out[j], v[j].transpose(1, 2), d_dropped[:, j])
            gemm(dropped[:, j].transpose(1, 2), d_out[j], dv[j])
        d_weights = DropoutMasks.backward(d_dropped, mask)
        d_scores = torch._softmax_backward_data(d_weights, weights, -1, weights.dtype)
        for j in range(self.h):
            gemm(d_scores[:, j], k[j], dq[j], alpha=self.scale)
            gemm(d_scores[:, j].transpose(1, 2), q[j], dk[j], alpha=self.scale)
        if memory is None:
            d_qkv = scope.queries.from_grid(d_q_grid)
            return affine_backward(d_qkv, x, w.qkv, dw.qkv, dw.qkv_bias), None
        d_q = scope.queries.from_grid(d_q_grid)
        dx = affine_backward(d_q, x, w.qkv[:d], dw.qkv[:d], dw.qkv_bias[:d])
        d_kv = scope.keys.from_grid(d_kv_grid)
        return dx, affine_backward(d_kv, memory, w.qkv[d:], dw.qkv[d:], dw.qkv_bias[d:])


def ffn(x: Tensor, w: FeedForwardWeights, dropout: DropoutMasks) -> tuple[Tensor, tuple]:
    """W_2 dropout(relu(W_1 x + b_1)) + b_2: (N, d) -> (N, d_ff) -> (N, d)."""
    hidden, mask = dropout(affine(x, w.w_1, w.b_1).relu_())
    return affine(hidden, w.w_2, w.b_2), (x, hidden, mask, w)


def ffn_backward(dy: Tensor, saved: tuple, dw: FeedForwardWeights) -> Tensor:
    x, hidden, mask, w = saved
    d_hidden = affine_backward(dy, hidden, w.w_2, dw.w_2, dw.b_2)
    # relu's gradient passes where its output is positive; dropped elements are 0 as well
    if mask is None:
        d_pre = torch.ops.aten.threshold_backward(d_hidden, hidden, 0)
    else:
        d_pre = mask.relu_backward(d_hidden, hidden)
    return affine_backward(d_pre, x, w.w_1, dw.w_1, dw.b_1)


def target_rows(tgt_out: Tensor, pad: int) -> fast.Packed:
    """The target positions the loss scores: those holding a token, not padding."""
    return fast.Packed(tgt_out != pad)


@dataclass(frozen=True)
class Switches:
    """The network's parts that the claims' arms change (the paper's: the defaults)."""

    num_heads: int
    norm_first: bool = False  # Pre-LN: x + dropout(f(LN(x))), and a final LN per stack
    positions: bool = True  # add the sinusoidal positional encoding
    score_scale: bool = True  # divide the scores by sqrt(d_k)
    label_smoothing: float = 0.0


def smoothed_loss(log_probs: Tensor, target: Tensor, epsilon: float) -> Tensor:
    """Sum over the rows of -(1 - eps) log p(target) - eps/V sum_v log p(v): the
    label-smoothed cross-entropy (as F.cross_entropy's), not yet divided by the count."""
    picked = log_probs.gather(1, target[:, None]).sum()
    if epsilon == 0:
        return -picked
    return -(1 - epsilon) * picked - epsilon / log_probs.shape[1] * log_probs.sum()


def smoothed_loss_backward(log_probs: Tensor, target: Tensor, epsilon: float, scale: float):
    """d loss / d logits of smoothed_loss times `scale`: (softmax - q) scale, with
    q = (1 - eps) onehot(target) + eps/V."""
    grad = log_probs.exp()
    if epsilon:
        grad.sub_(epsilon / log_probs.shape[1])
    grad.scatter_add_(1, target[:, None], grad.new_full((len(target), 1), -(1 - epsilon)))
    return grad.mul_(scale)


class Network:
    """One chunk's forward and backward pass through the encoder-decoder.

        loss = network.forward(src, tgt, n_tokens)   this chunk's part of the batch's mean loss
        network.backward(grads)                      its gradient, written into `grads`

    `n_tokens` is the whole batch's count of target tokens, so the chunks' losses (and
    gradients) sum to the batch's mean. Every gradient is written once, never added to:
    `grads` need not be zeroed.
    """

    def __init__(self, weights: Weights, switches: Switches, pe: Tensor, dropout: DropoutMasks):
        self.w, self.switches, self.pe, self.dropout = weights, switches, pe, dropout
        d = weights.src_embed.shape[1]
        self.h = switches.num_heads
        scale = (d // self.h) ** -0.5 if switches.score_scale else 1.0
        self.multihead = AttentionPass(self.h, scale, dropout)
        self.sqrt_d = math.sqrt(d)

    # A sub-layer with its residual connection and LayerNorm ------------------------------

    def sublayer(self, x: Tensor, norm: NormWeights, f) -> tuple[Tensor, tuple]:
        """Post-LN: LN(x + dropout(f(x))); Pre-LN: x + dropout(f(LN(x))).
        f: x -> (f(x), what its backward pass needs)."""
        if self.switches.norm_first:
            normed, saved_norm = normalise(x, norm)
            out, saved_f = f(normed)
            y, mask = self.dropout.residual(x, out)
            return y, (saved_norm, saved_f, mask)
        out, saved_f = f(x)
        summed, mask = self.dropout.residual(x, out)
        y, saved_norm = normalise(summed, norm)
        return y, (saved_norm, saved_f, mask)

    def sublayer_backward(self, dy: Tensor, saved: tuple, d_norm: NormWeights, f_backward):
        """f_backward: (d f(x), saved) -> dx."""
        saved_norm, saved_f, mask = saved
        if self.switches.norm_first:
            d_normed = f_backward(DropoutMasks.backward(dy, mask), saved_f)
            return dy + normalise_backward(d_normed, saved_norm, d_norm)
        d_sum = normalise_backward(dy, saved_norm, d_norm)
        return d_sum + f_backward(DropoutMasks.backward(d_sum, mask), saved_f)

    def attention(self, w: AttentionWeights, scope: fast.Scope, memory: Tensor | None = None):
        """The sub-layer f of self-attention (memory None) or of cross-attention."""
        return lambda x: self.multihead.forward(x, memory, w, scope)

    def attention_backward(self, dw: AttentionWeights):
        """Its backward pass; cross-attention's gradient of the memory adds up in d_memory."""

        def backward(d_out: Tensor, saved: tuple) -> Tensor:
            dx, d_memory = self.multihead.backward(d_out, saved, dw)
            if d_memory is not None:
                self.d_memory = d_memory if self.d_memory is None else self.d_memory + d_memory
            return dx

        return backward

    def feed_forward(self, w: FeedForwardWeights):
        return lambda x: ffn(x, w, self.dropout)

    def feed_forward_backward(self, dw: FeedForwardWeights):
        return lambda d_out, saved: ffn_backward(d_out, saved, dw)

    # Embeddings ---------------------------------------------------------------------------

    def embed(self, table: Tensor, tokens: Tensor, rows: fast.Packed):
        """dropout(E[token] sqrt(d) + PE[position]) of the packed rows: (N, d)."""
        x = table.index_select(0, tokens).mul_(self.sqrt_d)
        if self.switches.positions:
            x = x + self.pe.index_select(0, rows.position)
        return self.dropout(x)

    def embed_backward(self, dx: Tensor, mask: Tensor | None, tokens: Tensor, d_table: Tensor):
        d_table.zero_().index_add_(0, tokens, DropoutMasks.backward(dx, mask) * self.sqrt_d)

    # The whole pass -----------------------------------------------------------------------

    def forward(self, src: Tensor, tgt: Tensor, n_tokens: int, pad: int) -> Tensor:
        """src (b, Ls), tgt (b, Lt + 1), `pad` their padding token -> the chunk's summed
        token losses / n_tokens."""
        tgt_in, tgt_out = decoder_io(tgt)  # teacher forcing: shifted right
        (b, Ls), Lt = src.shape, tgt_in.shape[1]
        src_rows, tgt_rows = fast.Packed(src != pad), target_rows(tgt_out, pad)
        src_mask, tgt_mask = make_masks(src, tgt_in, pad)  # (b, 1, Ls), (b, Lt, Lt)
        source = fast.Scope(fast.score_bias(src_mask, self.h, b, Ls), src_rows, src_rows)
        masked = fast.Scope(fast.score_bias(tgt_mask, self.h, b, Lt), tgt_rows, tgt_rows)
        cross = fast.Scope(fast.score_bias(src_mask, self.h, b, Lt), tgt_rows, src_rows)
        self.src_tokens = src_rows.pack(src)
        self.tgt_tokens = tgt_rows.pack(tgt_in)
        self.target = tgt_rows.pack(tgt_out)
        self.n_tokens = n_tokens

        w, self.saved = self.w, {"encoder": [], "decoder": []}
        x, self.saved["src_embed"] = self.embed(w.src_embed, self.src_tokens, src_rows)
        for layer in w.encoder:
            x, s_attn = self.sublayer(x, layer.norms[0], self.attention(layer.attention[0], source))
            x, s_ffn = self.sublayer(x, layer.norms[1], self.feed_forward(layer.ffn))
            self.saved["encoder"].append((s_attn, s_ffn))
        memory, self.saved["encoder_norm"] = self.final_norm(x, w.encoder_norm)

        y, self.saved["tgt_embed"] = self.embed(w.tgt_embed, self.tgt_tokens, tgt_rows)
        for layer in w.decoder:
            self_attn, cross_attn = layer.attention
            y, s_self = self.sublayer(y, layer.norms[0], self.attention(self_attn, masked))
            y, s_cross = self.sublayer(y, layer.norms[1], self.attention(cross_attn, cross, memory))
            y, s_ffn = self.sublayer(y, layer.norms[2], self.feed_forward(layer.ffn))
            self.saved["decoder"].append((s_self, s_cross, s_ffn))
        y, self.saved["decoder_norm"] = self.final_norm(y, w.decoder_norm)
        self.top = y  # (Nt, d)
        self.log_probs = torch.log_softmax(affine(y, w.generator, w.generator_bias), -1)
        return smoothed_loss(self.log_probs, self.target, self.switches.label_smoothing) / n_tokens

    def final_norm(self, x: Tensor, norm: NormWeights | None):
        return (x, None) if norm is None else normalise(x, norm)

    def final_norm_backward(self, dx: Tensor, saved: tuple | None, d_norm: NormWeights | None):
        return dx if saved is None else normalise_backward(dx, saved, d_norm)

    def backward(self, grads: Weights) -> None:
        """The gradient of forward's loss with respect to every weight, into `grads`."""
        w, saved = self.w, self.saved
        d_logits = smoothed_loss_backward(
            self.log_probs, self.target, self.switches.label_smoothing, 1.0 / self.n_tokens
        )
        dy = affine_backward(d_logits, self.top, w.generator, grads.generator, grads.generator_bias)
        dy = self.final_norm_backward(dy, saved["decoder_norm"], grads.decoder_norm)
        self.d_memory = None
        for g, (s_self, s_cross, s_ffn) in zip(
            grads.decoder[::-1], saved["decoder"][::-1], strict=True
        ):
            dy = self.sublayer_backward(dy, s_ffn, g.norms[2], self.feed_forward_backward(g.ffn))
            dy = self.sublayer_backward(
                dy, s_cross, g.norms[1], self.attention_backward(g.attention[1])
            )
            dy = self.sublayer_backward(
                dy, s_self, g.norms[0], self.attention_backward(g.attention[0])
            )
        self.embed_backward(dy, saved["tgt_embed"], self.tgt_tokens, grads.tgt_embed)

        dx = self.final_norm_backward(self.d_memory, saved["encoder_norm"], grads.encoder_norm)
        for g, (s_attn, s_ffn) in zip(grads.encoder[::-1], saved["encoder"][::-1], strict=True):
            dx = self.sublayer_backward(dx, s_ffn, g.norms[1], self.feed_forward_backward(g.ffn))
            dx = self.sublayer_backward(
                dx, s_attn, g.norms[0], self.attention_backward(g.attention[0])
            )
        self.embed_backward(dx, saved["src_embed"], self.src_tokens, grads.src_embed)
