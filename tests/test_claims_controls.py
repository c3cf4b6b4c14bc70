"""The attention and beam metrics against their positive and negative controls: top-1
agreement (training.attribution) and beam's net wins over greedy (models.decoding), each
judged by the claims' own rule (the exact tests themselves: test_stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tcrclaims import protocol
from tcrclaims.kinds import REFUTED, SUPPORTED
from tcrformer.models.decoding import beam_outcomes
from tcrformer.training.attribution import mass_on_top, top1_agreement


def verdict_alone(d, margin: float, direction: str) -> str:
    """A seed-mean claim's verdict by the pipeline's own rule, as a family of one."""
    found = protocol.effect("seed_mean", [np.asarray(d, float)], margin, direction)
    return protocol.decide({"claim": found}, 0.05)[0]["claim"]


# Attention: top-1 agreement, controls -----------------------------------------------------------

ROWS, RESIDUES, SEEDS = 300, 12, 8


def _importance(rng):
    """One residue per row matters (1 to 3 nats); the others are near-zero noise."""
    importance = np.abs(rng.normal(0, 0.01, (ROWS, RESIDUES)))
    top = rng.integers(RESIDUES, size=ROWS)
    importance[np.arange(ROWS), top] = rng.uniform(1, 3, ROWS)
    return importance, top


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _seed_values(make_attention):
    values = []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        importance, top = _importance(rng)
        values.append(top1_agreement(make_attention(rng, importance, top), importance))
    return np.array(values)


def test_attention_that_is_importance_by_construction_is_not_supported():
    values = _seed_values(
        lambda rng, imp, top: _softmax(imp / 0.3) + rng.uniform(0, 0.01, imp.shape)
    )
    assert values.min() > 0.9
    assert verdict_alone(values, 0.5, "less") == REFUTED


def test_attention_independent_of_importance_is_supported():
    def elsewhere(rng, importance, top):
        attention = rng.dirichlet(np.ones(RESIDUES), ROWS)
        attention[np.arange(ROWS), rng.integers(RESIDUES, size=ROWS)] += 5.0
        return attention

    values = _seed_values(elsewhere)
    assert values.max() < 0.3
    assert verdict_alone(values, 0.5, "less") == SUPPORTED


def test_v3s_rank_correlation_fails_where_top1_agreement_does_not():
    # Both peaked on the same residue, the rest independent noise near zero: v3's Spearman
    # is driven by the near-zero ranks and says "not importance"; top-1 says it is.
    from tcrformer.training.attribution import spearman_rows

    rhos, agreement = [], []
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        importance, top = _importance(rng)
        attention = rng.uniform(0, 0.02, (ROWS, RESIDUES))
        attention[np.arange(ROWS), top] = 0.8
        rhos.append(np.nanmean(spearman_rows(attention, importance)))
        agreement.append(top1_agreement(attention, importance))
    assert verdict_alone(np.array(rhos), 0.5, "less") == SUPPORTED  # v3's metric, fooled
    assert verdict_alone(np.array(agreement), 0.5, "less") == REFUTED


@pytest.mark.parametrize(("planted", "verdict"), [(0.3, SUPPORTED), (0.7, REFUTED)])
def test_agreement_estimates_a_planted_share_between_the_extremes(planted, verdict):
    # Calibration (review, attention row): attention's top is importance's top in a share
    # `planted` of the rows, another residue otherwise; the estimate lands within 0.05 of
    # it and the verdict against the margin 0.5 follows the planted side.
    def planted_share(rng, importance, top):
        elsewhere = (top + rng.integers(1, RESIDUES, size=ROWS)) % RESIDUES
        peak = np.where(rng.random(ROWS) < planted, top, elsewhere)
        attention = rng.dirichlet(np.ones(RESIDUES), ROWS)
        attention[np.arange(ROWS), peak] += 5.0
        return attention

    values = _seed_values(planted_share)
    assert abs(values.mean() - planted) < 0.05
    assert verdict_alone(values, 0.5, "less") == verdict


def test_agreement_splits_ties_and_leaves_out_rows_without_a_top_residue():
    attention = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    importance = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1e-4], [0.0, 2.0, 2.0]])
    # row 1: attention ties on {0, 1}, importance top {0}: 1/2; row 2 left out (below 1e-3);
    # row 3: attention top {2}, importance ties {1, 2}: 1/2.
    assert top1_agreement(attention, importance) == pytest.approx(0.5)
    assert mass_on_top(attention, importance) == pytest.approx((0.5 + 0.4) / 2)


def _reverser(length):
    """A model that reverses by construction: step t puts its mass on source letter
    L - 1 - t (then <eos>), so occluding that residue, and only it, costs log-probability."""
    import torch

    from tcrformer.training.data import EOS as END
    from tcrformer.training.data import VOCAB_SIZE

    class Reverser(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Parameter(torch.zeros(1))

        def forward(self, src, tgt_in, src_mask, tgt_mask):
            logits = torch.zeros(*tgt_in.shape, VOCAB_SIZE)
            for t in range(tgt_in.size(1)):
                token = src[:, length - 1 - t] if t < length else torch.full_like(src[:, 0], END)
                logits[torch.arange(src.size(0)), t, token] = 6.0
            return logits

    return Reverser()


@pytest.mark.parametrize(("shift", "verdict"), [(0, REFUTED), (1, SUPPORTED)])
def test_attention_controls_through_v3s_occlusion_on_a_model(shift, verdict):
    # Positive (shift 0): attention one-hot on the residue the model reads; negative
    # (shift 1): on its neighbour. Importance comes from v3's occlusion code itself.
    torch = pytest.importorskip("torch")
    from tcrformer.training.attribution import importance
    from tcrformer.training.data import random_batch

    length, values = 10, []
    for seed in range(SEEDS):
        src, tgt = random_batch(16, length, length, torch.Generator().manual_seed(seed))
        steps = torch.arange(length)
        read = length - 1 - steps  # the source position step t reads
        attention = torch.zeros(src.size(0), length, length, dtype=torch.float64)
        attention[:, steps, (read + shift) % length] = 1.0
        found = importance(_reverser(length), src, tgt)[:, :length, :length]  # residue steps
        values.append(top1_agreement(attention.reshape(-1, length).numpy(),
                                     found.reshape(-1, length).numpy()))  # fmt: skip
    assert values == [1.0 - shift] * SEEDS
    assert verdict_alone(np.array(values), 0.5, "less") == verdict


# Beam: net wins, controls on a toy model -------------------------------------------------------

torch = pytest.importorskip("torch")
VOCAB, BOS, EOS, PAD, FLOOR = 23, 1, 2, 0, 1e-12
TRAP, EASY, LOSE, CUT = 3, 4, 5, 6  # the source's first token says which table the toy reads


def _table(kind: int, prefix: tuple[int, ...]) -> np.ndarray:
    """The toy's next-token distribution given the source's kind and the output so far."""
    p = np.full(VOCAB, FLOOR)
    residues = np.arange(3, VOCAB)
    if kind == TRAP:  # greedy takes a (0.6) and then has 20 ways at 0.05: beam finds b <eos>
        if prefix == ():
            p[3], p[4] = 0.6, 0.4
        elif prefix == (3,):
            p[residues] = 0.05
        else:
            p[EOS] = 1.0
    elif kind == EASY:  # position-dependent only: greedy is exactly optimal
        if len(prefix) < 3:
            p[residues] = 0.5 / 19
            p[5] = 0.5
        else:
            p[EOS] = 1.0
    elif kind == CUT:  # greedy writes a <eos>; beam's b b b b never ends and scores higher
        if prefix == ():
            p[3], p[4] = 0.55, 0.45
        elif prefix == (3,):
            p[residues] = 0.7 / 20
            p[EOS] = 0.3
        elif prefix[:1] == (4,):
            p[4] = 1.0
        else:
            p[EOS] = 1.0
    else:  # LOSE: greedy's prefix a is pushed out of a width-2 beam by b's two continuations
        if prefix == ():
            p[3], p[4], p[5] = 0.4, 0.3, 0.3
        elif prefix == (3,):
            p[residues] = 0.9 / 19
            p[6] = 0.1
        elif prefix[:1] == (3,):
            p[EOS] = 1.0
        elif prefix == (4,):
            p[7], p[8] = 0.5, 0.5
        else:
            p[residues] = 0.05
    return np.log(p / p.sum())


class Toy(torch.nn.Module):
    """encode/decode as the project's encoder-decoders, reading `_table`."""

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def encode(self, src, src_mask):
        return src.double().unsqueeze(-1)

    def decode(self, tgt_in, memory, src_mask, tgt_mask):
        kinds = memory[:, 0, 0].long().tolist()
        rows = [[_table(kind, tuple(row[1 : t + 1])) for t in range(len(row))]
                for kind, row in zip(kinds, tgt_in.tolist(), strict=True)]  # fmt: skip
        return torch.tensor(np.array(rows))


