"""Beam search against greedy decoding, teacher-forced scores and an exhaustive search."""

from __future__ import annotations

import itertools

import pytest
import torch

from tcrformer.models import fast, transformer
from tcrformer.models.decoding import (
    beam_hypotheses,
    beam_search,
    repeat_memory,
    sequence_log_prob,
    through_first_eos,
)
from tcrformer.models.rnn import GruEncoderDecoder

torch.set_num_threads(1)
PAD, BOS, EOS, V = 0, 1, 2, 12
SHAPE = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, dropout=0.1)
MAX_LEN = 8
# (seed, bias added to the generator's <eos> logit), chosen so that the untrained models'
# rows finish at varied steps, some not within MAX_LEN (the reference and fast models share
# their weights from the same seed)
SETTINGS = {"reference": (1, 1.25), "fast": (1, 1.25), "gru": (2, 0.25)}


def build(kind: str) -> torch.nn.Module:
    seed, eos_bias = SETTINGS[kind]
    torch.manual_seed(seed)
    if kind == "reference":
        model = transformer.EncoderDecoder(V, V, **SHAPE)
    elif kind == "fast":
        model = fast.EncoderDecoder(V, V, **SHAPE)
    else:
        model = GruEncoderDecoder(V, V, hidden=16)
    with torch.no_grad():
        model.generator.bias[EOS] += eos_bias
    return model.eval()


def sources(n: int = 8, seed: int = 1) -> torch.Tensor:
    """(n, 8) residue ids 3..11, rows of length 3..8 padded with PAD at the end."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (n, 8), generator=generator)
    lengths = torch.randint(3, 9, (n,), generator=generator)
    return src.masked_fill(torch.arange(8) >= lengths[:, None], PAD)


def through_eos(row: torch.Tensor) -> list[int]:
    """A row's tokens up to and including its first <eos> (all of them without one)."""
    return row[: 1 + int(through_first_eos(row[None, 1:], EOS).sum())].tolist()


KINDS = ["reference", "fast", "gru"]


@pytest.mark.parametrize("kind", KINDS)
def test_width_1_is_greedy_through_the_first_eos(kind):
    model, src = build(kind), sources()
    greedy = transformer.greedy_decode(model, src, MAX_LEN, BOS, EOS)
    tokens, _ = beam_search(model, src, MAX_LEN, BOS, EOS, width=1)
    assert tokens.shape == greedy.shape  # both stop when the last row writes <eos>
    assert [through_eos(r) for r in tokens] == [through_eos(r) for r in greedy]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [1, 3])
def test_returned_score_is_the_teacher_forced_log_prob(kind, width):
    model, src = build(kind), sources()
    tokens, scores = beam_search(model, src, MAX_LEN, BOS, EOS, width)
    assert tokens.shape[0] == scores.shape[0] == src.shape[0]
    assert (tokens[:, 0] == BOS).all() and scores.dtype == torch.float64
    torch.testing.assert_close(
        scores, sequence_log_prob(model, src, tokens, EOS), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("kind", KINDS)
def test_every_kept_hypothesis_is_scored_right_and_the_best_is_returned(kind):
    """The guaranteed property: the beam is sorted, each kept output's score is its true
    log-probability, and beam_search returns the first, so its score is >= every kept one.

    A wider beam does *not* always beat width 1: it can drop the greedy path at some step
    for outputs that later turn bad, so "width k >= width 1" is not tested.
    """
    model, src = build(kind), sources()
    tokens, scores = beam_hypotheses(model, src, MAX_LEN, BOS, EOS, width=4)
    assert tokens.shape[:2] == scores.shape == (src.shape[0], 4)
    assert torch.isfinite(scores).all()  # V = 12 > 4 candidates from the first step on
    assert (scores[:, :-1] >= scores[:, 1:]).all()
    rescored = sequence_log_prob(model, src.repeat_interleave(4, 0), tokens.flatten(0, 1), EOS)
    torch.testing.assert_close(scores.flatten(), rescored, atol=1e-5, rtol=0)
    best_tokens, best = beam_search(model, src, MAX_LEN, BOS, EOS, width=4)
    assert torch.equal(best_tokens, tokens[:, 0]) and torch.equal(best, scores.max(1).values)


@pytest.mark.parametrize("kind", ["reference", "gru"])
def test_a_beam_wider_than_every_candidate_is_an_exact_search(kind):
    """With width >= the number of candidates nothing is pruned, so the beam's best must be
    the maximum over every output of at most 2 tokens, enumerated and teacher-forced."""
    model, src = build(kind), sources(n=3)
    tokens, scores = beam_hypotheses(model, src, max_len=2, bos=BOS, eos=EOS, width=V * V)
    # After 2 steps: <eos> alone, plus the 11 other first tokens times V second tokens.
    assert (torch.isfinite(scores).sum(1) == 1 + (V - 1) * V).all()
    assert torch.isneginf(scores[:, 1 + (V - 1) * V :]).all()  # the empty slots
    pairs = torch.tensor(list(itertools.product(range(V), repeat=2)))  # (V^2, 2)
    every = torch.cat([torch.full((len(pairs), 1), BOS), pairs], dim=1)  # (V^2, 3)
    for row in range(len(src)):
        all_scores = sequence_log_prob(model, src[row].expand(len(every), -1), every, EOS)
        assert abs(scores[row, 0].item() - all_scores.max().item()) < 1e-5


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [1, 3])
def test_finished_rows_are_padded_after_eos(kind, width):
    model, src = build(kind), sources()
    tokens, _ = beam_search(model, src, MAX_LEN, BOS, EOS, width)
    generated = tokens[:, 1:]
    kept = through_first_eos(generated, EOS)
    assert (generated[~kept] == PAD).all()
    ended = (generated == EOS).any(1)
    lengths = kept.sum(1)
    assert ended.any() and (lengths < generated.size(1)).any()  # some rows ended early
    assert len(set(lengths.tolist())) >= 3  # ... at different steps
    assert ((generated == EOS).sum(1) <= 1).all()  # nothing is written after <eos>


def test_sequence_log_prob_stops_at_the_first_eos():
    model, src = build("reference"), sources(n=1).expand(2, -1)
    tokens = torch.tensor([[BOS, 5, EOS, 7, 8], [BOS, 5, EOS, PAD, PAD]])
    scores = sequence_log_prob(model, src, tokens, EOS)
    short = sequence_log_prob(model, src[:1], tokens[:1, :3], EOS)
    torch.testing.assert_close(scores, short.expand(2), atol=1e-6, rtol=0)
    without_eos = sequence_log_prob(model, src[:1], torch.tensor([[BOS, 5, 6, 7]]), EOS)
    with_fourth = sequence_log_prob(model, src[:1], torch.tensor([[BOS, 5, 6, 7, 8]]), EOS)
    assert with_fourth.item() < without_eos.item()  # no <eos>: every token counts


def test_repeat_memory_layouts():
    memory = torch.arange(6.0).view(3, 2, 1)  # (B, L, d) for a Transformer
    repeated = repeat_memory(build("reference"), memory, 2)
    assert repeated.shape == (6, 2, 1) and torch.equal(repeated[2], memory[1])
    state = torch.arange(6.0).view(2, 3, 1)  # (layers, B, H) for the GRU
    repeated = repeat_memory(build("gru"), state, 2)
    assert repeated.shape == (2, 6, 1) and torch.equal(repeated[:, 3], state[:, 1])


def test_width_must_be_positive():
    with pytest.raises(ValueError, match="width"):
        beam_search(build("gru"), sources(n=1), MAX_LEN, BOS, EOS, width=0)
