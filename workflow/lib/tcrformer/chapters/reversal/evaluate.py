"""Test the trained model: held-out strings, the CDR3, and where its cross-attention looks.

Exact reversal (as in seed section 10.9): greedy decoding from <bos>; a string of length L
counts when the L letters and the <eos> after them all match the target.

Anti-diagonal: writing the k-th letter of the answer (k = 0..L-1), the decoder should look
at source position L-1-k. From the cross-attention map of one decoder layer while it writes
the CDR3 (teacher-forced on its own greedy output), we average the map over the heads, then
average A[k, L-1-k] over the L letter rows. The row that writes <eos> is kept in the saved
map but not in the mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from tcrformer.chapters.reversal.data import BOS, EOS, PAD, decode, encode, heldout_set
from tcrformer.models.fast import record_attention
from tcrformer.models.transformer import greedy_decode, make_masks


@dataclass
class Evaluation:
    heldout_exact: int
    heldout_n: int
    cdr3_input: str
    cdr3_output: str
    cross_attention: np.ndarray  # (h, L + 1, L): heads x decoder rows (letters, <eos>) x source
    antidiagonal_mean: float


def exact_reversals(model: nn.Module, src: Tensor, tgt: Tensor, batch_size: int = 500) -> int:
    """How many rows the model reverses exactly (letters and the <eos> right after them)."""
    correct = 0
    for start in range(0, src.size(0), batch_size):
        s, t = src[start : start + batch_size], tgt[start : start + batch_size]
        out = greedy_decode(model, s, max_len=t.size(1) - 1, bos=BOS, eos=EOS, pad_idx=PAD)
        written = torch.full_like(t, PAD)
        written[:, : out.size(1)] = out[:, : t.size(1)]
        scored = t != PAD  # BOS, the letters and EOS; BOS always matches
        correct += int(((written == t) | ~scored).all(dim=1).sum())
    return correct


def cross_attention(model: nn.Module, src: Tensor, written: Tensor, layer: int) -> Tensor:
    """Cross-attention weights (h, Lt, Ls) of decoder layer `layer` (1-based) for one string.

    src (1, Ls); written (1, 1 + n): <bos> and the tokens the model wrote.
    """
    tgt_in = written[:, :-1]  # the decoder reads <bos> + its own letters
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)
    with torch.no_grad(), record_attention(model):  # a no-op for the reference
        model.eval()
        model(src, tgt_in, src_mask, tgt_mask)
        weights = model.decoder.layers[layer - 1].cross_attn.attn  # (1, h, Lt, Ls)
    return weights[0]


def antidiagonal_mean(attention: Tensor, length: int) -> float:
    """Mean over letters k < length of the head-averaged weight on source position L-1-k."""
    mean_map = attention.mean(0)  # (Lt, Ls), averaged over heads
    rows = min(length, mean_map.size(0))
    k = torch.arange(rows)
    return float(mean_map[k, length - 1 - k].mean())


def evaluate(
    model: nn.Module,
    *,
    eval_n: int,
    eval_seed: int,
    min_len: int,
    max_len: int,
    cdr3: str,
    layer: int,
) -> Evaluation:
    model = model.cpu().eval()
    src, tgt = heldout_set(eval_n, min_len, max_len, eval_seed)
    correct = exact_reversals(model, src, tgt)
    cdr3_src = encode(cdr3)  # (1, L)
    written = greedy_decode(model, cdr3_src, max_len=max_len + 2, bos=BOS, eos=EOS, pad_idx=PAD)
    written = _through_eos(written)
    attention = cross_attention(model, cdr3_src, written, layer)
    return Evaluation(
        heldout_exact=correct,
        heldout_n=eval_n,
        cdr3_input=cdr3,
        cdr3_output=decode(written[0, 1:]),
        cross_attention=attention.numpy(),
        antidiagonal_mean=antidiagonal_mean(attention, len(cdr3)),
    )


def evaluate_recipe(model: nn.Module, recipe) -> Evaluation:
    """`evaluate` with the recipe's held-out test, CDR3 and cross-attention layer."""
    return evaluate(
        model,
        eval_n=recipe.eval_n,
        eval_seed=recipe.eval_seed,
        min_len=recipe.min_len,
        max_len=recipe.max_len,
        cdr3=recipe.cdr3,
        layer=recipe.cross_attention_layer,
    )


def _through_eos(written: Tensor) -> Tensor:
    """Cut a single decoded row (1, n) just after its first <eos>."""
    hits = (written[0] == EOS).nonzero()
    return written[:, : int(hits[0]) + 1] if len(hits) else written