def _net_wins(kinds, width):
    from tcrformer.models.decoding import beam_search, sequence_log_prob
    from tcrformer.models.transformer import greedy_decode
    from tcrformer.training.measures import same_through_eos

    model, src = Toy(), torch.tensor([[k, k] for k in kinds])
    greedy = greedy_decode(model, src, max_len=4, bos=BOS, eos=EOS, pad_idx=PAD)
    beam, _ = beam_search(model, src, 4, BOS, EOS, width, PAD)
    return beam_outcomes(sequence_log_prob(model, src, greedy, EOS, PAD).numpy(),
                         sequence_log_prob(model, src, beam, EOS, PAD).numpy(),
                         same_through_eos(greedy, beam).numpy())  # fmt: skip


def test_the_beam_snapshot_is_the_first_with_room_read_from_greedy_alone():
    from tcrclaims.metrics import GREEDY_ROOM, room_step

    assert GREEDY_ROOM == (0.2, 0.9)
    # one seed's greedy exact by step, unordered on purpose: 300 has no room (0.05), 500 is
    # the first in step order that has, 700 has too, 1000 is at the ceiling
    assert room_step({1000: 0.95, 700: 0.6, 300: 0.05, 500: 0.5}) == 500
    assert room_step({300: 0.1, 1000: 0.95}) is None  # below, then above: never room
    assert room_step({}) is None
    assert room_step({300: 0.9, 500: 0.5}) == 300  # the ends are inside
    assert room_step({300: 0.19, 500: 0.2}) == 500
    assert room_step({300: 0.91, 500: 0.95}) is None
    assert room_step({300: 0.05, 500: 0.5}, room=(0.0, 0.1)) == 300  # the room is a parameter


