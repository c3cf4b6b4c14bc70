"""Beam search for the encoder-decoders, and the log-probability of a given output.

Greedy decoding keeps one output and appends its most likely next token. Beam search keeps
the `width` best partial outputs y_1..y_t of each source x, ranked by their total
log-probability

    score(y_1..y_t) = sum_{i<=t} log p(y_i | y_<i, x)     (log-softmax of the logits)

At each step every kept output is extended by every token (width x V candidates per source),
and the `width` best candidates survive. An output that has written <eos> is finished: it
keeps its score and takes no more tokens (it stands in the beam as a single candidate). The
search stops when every kept output is finished, or after `max_len` generated tokens.

There is no length normalisation: every token adds a log-probability <= 0, so longer
outputs score lower, and the best output is simply the highest sum. With width 1 this is
exactly greedy decoding (ties go to the lowest token id, as with argmax).

The model is any object with encode(src, src_mask) -> memory and
decode(tgt_in, memory, src_mask, tgt_mask) -> logits (B, Lt, V): the Transformers of
tcrformer.models.transformer and .fast, and the GRU of tcrformer.models.rnn. Shapes use
B = batch, k = width, t = tokens so far (<bos> included), V = target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tcrformer.models.transformer import causal_mask, padding_mask


def repeat_memory(model: nn.Module, memory: Tensor, times: int) -> Tensor:
    """Each source's memory `times` times in a row, one copy per beam slot.

    The model's own `repeat_memory(memory, times)` if it has one (a GRU state is
    (layers, B, H): batch on dim 1), else along dim 0 (a Transformer memory (B, Ls, d)).
    Row b becomes rows b k .. b k + k - 1, the layout of `Beam.tokens.flatten(0, 1)`.
    """
    if hasattr(model, "repeat_memory"):
        return model.repeat_memory(memory, times)
    return memory.repeat_interleave(times, dim=0)


@dataclass
class Beam:
    """The kept outputs of every source, best first. A score of -inf marks an empty slot
    (more slots than candidates so far); empty slots count as finished."""

    tokens: Tensor  # (B, k, t) long, <bos> first, pad_idx after a finished output's <eos>
    scores: Tensor  # (B, k) float64 total log-probability
    finished: Tensor  # (B, k) bool: wrote <eos>, or empty

    @classmethod
    def start(cls, batch: int, width: int, bos: int, device: torch.device) -> Beam:
        """One live output <bos> (score 0) per source; the other width - 1 slots empty."""
        tokens = torch.full((batch, width, 1), bos, dtype=torch.long, device=device)
        scores = torch.full((batch, width), float("-inf"), dtype=torch.float64, device=device)
        scores[:, 0] = 0.0
        finished = torch.ones(batch, width, dtype=torch.bool, device=device)
        finished[:, 0] = False
        return cls(tokens, scores, finished)


def candidate_scores(beam: Beam, log_probs: Tensor, pad_idx: int) -> Tensor:
    """(B, k, V) score of each kept output extended by each token.

    A live output: its score + log p(token). A finished one has a single candidate,
    itself padded (pad_idx, its score unchanged); its other tokens get -inf.
    """
    extended = beam.scores.unsqueeze(-1) + log_probs  # (B, k, V)
    frozen = torch.full_like(extended, float("-inf"))
    frozen[..., pad_idx] = beam.scores
    return torch.where(beam.finished.unsqueeze(-1), frozen, extended)


def extend(beam: Beam, log_probs: Tensor, eos: int, pad_idx: int) -> Beam:
    """One step: keep the k best of the k V candidates of every source, best first.

    The sort is stable, so equal scores keep the lower (slot, token) index: at width 1 the
    choice is the argmax of greedy decoding.
    """
    batch, width, vocab = log_probs.shape
    candidates = candidate_scores(beam, log_probs, pad_idx).flatten(1)  # (B, k V)
    chosen = candidates.sort(dim=1, descending=True, stable=True).indices[:, :width]  # (B, k)
    parent, token = chosen // vocab, chosen % vocab  # (B, k) each
    was_finished = beam.finished.gather(1, parent)
    token = token.masked_fill(was_finished, pad_idx)  # empty slots may tie on other tokens
    history = beam.tokens.gather(1, parent.unsqueeze(-1).expand(-1, -1, beam.tokens.size(-1)))
    return Beam(
        tokens=torch.cat([history, token.unsqueeze(-1)], dim=-1),  # (B, k, t + 1)
        scores=candidates.gather(1, chosen),
        finished=was_finished | (token == eos),
    )


def next_log_probs(
    model: nn.Module, beam: Beam, memory: Tensor, src_mask: Tensor
) -> Tensor:  # -> (B, k, V) float64
    """log p(next token | output so far, source) for every kept output, in one decoder pass."""
    batch, width, length = beam.tokens.shape
    tgt_in = beam.tokens.flatten(0, 1)  # (B k, t)
    tgt_mask = causal_mask(length, tgt_in.device)
    logits = model.decode(tgt_in, memory, src_mask, tgt_mask)[:, -1]  # (B k, V)
    return F.log_softmax(logits.double(), dim=-1).view(batch, width, -1)


@torch.no_grad()
def beam_hypotheses(
    model: nn.Module, src: Tensor, max_len: int, bos: int, eos: int, width: int, pad_idx: int = 0
) -> tuple[Tensor, Tensor]:
    """The whole final beam: tokens (B, k, 1 + n) and scores (B, k), best first.

    n <= max_len is the number of steps run. Scores are total log-probabilities (float64,
    <eos> included, no length normalisation); -inf marks an empty slot.
    """
    if width < 1:
        raise ValueError(f"beam width must be at least 1, got {width}")
    model.eval()
    src_mask = padding_mask(src, pad_idx)  # (B, 1, Ls)
    memory = repeat_memory(model, model.encode(src, src_mask), width)
    src_mask = src_mask.repeat_interleave(width, dim=0)  # (B k, 1, Ls)
    beam = Beam.start(src.size(0), width, bos, src.device)
    for _ in range(max_len):
        if beam.finished.all():
            break
        beam = extend(beam, next_log_probs(model, beam, memory, src_mask), eos, pad_idx)
    return beam.tokens, beam.scores


def beam_search(
    model: nn.Module, src: Tensor, max_len: int, bos: int, eos: int, width: int, pad_idx: int = 0
) -> tuple[Tensor, Tensor]:
    """The best output of a width-`width` beam search for every row of src (B, Ls).

    Returns tokens (B, 1 + n), <bos> first, pad_idx after a row's <eos>, and their total
    log-probability (B,) float64 (sum of log-softmax of the chosen tokens, <eos> included;
    no length normalisation). Runs under no_grad with the model in eval mode.
    """
    tokens, scores = beam_hypotheses(model, src, max_len, bos, eos, width, pad_idx)
    return tokens[:, 0], scores[:, 0]  # the beam is sorted, best first


def through_first_eos(tokens: Tensor, eos: int) -> Tensor:
    """(B, n) -> (B, n) bool: True up to and including each row's first <eos> (all of a
    row without one)."""
    is_eos = tokens == eos
    return (is_eos.cumsum(dim=1) - is_eos.long()) == 0


@torch.no_grad()
def sequence_log_prob(
    model: nn.Module, src: Tensor, tokens: Tensor, eos: int, pad_idx: int = 0
) -> Tensor:
    """Teacher-forced total log-probability (B,) float64 of given outputs tokens (B, 1 + n).

    tokens start with <bos>; sum_i log p(tokens[:, i] | tokens[:, :i], src) over i >= 1 up
    to and including each row's first <eos> (rows without one: every token). This scores
    greedy outputs on the same scale as beam_search's.
    """
    model.eval()
    if tokens.size(1) < 2:
        return torch.zeros(tokens.size(0), dtype=torch.float64, device=tokens.device)
    tgt_in, tgt_out = tokens[:, :-1], tokens[:, 1:]  # (B, n) each
    src_mask = padding_mask(src, pad_idx)
    memory = model.encode(src, src_mask)
    logits = model.decode(tgt_in, memory, src_mask, causal_mask(tgt_in.size(1), src.device))
    log_probs = F.log_softmax(logits.double(), dim=-1)  # (B, n, V)
    chosen = log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # (B, n)
    return chosen.masked_fill(~through_first_eos(tgt_out, eos), 0.0).sum(dim=1)


# Beam against greedy ----------------------------------------------------------------------------
# Per string: a tie when the outputs agree through <eos> or score alike; otherwise an output
# that never wrote <eos> loses to one that did (a cut-off output's score lacks the <eos>
# term), and between two finished (or two unfinished) outputs the more probable wins.


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
