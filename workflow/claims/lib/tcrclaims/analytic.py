"""Claim experiments that need no training: each returns plain numbers or arrays.

permutation_error        "attention alone treats a sequence like a bag of letters: shuffle
                         the input and the outputs are merely shuffled"
derangement              (helper) the shuffle for permutation_error: no residue stays put
softmax_jacobian_norms   "without 1/sqrt(d_k) the softmax turns spiky and its gradients
                         vanish": the size of the softmax gradient, row by row
scaling_gradients        the same claim on the toy chapter's draws (d_k, n_keys, seed)
scaling_ratios           its Jacobian ratio (scaled over unscaled) over many redraws
relative_position_fit    "the encoding of pos + k is a fixed linear function of the encoding
                         of pos": least-squares fit of that map and its residual
rotation_map             (helper) the exact map: one 2x2 rotation per sin/cos pair
rotation_residual        the same claim with the exact rotation map, as a cross-check
cosine_by_distance       "the similarity of two position encodings falls as they move apart"
first_rise               (helper) where, if anywhere, that similarity stops falling
attention_cost           "attention costs O(L^2)": time and memory of one forward pass
growth_exponent             (helper) the exponent of that growth, from a log-log fit

Shapes: n rows (residues, queries), m keys, d model width, L sequence length.
"""

from __future__ import annotations

import time
from math import sqrt

import numpy as np

from tcrformer.chapters.toy.compute import scaling_demo
from tcrformer.models.attention import multi_head_attention, softmax
from tcrformer.models.positional import PE_BASE, frequencies, sinusoidal_table

# --- 1. permutation equivariance -----------------------------------------------------------


def permutation_error(
    x: np.ndarray, heads, w_o: np.ndarray, permutation, position_columns=None
) -> float:
    """max |f(P x) - P f(x)|, f = multi-head attention output, P reorders rows of x (n, d).

    `permutation` is an index array: (P x)[i] = x[permutation[i]]. `position_columns`
    (a slice or index array, e.g. slice(4, None) for the toy X) stay in place: positions
    belong to the slot, so shuffling the sequence moves the letters, not their positions.
    Left as None, whole rows move and the error is ~0 whatever x holds, since each
    letter then takes its position with it. Without position information attention is
    permutation-equivariant, so the error is 0 up to float rounding.
    """
    order = np.asarray(permutation)
    if not np.array_equal(np.sort(order), np.arange(len(x))):
        raise ValueError(f"not a permutation of range({len(x)}): {order}")
    shuffled = x[order]  # (n, d)
    if position_columns is not None:
        shuffled[:, position_columns] = x[:, position_columns]  # positions stay in place
    shuffled_then_attended = multi_head_attention(shuffled, heads, w_o)[0]  # (n, d)
    attended_then_shuffled = multi_head_attention(x, heads, w_o)[0][order]  # (n, d)
    return float(np.abs(shuffled_then_attended - attended_then_shuffled).max())


def derangement(n: int, seed: int) -> np.ndarray:
    """(n,) permutation of range(n) with no fixed point, redrawn from default_rng(seed)
    until no index stays in place."""
    if n == 1:
        raise ValueError("a single item cannot be moved: no derangement of 1 exists")
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n)
        if not np.any(order == np.arange(n)):
            return order


# --- 2. why 1/sqrt(d_k) --------------------------------------------------------------------


def softmax_jacobian_norms(scores: np.ndarray) -> np.ndarray:
    """(n,) Frobenius norm of the softmax Jacobian J = diag(p) - p p^T of each row of
    scores (n, m), p = softmax(row). A saturated (one-hot) row has J ~ 0: no gradient."""
    p = softmax(np.asarray(scores, dtype=float))  # (n, m)
    eye = np.eye(p.shape[-1])
    jacobians = p[:, :, None] * eye - p[:, :, None] * p[:, None, :]  # (n, m, m)
    return np.linalg.norm(jacobians, axis=(1, 2))


def scaling_gradients(d_k: int, n_keys: int, seed: int) -> dict[str, float]:
    """Softmax gradient size and spikiness with and without the 1/sqrt(d_k), on the toy
    chapter's draws (scaling_demo: n_keys queries, then n_keys keys, width d_k)."""
    raw = scaling_demo(d_k, n_keys, seed)["raw_scores"]  # (n_keys, n_keys) q . k
    scaled = raw / np.sqrt(d_k)
    unscaled_norm = float(softmax_jacobian_norms(raw).mean())
    scaled_norm = float(softmax_jacobian_norms(scaled).mean())
    return {
        "jacobian_unscaled": unscaled_norm,
        "jacobian_scaled": scaled_norm,
        "ratio": scaled_norm / unscaled_norm,
        "max_weight_unscaled": float(softmax(raw).max()),
        "max_weight_scaled": float(softmax(scaled).max()),
    }


def scaling_ratios(d_k: int, n_keys: int, draws: int) -> list[float]:
    """The scaled-over-unscaled Jacobian norm ratio of scaling_gradients for seeds
    0..draws-1: one draw of random queries and keys is an anecdote, this is a distribution."""
    return [scaling_gradients(d_k, n_keys, seed)["ratio"] for seed in range(draws)]


# --- 3. relative positions are linear maps -------------------------------------------------


def _relative_residual(fitted: np.ndarray, target: np.ndarray) -> float:
    """||fitted - target||_F / ||target||_F."""
    return float(np.linalg.norm(fitted - target) / np.linalg.norm(target))


