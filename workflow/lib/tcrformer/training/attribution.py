"""Residue-level attribution: does cross-attention point at the residues that matter?

The explainer's claim: attention weights show where information flowed, not which residues
matter; importance needs ablations. Both are measured here, per target step, over the
source residues, on a trained encoder-decoder, teacher-forced (decoder_io), in eval mode.

Residues are the amino-acid ids (FIRST_RESIDUE..VOCAB_SIZE-1). A source's padding (and a
<bos> or <eos>, had it any) is not a residue; a target step t counts when the token it must
predict, y_t, is a residue. The final <eos> step is left out: what it needs is the string's
length, which no single residue holds, so it has no residue to point at.

For string b, decoder layer l, residue step t and source residue j (h heads, R draws):

    attention   a[l, b, t, j] = (1/h) sum_heads A[l, head, b, t, j]
                the cross-attention weight of step t on position j, averaged over heads
    importance  i[b, t, j] = log p(y_t | x, y_<t) - (1/R) sum_r log p(y_t | x[j <- c_r], y_<t)
                x[j <- c] is x with residue j replaced by letter c; c_1..c_R are drawn
                uniformly from the 19 amino acids other than x_j (never x_j itself), by one
                torch.Generator seeded with `seed`, in the order of the batch's residues
    rho         rho[l, b, t] = Spearman(a[l, b, t, :], i[b, t, :]) over the residues j of b;
                a row where either side is constant is left out; signed, never absolute

    residue_rho_by_layer[l] = mean of rho[l, b, t] over the rows used in layer l
    residue_rho             = the mean of residue_rho_by_layer over the layers

Top-1 agreement, which the rank correlation's noise among near-zero residues cannot fool.
For each residue step r, over its n source residues j:

    A_r = argmax_j attention[r, j]        (ties kept)
    I_r = argmax_j importance[r, j]       (ties kept)
    agreement_r = |A_r ∩ I_r| / (|A_r| |I_r|)

the chance that the most-attended residue is the most important one, both ties broken at
random. Rows whose largest importance is below MIN_IMPORTANCE have no residue that matters
and are left out; the value is the mean over the rows used. Beside it: mass_on_top, the
attention on I_r (shared evenly among ties), and top_defined, the share of residue steps
whose largest importance is at least TOP_RATIO times the second.

Shapes: B strings, Ls source and Lt target positions (Lt = the target's width - 1), h heads,
N decoder layers, R replacements per residue.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tcrformer.models.fast import record_attention
from tcrformer.models.transformer import decoder_io, make_masks
from tcrformer.training.data import FIRST_RESIDUE, PAD, VOCAB_SIZE

LETTERS = VOCAB_SIZE - FIRST_RESIDUE  # 20 amino acids
OCCLUSION_BATCH = 4096  # occluded strings per forward pass
MIN_IMPORTANCE = 1e-3  # nats: a row whose largest importance is below has no top residue
TOP_RATIO = 2.0  # a residue step's top is defined when its importance is this x the second's


def residues(tokens: Tensor) -> Tensor:
    """(B, L) bool: the amino-acid positions (not PAD, BOS or EOS)."""
    return tokens >= FIRST_RESIDUE


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters(), torch.empty(0)).device


def log_probs(model: nn.Module, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
    """(B, Lt) float64: log p(y_t | x, y_<t), teacher-forced (no grad, eval mode)."""
    logits = model(src, tgt_in, *make_masks(src, tgt_in, PAD))  # (B, Lt, V)
    return logits.double().log_softmax(-1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)


def cross_attention_by_layer(model: nn.Module, src: Tensor, tgt_in: Tensor) -> Tensor:
    """(N, B, Lt, Ls): every decoder layer's cross-attention, averaged over its heads."""
    with record_attention(model):  # a no-op for the reference, which always keeps them
        model(src, tgt_in, *make_masks(src, tgt_in, PAD))
        return torch.stack([layer.cross_attn.attn.double().mean(1)  # (B, h, Lt, Ls) -> (B, Lt, Ls)
                            for layer in model.decoder.layers])  # fmt: skip


