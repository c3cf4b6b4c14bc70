"""Chapter toy: the hand-built Transformer reading one CDR3 (explainer sections 1-6 and 8).

Everything is computed from the chapter's settings: the sequence, the position table, the
four hand-set heads (given as data), the random weights of the pre-LN block and the
sqrt(d_k) demonstration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tcrformer.chapters.toy import figure_data
from tcrformer.chapters.toy.settings import D_K, Settings
from tcrformer.models.attention import (
    attention_scores,
    leaders,
    multi_head_attention,
    pre_ln_block,
    scaled_dot_product_attention,
    softmax,
)
from tcrformer.models.chemistry import (
    CHEMISTRY_FEATURES,
    clock_columns,
    feature_names,
    toy_input,
)
from tcrformer.models.counting import block_weights
from tcrformer.models.positional import frequencies


def sparse_matrix(entries: Sequence, names: list[str]) -> np.ndarray:
    """(d, D_K) matrix from [feature, column, value] triples; every other entry is 0."""
    w = np.zeros((len(names), D_K))
    for feature, column, value in entries:
        w[names.index(feature), column] = value
    return w


def rotation_query(spec: Mapping, names: list[str], pe_dims: int, pe_base: float) -> np.ndarray:
    """Query that turns one position clock by `offset` positions and scales it.

    With the key reading (sin a_j, cos a_j) of the same clock, q_i . k_j =
    scale * cos(a_i + offset * f - a_j): largest where j = i + offset.
    """
    clock = spec["rotate"]
    pair = 0 if clock == "fast" else pe_dims // 2 - 1
    theta = spec["offset"] * frequencies(pe_dims, pe_base)[pair]
    s, c = np.sin(theta), np.cos(theta)
    rotation = spec["scale"] * np.array([[c, -s], [s, c]])  # rows: sin, cos of the clock
    w = np.zeros((len(names), D_K))
    sine, cosine = clock_columns(clock)
    w[names.index(sine)] = rotation[0]
    w[names.index(cosine)] = rotation[1]
    return w


def head_weights(spec, names: list[str], pe_dims: int, pe_base: float):
    """(W_Q, W_K, W_V) of one hand-set head (settings.Head), each (d, D_K)."""
    q = spec.Q
    w_q = (
        rotation_query(q, names, pe_dims, pe_base)
        if isinstance(q, Mapping)
        else sparse_matrix(q, names)
    )
    return w_q, sparse_matrix(spec.K, names), sparse_matrix(spec.V, names)


@dataclass
class RandomBlock:
    """The random W_O, W_1, W_2 of the pre-LN block (biases are zero)."""

    w_o: np.ndarray  # (h * d_k, d)
    w_1: np.ndarray  # (d, d_ff)
    w_2: np.ndarray  # (d_ff, d)

    @property
    def b_1(self):
        return np.zeros(self.w_1.shape[1])

    @property
    def b_2(self):
        return np.zeros(self.w_2.shape[1])


def random_block(d: int, n_heads: int, d_ff: int, seed: int, std: float) -> RandomBlock:
    """Draw W_O, W_1, W_2 from normal(0, std), in that order, from one seeded generator."""
    rng = np.random.default_rng(seed)
    w_o = rng.normal(0.0, std, (n_heads * D_K, d))
    w_1 = rng.normal(0.0, std, (d, d_ff))
    w_2 = rng.normal(0.0, std, (d_ff, d))
    return RandomBlock(w_o, w_1, w_2)


def torch_block_difference(x, heads, weights: RandomBlock, eps: float) -> tuple[float, np.ndarray]:
    """Copy the same weights into torch.nn.TransformerEncoderLayer(norm_first, gelu).

    Returns (max |NumPy - PyTorch|, PyTorch output). torch is imported here only.
    """
    import torch
    from torch import nn

    d, d_ff = x.shape[1], weights.w_1.shape[1]
    layer = nn.TransformerEncoderLayer(
        d_model=d, nhead=len(heads), dim_feedforward=d_ff, dropout=0.0,
        activation="gelu", norm_first=True, batch_first=True, layer_norm_eps=eps,
    )  # fmt: skip
    layer.eval()

    def stacked(role: int) -> np.ndarray:  # torch stores Linear weights as (out, in)
        return np.hstack([h[role] for h in heads]).T

    def t(a):
        return torch.tensor(np.asarray(a), dtype=torch.float32)

    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(t(np.vstack([stacked(0), stacked(1), stacked(2)])))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(t(weights.w_o.T))
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(t(weights.w_1.T))
        layer.linear1.bias.zero_()
        layer.linear2.weight.copy_(t(weights.w_2.T))
        layer.linear2.bias.zero_()
        out = layer(t(x)[None])[0].double().numpy()
    ours = pre_ln_block(
        x, heads, weights.w_o, weights.w_1, weights.b_1, weights.w_2, weights.b_2, eps
    )
    return float(np.abs(ours - out).max()), out


def scaling_demo(d_k: int, n_keys: int, seed: int) -> dict[str, np.ndarray | float]:
    """n_keys random queries against n_keys random keys, entries ~ N(0, 1).

    Raw dot products have variance d_k, so their typical size is sqrt(2 d_k / pi) and the
    softmax saturates: one key takes almost all of a row. Dividing by sqrt(d_k) brings the
    variance back to 1 and the weights stay spread out. Reported: the mean |raw score|
    and the largest weight anywhere in the (n_keys, n_keys) map, unscaled and scaled.
    """
    rng = np.random.default_rng(seed)
    queries = rng.standard_normal((n_keys, d_k))
    keys = rng.standard_normal((n_keys, d_k))
    raw = attention_scores(queries, keys)  # (n, n)
    return {
        "raw_scores": raw,
        "weights_unscaled": softmax(raw),
        "weights_scaled": softmax(raw / np.sqrt(d_k)),
        "raw_score_spread": float(np.abs(raw).mean()),
    }


def toy_values(settings: Settings) -> dict[str, Any]:
    """Rule toy_values: the chapter's values (keyed as in the golden file), its arrays and
    the figures' labels, by output name."""
    sequence, pe_dims, pe_base = settings.sequence, settings.pe_dims, settings.pe_base
    names = feature_names(pe_dims)
    x = toy_input(sequence, pe_dims, pe_base)  # (n, d)
    n, d = x.shape
    heads = [head_weights(spec, names, pe_dims, pe_base) for spec in settings.heads]

    # One head, one residue: the focus residue's row of head 1, step by step.
    focus = settings.focus_position - 1
    residue = sequence[focus]
    w_q, w_k, w_v = heads[0]
    raw = attention_scores(x @ w_q, x @ w_k)
    z, weights_1 = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    tied = leaders(weights_1[focus])
    partner = int(tied[0]) if len(tied) == 1 else None  # none when the row is a tie

    # All heads with W_O = identity: the context vector of every residue.
    context, maps = multi_head_attention(x, heads, np.eye(len(heads) * D_K, d))

    # One pre-LN block with random W_O, W_1, W_2, checked against PyTorch.
    blk = settings.block
    weights = random_block(d, len(heads), blk.d_ff, blk.seed, blk.init_std)
    y = pre_ln_block(x, heads, weights.w_o, weights.w_1, weights.b_1, weights.w_2,
                     weights.b_2, blk.layer_norm_eps)  # fmt: skip
    max_diff, _ = torch_block_difference(x, heads, weights, blk.layer_norm_eps)
    counts = block_weights(d, blk.d_ff)

    sc = settings.scaling
    demo = scaling_demo(sc.d_k, sc.n_keys, sc.seed)

    values = {
        "toy.sequence": sequence,
        "toy.X": x,
        f"toy.head1.raw_scores_{residue}": raw[focus],
        f"toy.head1.scaled_scores_{residue}": raw[focus] / np.sqrt(D_K),
        f"toy.head1.weights_{residue}": weights_1[focus],
        f"toy.head1.z_{residue}": z[focus],
        "toy.head1.focus_position": focus + 1,
        "toy.head1.partner_position": None if partner is None else partner + 1,
        "toy.block.output_shape": list(y.shape),
        "toy.block.attention_params": counts["attention"],
        "toy.block.ffn_params": counts["ffn"],
        "toy.block.max_abs_diff_numpy_vs_torch": max_diff,
        "toy.attention_map.pairs": n * n,
        "toy.attention_map.pairs_1000_residues": settings.long_protein_length**2,
        "toy.attention_map.row_sums_max_error": float(np.abs(maps.sum(-1) - 1).max()),
        "scaling.d_k": sc.d_k,
        "scaling.n_keys": sc.n_keys,
        "scaling.max_weight_unscaled": float(demo["weights_unscaled"].max()),
        "scaling.max_weight_scaled": float(demo["weights_scaled"].max()),
        "scaling.raw_score_spread": demo["raw_score_spread"],
    }
    if partner is not None:
        values[f"toy.head1.weight_{residue}_to_{sequence[partner]}"] = weights_1[focus, partner]
    # The four S's of the explainer's receptor (any residue that occurs more than once, in general):
    # identical chemistry before, different context vectors after.
    for i, a in enumerate(sequence):
        if sequence.count(a) > 1:
            values[f"toy.multihead.{a}{i + 1}_before"] = x[i, : len(CHEMISTRY_FEATURES)]
            values[f"toy.multihead.{a}{i + 1}_after"] = context[i]
    return {
        "values": values,
        "X": x,
        "attention_weights": maps,  # (h, n, n)
        "context": context,  # (n, h * d_k)
        "block_output": y,
        "head1_queries": x @ w_q,
        "head1_keys": x @ w_k,
        "scaling_raw_scores": demo["raw_scores"],
        "scaling_weights_unscaled": demo["weights_unscaled"],
        "scaling_weights_scaled": demo["weights_scaled"],
        "figure_data": figure_data.toy_labels(settings, names),
    }