def _shifted_tables(d_model: int, k: int, n_positions: int, base: float):
    """(PE[0:n], PE[k:k+n]), each (n, d), from one float64 table."""
    if n_positions < d_model:
        raise ValueError(
            f"n_positions ({n_positions}) < d_model ({d_model}): any map would fit exactly"
        )
    table = sinusoidal_table(n_positions + k, d_model, base)  # (n + k, d)
    return table[:n_positions], table[k : k + n_positions]


def relative_position_fit(
    d_model: int, offsets, n_positions: int, base: float = PE_BASE
) -> dict[int, float]:
    """For each offset k: the least-squares M_k (d, d) with PE[p + k] ~ PE[p] M_k over
    p = 0..n_positions-1, and its relative residual (float64 rounding level if the claim
    holds). Returns {k: residual}."""
    residuals = {}
    for k in offsets:
        here, ahead = _shifted_tables(d_model, int(k), n_positions, base)
        m_k = np.linalg.lstsq(here, ahead, rcond=None)[0]  # (d, d)
        residuals[int(k)] = _relative_residual(here @ m_k, ahead)
    return residuals


def rotation_map(d_model: int, k: int, base: float = PE_BASE) -> np.ndarray:
    """(d, d) exact map PE[p] -> PE[p + k]: one 2x2 rotation by k * w_i per (sin, cos) pair,
    from sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b."""
    m_k = np.zeros((d_model, d_model))
    for i, angle in enumerate(k * frequencies(d_model, base)):
        c, s = np.cos(angle), np.sin(angle)
        m_k[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]  # rows: sin, cos
    return m_k


def rotation_residual(d_model: int, k: int, n_positions: int, base: float = PE_BASE) -> float:
    """Relative residual ||PE[:n] R_k - PE[k:k+n]||_F / ||PE[k:k+n]||_F of the exact
    rotation map R_k (rotation_map): the cross-check of relative_position_fit."""
    here, ahead = _shifted_tables(d_model, k, n_positions, base)
    return _relative_residual(here @ rotation_map(d_model, k, base), ahead)


# --- 4. similarity against distance --------------------------------------------------------


def cosine_by_distance(d_model: int, max_distance: int, base: float = PE_BASE) -> np.ndarray:
    """(max_distance + 1,) cosine similarity of PE[0] and PE[k], k = 0..max_distance."""
    table = sinusoidal_table(max_distance + 1, d_model, base)  # (k + 1, d)
    norms = np.linalg.norm(table, axis=1)
    return table @ table[0] / (norms * norms[0])


def first_rise(values) -> int | None:
    """First index k >= 1 with values[k] > values[k - 1]; None if the values never rise."""
    values = np.asarray(values)
    rises = np.flatnonzero(values[1:] > values[:-1])
    return int(rises[0]) + 1 if rises.size else None


# --- 5. the cost of attention --------------------------------------------------------------


def _attention_forward(q, k, v):
    """softmax(Q K^T / sqrt(d_k)) V, written out; q, k, v (1, h, L, d_k) torch tensors."""
    scores = q @ k.transpose(-2, -1) / sqrt(q.shape[-1])  # (1, h, L, L)
    return scores.softmax(dim=-1) @ v  # (1, h, L, d_k)


def _median_seconds(q, k, v, repeats: int) -> float:
    """Median wall time of `repeats` forward passes, after one warm-up pass."""
    _attention_forward(q, k, v)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _attention_forward(q, k, v)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _allocated_bytes(q, k, v) -> int:
    """Bytes allocated during one forward pass, from torch.profiler(profile_memory=True):
    the sum over ops of each op's own positive CPU allocation (self_cpu_memory_usage, net
    of what that op freed itself). The inputs, allocated before, are not counted."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _attention_forward(q, k, v)
    return int(sum(max(event.self_cpu_memory_usage, 0) for event in prof.events()))


def attention_cost(
    lengths, d_model: int = 64, num_heads: int = 4, repeats: int = 5, seed: int = 0
) -> list[dict]:
    """Forward cost of multi-head scaled dot-product attention, torch float32 on the CPU,
    batch 1, random Q, K, V (1, heads, L, d_model / heads), for each L in `lengths`.

    Returns one dict per length: {"length", "seconds" (median of `repeats` after one
    warm-up), "allocated_bytes" (see _allocated_bytes), "score_bytes" (heads * L * L * 4,
    the size of one float32 score matrix, for comparison)}. Benchmark outputs: the caller
    sets torch's thread count; times depend on the machine.
    """
    import torch

    if d_model % num_heads:
        raise ValueError(f"d_model ({d_model}) is not divisible by num_heads ({num_heads})")
    d_k = d_model // num_heads
    generator = torch.Generator().manual_seed(seed)
    rows = []
    with torch.inference_mode():
        for length in lengths:
            shape = (1, num_heads, int(length), d_k)
            q, k, v = (torch.randn(shape, generator=generator) for _ in range(3))
            rows.append(
                {
                    "length": int(length),
                    "seconds": _median_seconds(q, k, v, repeats),
                    "allocated_bytes": _allocated_bytes(q, k, v),
                    "score_bytes": num_heads * int(length) ** 2 * 4,
                }
            )
    return rows


def growth_exponent(lengths, values, min_length: int | None = None) -> float:
    """Slope of log(values) against log(lengths), by least squares: the p of values ~ L^p.
    Only lengths >= min_length take part when it is given."""
    lengths, values = np.asarray(lengths, dtype=float), np.asarray(values, dtype=float)
    keep = lengths >= min_length if min_length is not None else np.ones(len(lengths), bool)
    if keep.sum() < 2:
        raise ValueError(f"need at least two lengths to fit an exponent, got {keep.sum()}")
    slope, _ = np.polyfit(np.log(lengths[keep]), np.log(values[keep]), 1)
    return float(slope)
