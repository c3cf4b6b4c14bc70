"""The two metrics claims v4 redesigns (docs/claims_v4_design.md, section 4), as pure
functions of the arrays a trained model gives, and the verdict of one claim alone.

Attention, top-1 agreement. For each residue step r (a string's target step that writes a
residue), over its n source residues j:

    A_r = argmax_j attention[r, j]        (the head-mean cross-attention, ties kept)
    I_r = argmax_j importance[r, j]       (the occlusion importance in nats, ties kept)
    agreement_r = |A_r ∩ I_r| / (|A_r| |I_r|)

the chance that the most-attended residue is the most important one, both ties broken at
random. Rows whose largest importance is below `min_importance` have no residue that
matters and are left out. The seed's value is the mean over the rows used. Beside it:
mass_on_top, the attention on I_r (shared evenly among ties).

Beam, net wins. Per string: a win when beam's output is more probable than greedy's (one
teacher-forced score for both), a loss when less, a tie when the outputs agree through
<eos> or score alike. The seed's value is (wins - losses) / strings, at the first weight
snapshot where greedy has room (snapshot_with_room).
"""

from __future__ import annotations

import numpy as np

from tcrformer.chapters.claims.exact import sign_flip_p
from tcrformer.chapters.claims.kinds import INCONCLUSIVE, REFUTED, SUPPORTED

MIN_IMPORTANCE = 1e-3  # nats: a row whose largest importance is below has no top residue


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


def beam_outcomes(greedy_logprob, beam_logprob, same_output) -> dict[str, float]:
    """Wins, ties and losses of beam against greedy over strings, and the net wins."""
    greedy, beam = np.asarray(greedy_logprob, float), np.asarray(beam_logprob, float)
    tie = np.asarray(same_output, bool) | (beam == greedy)
    wins, losses = int((~tie & (beam > greedy)).sum()), int((~tie & (beam < greedy)).sum())
    return {"wins": wins, "ties": int(tie.sum()), "losses": losses,
            "net_wins": (wins - losses) / greedy.size}  # fmt: skip


GREEDY_ROOM = (0.2, 0.9)  # greedy exact, median over seeds: a model with room for beam


def snapshot_with_room(greedy_exact, room: tuple[float, float] = GREEDY_ROOM) -> int | None:
    """The beam claim's snapshot: the first step, in step order, whose median greedy exact
    fraction over the seeds lies in `room` (ends included); None when none does (NOT
    TESTABLE HERE). `greedy_exact` is {step: per-seed fractions}: greedy alone, so the
    choice is made before any beam output is read."""
    low, high = room
    for step in sorted(greedy_exact):
        if low <= float(np.median(greedy_exact[step])) <= high:
            return step
    return None


def verdict_alone(d, margin: float, direction: str, alpha: float = 0.05) -> str:
    """One experiment's verdict as a family of one: SUPPORTED or NOT SUPPORTED when the
    exact sign-flip test rejects at alpha on that side, else INCONCLUSIVE."""
    if direction not in ("greater", "less"):
        raise ValueError(f"direction {direction!r}: greater or less")
    other = "less" if direction == "greater" else "greater"
    if sign_flip_p(d, margin, direction) <= alpha:
        return SUPPORTED
    if sign_flip_p(d, margin, other) <= alpha:
        return REFUTED
    return INCONCLUSIVE