def test_an_output_without_eos_loses_to_one_with_it_whatever_their_scores():
    # beam's output never wrote <eos> and scores higher (its score lacks the <eos> term):
    # a loss; ignoring whether each finished, the same scores would count as a win
    unfinished_beam = dict(greedy_logprob=[-5.0], beam_logprob=[-1.0], same_output=[False])
    found = beam_outcomes(**unfinished_beam, greedy_finished=[True], beam_finished=[False])
    assert (found["wins"], found["ties"], found["losses"], found["net_wins"]) == (0, 0, 1, -1.0)
    assert beam_outcomes(**unfinished_beam)["wins"] == 1  # every output taken as finished
    # and the other way round: greedy's unfinished output loses to beam's finished one
    unfinished_greedy = dict(greedy_logprob=[-1.0], beam_logprob=[-5.0], same_output=[False])
    found = beam_outcomes(**unfinished_greedy, greedy_finished=[False], beam_finished=[True])
    assert (found["wins"], found["ties"], found["losses"], found["net_wins"]) == (1, 0, 0, 1.0)
    assert beam_outcomes(**unfinished_greedy)["losses"] == 1
    # between two unfinished outputs, as between two finished ones, the more probable wins;
    # equal scores tie only when both finished alike; the same output always ties
    g, b = [-5.0, -1.0, -2.0, -2.0, -2.0, -7.0], [-1.0, -5.0, -2.0, -2.0, -2.0, -1.0]
    same = [False, False, False, False, False, True]
    found = beam_outcomes(g, b, same, greedy_finished=[False, False, True, False, True, True],
                          beam_finished=[False, False, False, False, True, True])  # fmt: skip
    # win, loss, loss (only greedy finished), tie, tie, tie (same output)
    assert (found["wins"], found["ties"], found["losses"]) == (1, 3, 2)
    assert found["net_wins"] == pytest.approx(-1 / 6)


def test_the_beam_metrics_count_a_cut_off_beam_output_as_a_loss():
    # On the toy, greedy writes a <eos> (0.55 x 0.3) while beam's b b b b is cut off at the
    # length limit with a higher teacher-forced score (0.45, no <eos> term): beam loses.
    from tcrformer.models.decoding import sequence_log_prob
    from tcrformer.training import measures

    model, src = Toy(), torch.tensor([[CUT, CUT]] * 3)
    tgt = torch.tensor([[BOS, 3, EOS, PAD, PAD]] * 3)  # max_len 4: greedy's output is right
    found = measures.beam_metrics(model, src, tgt, width=4)
    assert (found["beam_wins"], found["beam_ties"], found["beam_losses"]) == (0, 0, 3)
    assert (found["greedy_exact"], found["beam_exact"]) == (3, 0)
    assert found["beam_logprob"] > found["greedy_logprob"]  # scores alone: a win
    beam_out = torch.tensor([[BOS, 4, 4, 4, 4]] * 3)
    assert found["beam_logprob"] == pytest.approx(
        float(sequence_log_prob(model, src, beam_out, EOS, PAD).mean())
    )


