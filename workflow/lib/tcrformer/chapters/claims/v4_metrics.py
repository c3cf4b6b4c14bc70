"""The two metrics claims v4 redesigns (docs/claims_v4_design.md, section 4), as pure
functions of the arrays a trained model gives, and the verdict of one claim alone.

Attention, top-1 agreement. For each residue step r (a string's target step that writes a
residue), over its n source residues j:

    A_r = argmax_j attention[r, j]        (the head-mean cross-attention, ties kept)
    I_r = argmax_j importance[r, j]       (the occlusion importance in nats, ties kept)
    agreement_r = |A_r ∩ I_r| / (|A_r| |I_r|)

the chance that the most-attended residue is the most important one, both ties broken at
random. Rows whose largest importance is below `min_importance` have no residue that
matters and are left out. The seed's value is the mean over the rows used. Reported beside
it: mass_on_top, the attention on I_r (shared evenly among ties), and top_defined, the share
of residue steps whose largest importance is at least twice the second. Neither decides
anything: the attention claim is NOT TESTABLE HERE by design (its `by_design` precondition
in config/claims.yaml: in reversal, attention and importance coincide by the task).

Beam, net wins. Per string: a tie when the outputs agree through <eos> or score alike;
otherwise an output that never wrote <eos> loses to one that did (a cut-off output's score
lacks the <eos> term), and between two finished (or two unfinished) outputs the more
probable wins (one teacher-forced score for both). The seed's value is (wins - losses) /
strings, at the seed's own first weight snapshot where greedy has room (room_step: greedy
exact in GREEDY_ROOM, chosen from greedy alone, before beam runs); a seed without one has
no value.
"""

from __future__ import annotations

import numpy as np

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


TOP_RATIO = 2.0  # a residue step's top is defined when its importance is this x the second's


def top_defined(importance, min_importance: float = MIN_IMPORTANCE) -> float:
    """The share of residue steps (rows of importance, (rows, n)) with one residue that
    matters: the largest importance at least MIN_IMPORTANCE and TOP_RATIO times the second
    largest (reported beside the attention claim, whose verdict it does not decide)."""
    importance = np.sort(np.asarray(importance, float), axis=-1)
    top, second = importance[:, -1], importance[:, -2]
    return float(np.mean((top >= min_importance) & (top >= TOP_RATIO * second)))


def beam_outcomes(greedy_logprob, beam_logprob, same_output, greedy_finished=None,
                  beam_finished=None) -> dict[str, float]:  # fmt: skip
    """Wins, ties and losses of beam against greedy over strings, and the net wins; an
    output that wrote no <eos> (`*_finished` False; default: every output finished) loses
    to one that did."""
    greedy, beam = np.asarray(greedy_logprob, float), np.asarray(beam_logprob, float)
    done_g = np.ones(greedy.size, bool) if greedy_finished is None else np.asarray(greedy_finished)
    done_b = np.ones(beam.size, bool) if beam_finished is None else np.asarray(beam_finished)
    tie = np.asarray(same_output, bool) | ((beam == greedy) & (done_b == done_g))
    better = np.where(done_b == done_g, beam > greedy, done_b)  # beam's output preferred
    wins, losses = int((~tie & better).sum()), int((~tie & ~better).sum())
    return {"wins": wins, "ties": int(tie.sum()), "losses": losses,
            "net_wins": (wins - losses) / greedy.size}  # fmt: skip


GREEDY_ROOM = (0.2, 0.9)  # greedy exact fraction of a seed's snapshot with room for beam


def room_step(greedy_exact, room: tuple[float, float] = GREEDY_ROOM) -> int | None:
    """A seed's beam snapshot: the first step, in step order, whose greedy exact fraction
    lies in `room` (ends included); None when none does. `greedy_exact` is {step: fraction}:
    greedy alone, so the choice is made before any beam output is read."""
    low, high = room
    return next((step for step in sorted(greedy_exact) if low <= greedy_exact[step] <= high),
                None)  # fmt: skip
