"""Scaled dot-product attention and the pre-LN Transformer block, in NumPy.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Shapes: n residues, d model width, h heads of width d_k.
"""

from __future__ import annotations

from math import erf

import numpy as np


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax; subtracting the row maximum keeps exp() from overflowing."""
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


TIE_MARGIN = 0.1
"""How far, in scaled score, a row's top key must lead every other key to be its clear winner.

Softmax weights stand in the ratio exp(score_i - score_j), so the margin is a ratio of weights,
the same for a row of any length: a top weight less than e^0.1 (about 1.1) times the runner-up's
is a tie, a bar under a tenth taller than the next. Any positive margin catches an exact tie (a
uniform row: every score equal); a clear winner of the toy heads leads by far more (the
arginine's glutamate gets 17 times the weight of any other key)."""


def leaders(row: np.ndarray, margin: float = TIE_MARGIN) -> np.ndarray:
    """0-based positions of the keys tied for a row's largest weight: within a factor e^-margin
    of it. One position is a clear winner; several share the row's attention; all of them mean
    it is spread evenly."""
    row = np.asarray(row, dtype=float)
    return np.flatnonzero(row >= row.max() * np.exp(-margin))


def attention_scores(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """(n, n) raw dot products q_i . k_j, before scaling."""
    return queries @ keys.T


def scaled_dot_product_attention(queries, keys, values):
    """Return (context (n, d_v), weights (n, n)) for one head."""
    d_k = keys.shape[-1]
    scores = attention_scores(queries, keys) / np.sqrt(d_k)
    weights = softmax(scores)
    return weights @ values, weights


def head(x: np.ndarray, w_q, w_k, w_v):
    """One attention head: project x (n, d) to queries, keys and values, then attend."""
    return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


def multi_head_attention(x: np.ndarray, heads, w_o: np.ndarray):
    """Concat(head_1 .. head_h) W_O. `heads` is a list of (W_Q, W_K, W_V), each (d, d_k).

    Returns (output (n, d), weights (h, n, n)).
    """
    outputs = [head(x, *w) for w in heads]
    concat = np.hstack([context for context, _ in outputs])  # (n, h * d_k)
    return concat @ w_o, np.stack([weights for _, weights in outputs])


def layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Normalise each row to mean 0, variance 1 (no learned scale or shift)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


_erf = np.vectorize(erf)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU: x * Phi(x), with Phi the standard normal CDF."""
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def feed_forward(x, w_1, b_1, w_2, b_2):
    """Position-wise FFN: W_2 GELU(W_1 x + b_1) + b_2, applied to every row on its own."""
    return gelu(x @ w_1 + b_1) @ w_2 + b_2


def pre_ln_block(x, heads, w_o, w_1, b_1, w_2, b_2, eps: float = 1e-5):
    """x <- x + MHA(LN(x)); x <- x + FFN(LN(x))   (pre-LayerNorm, as in ESM-2)."""
    x = x + multi_head_attention(layer_norm(x, eps), heads, w_o)[0]  # residues talk
    return x + feed_forward(layer_norm(x, eps), w_1, b_1, w_2, b_2)  # each residue thinks