def occlusions(src: Tensor, replacements: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Every residue of every string, `replacements` times, with the letter put in its place:
    string (M,), position (M,), letter (M,), M = residues x replacements. The letter is
    x_j shifted by 1..19 places around the 20 amino acids, the shift uniform, so it is any
    other letter with equal chance and never x_j. The draws follow the residues only, in
    row-major order: padding does not move them."""
    string, position = residues(src).nonzero(as_tuple=True)  # (n,) each, row-major
    generator = torch.Generator().manual_seed(seed)
    shift = torch.randint(1, LETTERS, (string.numel(), replacements), generator=generator)
    original = src[string, position].cpu().unsqueeze(1)  # (n, 1)
    letter = FIRST_RESIDUE + (original - FIRST_RESIDUE + shift) % LETTERS  # (n, R)
    letter = letter.to(src.device)
    each = replacements  # consecutive entries: one residue's draws
    return string.repeat_interleave(each), position.repeat_interleave(each), letter.flatten()


def importance(
    model: nn.Module, src: Tensor, tgt: Tensor, replacements: int = 3, seed: int = 0
) -> Tensor:
    """(B, Lt, Ls) float64: i[b, t, j], the mean drop in log p(y_t) when residue j is
    replaced (0 where j is not a residue), in batches of OCCLUSION_BATCH occluded strings."""
    tgt_in, tgt_out = decoder_io(tgt)
    base = log_probs(model, src, tgt_in, tgt_out)  # (B, Lt)
    drop = torch.zeros(*src.shape, tgt_in.size(1), dtype=torch.float64, device=src.device)
    string, position, letter = occlusions(src, replacements, seed)  # (M,) each
    for start in range(0, string.numel(), OCCLUSION_BATCH):
        b, j = string[start : start + OCCLUSION_BATCH], position[start : start + OCCLUSION_BATCH]
        occluded = src[b].clone()  # (m, Ls)
        occluded[torch.arange(b.numel()), j] = letter[start : start + OCCLUSION_BATCH]
        lost = base[b] - log_probs(model, occluded, tgt_in[b], tgt_out[b])  # (m, Lt)
        drop.index_put_((b, j), lost, accumulate=True)  # (B, Ls, Lt)
    return drop.transpose(1, 2) / replacements


def average_ranks(v: np.ndarray) -> np.ndarray:
    """The 1-based ranks along the last axis, tied values sharing their mean rank (the
    "average" method of scipy.stats.rankdata). (..., n) -> (..., n)."""
    v = np.asarray(v, float)
    order = np.argsort(v, axis=-1, kind="stable")
    ordered = np.take_along_axis(v, order, -1)  # (..., n)
    starts = np.ones(v.shape, bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]  # each run of ties begins here
    n = v.shape[-1]
    rows = np.arange(v.size // n if n else 0).reshape(v.shape[:-1] + (1,))
    run = np.cumsum(starts, -1) + rows * (n + 1)  # a run's number, unique over rows
    position = np.broadcast_to(np.arange(1.0, n + 1), v.shape)
    mean = np.bincount(run.ravel(), position.ravel()) / np.maximum(np.bincount(run.ravel()), 1)
    ranks = np.empty_like(v)
    np.put_along_axis(ranks, order, mean[run], -1)
    return ranks


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair (..., n) -> (...): the Pearson correlation of their
    average ranks; nan where either row is constant or holds a nan."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    norm = np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))
    left_out = (np.ptp(x, axis=-1) == 0) | (np.ptp(y, axis=-1) == 0)
    left_out |= np.isnan(x).any(-1) | np.isnan(y).any(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(left_out, np.nan, (rx * ry).sum(-1) / norm)


def residue_steps(attention: Tensor, importance: Tensor, src: Tensor, tgt: Tensor):
    """The residue steps of every string over its source residues, a length at a time:
    for each group of strings with n residues, attention (N, rows, n) and importance
    (rows, n), so each group's rows stack into one array.

    attention (N, B, Lt, Ls), importance (B, Lt, Ls)."""
    steps, sources = residues(decoder_io(tgt)[1]).cpu(), residues(src).cpu()  # (B, Lt), (B, Ls)
    attention, importance = attention.cpu().numpy(), importance.cpu().numpy()
    counts = sources.sum(1)
    for n in counts.unique().tolist():
        group = (counts == n).nonzero().squeeze(1)  # (g,) strings with n residues
        where = sources[group].nonzero()[:, 1].view(-1, 1, n).numpy()  # (g, 1, n)
        rows, group = steps[group].numpy(), group.numpy()  # (g, Lt), (g,)
        a = np.take_along_axis(attention[:, group], where[None], -1)[:, rows]  # (N, r, n)
        i = np.take_along_axis(importance[group], where, -1)[rows]  # (r, n)
        yield a, i


def row_correlations(attention: Tensor, importance: Tensor, src: Tensor, tgt: Tensor):
    """(N, rows) rho[l, (b, t)] over the residue steps of every string (nan: left out).

    attention (N, B, Lt, Ls), importance (B, Lt, Ls)."""
    rhos = [spearman_rows(a, i[None]) for a, i in residue_steps(attention, importance, src, tgt)]
    return np.concatenate(rhos, axis=1) if rhos else np.zeros((attention.shape[0], 0))


def attention_and_importance(
    model: nn.Module, src: Tensor, tgt: Tensor, replacements: int = 3, seed: int = 0
) -> tuple[Tensor, Tensor]:
    """What attribution compares, on the strings src (B, Ls) and their targets tgt
    (B, Lt + 1): every decoder layer's head-mean cross-attention a (N, B, Lt, Ls) and the
    occlusion importance i (B, Lt, Ls), on the model's device."""
    model.eval()
    device = _device(model)
    src, tgt = src.to(device), tgt.to(device)
    with torch.no_grad():
        attention = cross_attention_by_layer(model, src, decoder_io(tgt)[0])
        return attention, importance(model, src, tgt, replacements, seed)


def rho_by_layer(attention: Tensor, importance: Tensor, src: Tensor, tgt: Tensor):
    """residue_rho_by_layer (the mean rho over the rows used, per layer) and the rows used."""
    rho = row_correlations(attention, importance, src, tgt)  # (N, rows)
    used = np.isfinite(rho)
    by_layer = [float(row[kept].mean()) if kept.any() else math.nan
                for row, kept in zip(rho, used, strict=True)]  # fmt: skip
    return {"residue_rho_by_layer": by_layer, "residue_rows": [int(u.sum()) for u in used]}


def residue_attribution(
    model: nn.Module, src: Tensor, tgt: Tensor, replacements: int = 3, seed: int = 0
) -> dict[str, Any]:
    """Rank agreement of cross-attention with occlusion importance over the source residues
    of the held-out strings src (B, Ls) and their targets tgt (B, Lt + 1); see the module."""
    attention, importances = attention_and_importance(model, src, tgt, replacements, seed)
    found = rho_by_layer(attention, importances, src, tgt)
    return {
        "residue_rho": float(np.mean(found["residue_rho_by_layer"])),
        **found,
        "replacements": replacements,
    }


# Top-1 agreement ----------------------------------------------------------------------------------


def _tops(x: np.ndarray) -> np.ndarray:
    """(rows, n) bool: the entries equal to their row's largest."""
    return x == x.max(axis=-1, keepdims=True)


def top1_agreement_rows(attention: np.ndarray, importance: np.ndarray,
                        min_importance: float = MIN_IMPORTANCE) -> np.ndarray:  # fmt: skip
    """(rows used,) agreement_r of residue steps attention, importance (rows, n)."""
    attention, importance = np.asarray(attention, float), np.asarray(importance, float)
    if attention.shape != importance.shape:
        raise ValueError(f"attention {attention.shape} and importance {importance.shape}")
    used = importance.max(axis=-1) >= min_importance
    a, i = _tops(attention[used]), _tops(importance[used])
    return (a & i).sum(-1) / (a.sum(-1) * i.sum(-1))


def top1_agreement(attention, importance, min_importance: float = MIN_IMPORTANCE) -> float:
    """The seed's value: mean agreement over the rows used (nan if none)."""
    rows = top1_agreement_rows(attention, importance, min_importance)
    return float(rows.mean()) if rows.size else float("nan")


def mass_on_top(attention, importance, min_importance: float = MIN_IMPORTANCE) -> float:
    """Mean attention on the most important residue (reported beside the agreement)."""
    attention, importance = np.asarray(attention, float), np.asarray(importance, float)
    used = importance.max(axis=-1) >= min_importance
    tops = _tops(importance[used])
    return float(((attention[used] * tops).sum(-1) / tops.sum(-1)).mean())


def top_defined(importance, min_importance: float = MIN_IMPORTANCE) -> float:
    """The share of residue steps (rows of importance, (rows, n)) with one residue that
    matters: the largest importance at least MIN_IMPORTANCE and TOP_RATIO times the second
    largest (reported beside the attention claim, whose verdict it does not decide)."""
    importance = np.sort(np.asarray(importance, float), axis=-1)
    top, second = importance[:, -1], importance[:, -2]
    return float(np.mean((top >= min_importance) & (top >= TOP_RATIO * second)))
