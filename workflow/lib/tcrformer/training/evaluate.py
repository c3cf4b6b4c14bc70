"""The test of a trained model, the same for the single run, each ensemble seed and each
claims arm: held-out strings, the CDR3, and where its cross-attention looks while it
writes the CDR3 (the measures are training.measures').

The anti-diagonal is read from the cross-attention of one decoder layer while the model
writes the CDR3 (teacher-forced on its own greedy output), averaged over the heads; the
row that writes <eos> is kept in the saved map but not in the mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor, nn

from tcrformer.models.transformer import greedy_decode
from tcrformer.training.data import BOS, EOS, PAD, decode, encode, heldout_set
from tcrformer.training.measures import antidiagonal, cross_attention, exact_rows


@dataclass
class Evaluation:
    heldout_exact: int
    heldout_n: int
    cdr3_input: str
    cdr3_output: str
    cross_attention: np.ndarray  # (h, L + 1, L): heads x decoder rows (letters, <eos>) x source
    antidiagonal_mean: float


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
    correct = int(exact_rows(model, src, tgt).sum())
    cdr3_src = encode(cdr3)  # (1, L)
    written = greedy_decode(model, cdr3_src, max_len=max_len + 2, bos=BOS, eos=EOS, pad_idx=PAD)
    written = _through_eos(written)
    attention = cross_attention(model, cdr3_src, written, layer)[0]  # (h, Lt, Ls)
    return Evaluation(
        heldout_exact=correct,
        heldout_n=eval_n,
        cdr3_input=cdr3,
        cdr3_output=decode(written[0, 1:]),
        cross_attention=attention.numpy(),
        antidiagonal_mean=antidiagonal(attention.mean(0, keepdim=True), [len(cdr3)]),
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