def _beam_evaluation(fractions, monkeypatch):
    """An arm's evaluation with a snapshot Toy per step of `fractions` ({step: greedy exact
    fraction}, which measures.exact_rows is stubbed to give for that snapshot's model), and
    the models measures.beam_metrics was run on."""
    from types import SimpleNamespace

    from tcrclaims.metrics import ArmEvaluation
    from tcrformer.training import measures

    src = torch.tensor([[k, k] for k in (TRAP, EASY, LOSE, CUT)])
    tgt = torch.tensor([[BOS, 4, EOS, PAD, PAD]] * 4)
    snapshots = {step: Toy() for step in fractions}
    exact = {id(model): fractions[step] for step, model in snapshots.items()}

    def exact_rows(model, src, tgt):
        return torch.arange(src.size(0)) < round(exact[id(model)] * src.size(0))

    ran, beam_metrics = [], measures.beam_metrics

    def recorded(model, *args):
        ran.append(model)
        return beam_metrics(model, *args)

    monkeypatch.setattr(measures, "exact_rows", exact_rows)
    monkeypatch.setattr(measures, "beam_metrics", recorded)
    recipe = SimpleNamespace(name="baseline", steps=3000)
    e = ArmEvaluation(Toy(), recipe, src, tgt, None, beam_width=4, snapshots=snapshots)
    return e, ran


def test_the_beam_extra_runs_beam_at_the_first_snapshot_with_greedy_room(monkeypatch):
    from tcrclaims.metrics import EXTRAS, METRICS
    from tcrformer.training import measures

    real = measures.beam_metrics
    # only 200 has room: 100 below it, 300 above (the last step)
    e, ran = _beam_evaluation({100: 0.0, 200: 0.5, 300: 1.0}, monkeypatch)
    EXTRAS["beam"](e, (100, 200, 300))
    assert e.numbers["greedy_by_step"] == {100: 0.0, 200: 0.5, 300: 1.0}
    assert e.numbers["beam_step"] == 200
    assert ran == [e.snapshots[200]]  # beam ran once, on the weights of step 200
    at_200 = real(e.snapshots[200], e.src, e.tgt, 4)
    assert {k: e.numbers[k] for k in at_200} == at_200
    # TRAP: beam wins; EASY and LOSE (width 4 keeps greedy's path): ties; CUT: beam's
    # output is cut off, a loss
    assert (at_200["beam_wins"], at_200["beam_ties"], at_200["beam_losses"]) == (1, 2, 1)
    assert METRICS["beam_net_wins"].compute(e) == 0.0
    assert METRICS["has_room"].compute(e) == 1.0
    # TRAP's target is beam's b <eos>, which greedy misses: beam gains one string of four
    assert (at_200["beam_exact"], at_200["greedy_exact"]) == (1, 0)
    assert METRICS["beam_exact_gain"].compute(e) == 0.25


def test_a_seed_without_greedy_room_has_no_beam_value(monkeypatch):
    from tcrclaims.metrics import EXTRAS, METRICS

    e, ran = _beam_evaluation({100: 0.0, 200: 0.0, 300: 1.0}, monkeypatch)
    EXTRAS["beam"](e, (100, 200, 300))
    assert e.numbers["greedy_by_step"] == {100: 0.0, 200: 0.0, 300: 1.0}
    assert e.numbers["beam_step"] is None
    assert ran == [] and "beam_wins" not in e.numbers  # beam never ran
    assert math.isnan(METRICS["beam_net_wins"].compute(e))
    assert math.isnan(METRICS["beam_exact_gain"].compute(e))
    assert METRICS["has_room"].compute(e) == 0.0


def test_beam_wins_where_greedy_is_provably_suboptimal():
    found = _net_wins([TRAP, EASY] * 4, width=4)
    assert (found["wins"], found["losses"], found["ties"]) == (4, 0, 4)
    seeds = [found["net_wins"]] * SEEDS  # every synthetic seed alike: 0.5 net wins
    assert (
        verdict_alone(np.array(seeds) + np.linspace(0, 1e-3, SEEDS), 0.01, "greater") == SUPPORTED
    )


def test_beam_ties_where_greedy_is_optimal():
    found = _net_wins([EASY] * 8, width=4)
    assert (found["wins"], found["losses"], found["net_wins"]) == (0, 0, 0.0)
    assert verdict_alone(np.zeros(SEEDS), 0.01, "greater") == REFUTED


def test_beam_can_lose_and_the_metric_counts_it():
    found = _net_wins([LOSE] * 3, width=2)
    assert (found["wins"], found["losses"]) == (0, 3)
    assert found["net_wins"] == -1.0
