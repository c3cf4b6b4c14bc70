"""Residue-level attribution (training.attribution): cross-attention against occlusion
importance, on cases whose answer is known, on real models, and on a quickly trained one."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tcrformer.training import attribution, measures
from tcrformer.training.data import FIRST_RESIDUE, PAD, VOCAB_SIZE, random_batch
from tcrformer.training.loop import train
from tcrformer.training.model import build_model
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import default_config

torch.set_num_threads(1)
KEYS = {"residue_rho", "residue_rho_by_layer", "residue_rows", "replacements"}
TINY = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, dropout=0.1, norm="post")


def strings(n=60, low=4, high=12, seed=1):
    return random_batch(n, low, high, torch.Generator().manual_seed(seed))


def lengths(src):
    return (src != PAD).sum(1)


def tiny_model(impl="fast", layers=2, seed=0):
    torch.manual_seed(seed)
    return build_model({**TINY, "num_layers": layers}, impl).eval()


# A model whose answer is known: it reads source residue L-1-t at step t -------------------------


class Recorded:
    """Stands in for a decoder layer: its cross_attn.attn is what the model last looked at."""

    def __init__(self):
        self.cross_attn = self
        self.attn = None


class Reverser(nn.Module):
    """Writes the reversal: at step t all its belief (logit 10) is on source residue L-1-t, so
    replacing that residue costs log p(y_t) exactly 10 nats and replacing any other costs 0.
    Its cross-attention (every layer, one head) is looks(read, real): read (B, Lt, Ls) is the
    one-hot of the residue read, real (B, 1, Ls) the source's residues."""

    def __init__(self, looks, layers=2):
        super().__init__()
        self.looks = looks
        self.decoder = nn.Module()
        self.decoder.layers = [Recorded() for _ in range(layers)]

    def forward(self, src, tgt_in, src_mask, tgt_mask):
        B, Ls = src.shape
        steps = torch.arange(tgt_in.size(1))
        read = (lengths(src)[:, None] - 1 - steps).clamp(min=0)  # (B, Lt)
        logits = torch.zeros(B, steps.numel(), VOCAB_SIZE)
        logits.scatter_(2, src.gather(1, read)[..., None], 10.0)
        weights = self.looks(F.one_hot(read, Ls).double(), src_mask.double())  # (B, Lt, Ls)
        for layer in self.decoder.layers:
            layer.attn = weights[:, None]  # (B, 1, Lt, Ls)
        return logits


def looks_where_it_reads(read, real):
    return read * real


def looks_everywhere_else(read, real):
    return (1 - read) * real


def looks_at_random(read, real):
    generator = torch.Generator().manual_seed(read.numel())  # one draw per batch shape
    return torch.rand(read.shape, generator=generator, dtype=torch.float64) * real


def test_importance_is_the_cost_of_replacing_the_residue_read():
    src, tgt = strings()
    importance = attribution.importance(Reverser(looks_where_it_reads), src, tgt)  # (B, Lt, Ls)
    steps = torch.arange(tgt.size(1) - 1)
    read = F.one_hot((lengths(src)[:, None] - 1 - steps).clamp(min=0), src.size(1)).double()
    letters = (steps < lengths(src)[:, None])[..., None]  # (B, Lt, 1): the residue steps
    torch.testing.assert_close(importance * letters, 10.0 * read * letters)


def test_attention_on_the_residue_that_matters_gives_one():
    src, tgt = strings()
    out = attribution.residue_attribution(Reverser(looks_where_it_reads), src, tgt)
    assert set(out) == KEYS and out["replacements"] == 3
    assert out["residue_rho"] == pytest.approx(1.0)
    assert out["residue_rho_by_layer"] == pytest.approx([1.0, 1.0])
    assert out["residue_rows"] == [int(lengths(src).sum())] * 2  # every residue step, no <eos>


def test_the_sign_is_kept_attention_everywhere_else_gives_minus_one():
    src, tgt = strings()
    out = attribution.residue_attribution(Reverser(looks_everywhere_else), src, tgt)
    assert out["residue_rho"] == pytest.approx(-1.0)
    assert out["residue_rho_by_layer"] == pytest.approx([-1.0, -1.0])


def test_attention_independent_of_importance_gives_about_zero():
    src, tgt = strings(n=200, low=8, high=16)
    out = attribution.residue_attribution(Reverser(looks_at_random), src, tgt)
    assert out["residue_rows"][0] == int(lengths(src).sum())  # 2400 rows or so
    assert abs(out["residue_rho"]) < 0.05  # one row's rho: sd about 1 / sqrt(L - 1)


@pytest.mark.parametrize("impl", ["fast", "reference"])
@pytest.mark.parametrize(("sign", "rho"), [(1.0, 1.0), (-1.0, -1.0)])
def test_a_real_models_attention_taken_as_importance_gives_plus_or_minus_one(
    monkeypatch, impl, sign, rho
):
    """One decoder layer, its own cross-attention (times `sign`) as the importance: the
    model's recorded weights and the importance meet on the same (string, step, residue)."""
    model = tiny_model(impl, layers=1)
    src, tgt = strings()

    def attention_as_importance(model, src, tgt, replacements, seed):
        tgt_in = tgt[:, :-1]
        return sign * attribution.cross_attention_by_layer(model, src, tgt_in)[0]

    monkeypatch.setattr(attribution, "importance", attention_as_importance)
    out = attribution.residue_attribution(model, src, tgt)
    assert out["residue_rho"] == pytest.approx(rho)
    assert out["residue_rows"] == [int(lengths(src).sum())]


def test_a_real_models_attention_against_random_importance_gives_about_zero(monkeypatch):
    generator = torch.Generator().manual_seed(3)

    def random_importance(model, src, tgt, replacements, seed):
        return torch.rand(*src.shape[:1], tgt.size(1) - 1, src.size(1), generator=generator)

    monkeypatch.setattr(attribution, "importance", random_importance)
    src, tgt = strings(n=200, low=8, high=16)
    out = attribution.residue_attribution(tiny_model(), src, tgt)
    assert all(abs(rho) < 0.05 for rho in out["residue_rho_by_layer"])


@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_the_attention_is_each_layers_heads_mean(impl):
    model, (src, tgt) = tiny_model(impl), strings()
    with torch.no_grad():
        mine = attribution.cross_attention_by_layer(model, src, tgt[:, :-1])  # (N, B, Lt, Ls)
    for layer in (1, 2):
        heads = measures.cross_attention(model, src, tgt, layer)  # (B, h, Lt, Ls)
        torch.testing.assert_close(mine[layer - 1], heads.double().mean(1))


def test_row_spearman_is_scipys_with_constant_and_nan_rows_left_out():
    from scipy import stats

    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (200, 7)).astype(float)  # many ties
    y = rng.normal(size=(200, 7))
    y[:5] = 1.0  # constant rows
    x[5, 3] = np.nan
    got = attribution.spearman_rows(x, y)
    want = [stats.spearmanr(a, b).statistic for a, b in zip(x[6:], y[6:], strict=True)]
    np.testing.assert_allclose(got[6:], want, rtol=0, atol=1e-12)
    assert np.isnan(got[:6]).all()
    ties = rng.integers(0, 3, (3, 4, 9)).astype(float)  # any leading shape
    np.testing.assert_array_equal(attribution.average_ranks(ties),
                                  stats.rankdata(ties, axis=-1))  # fmt: skip
    assert attribution.spearman_rows([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)


# Replacements and padding ------------------------------------------------------------------------


def test_a_replacement_is_another_amino_acid_drawn_from_the_seed():
    src, _ = strings(n=200)
    string, position, letter = attribution.occlusions(src, replacements=3, seed=0)
    original = src[string, position]
    assert (original >= FIRST_RESIDUE).all()  # residues only, never padding
    assert ((letter >= FIRST_RESIDUE) & (letter < VOCAB_SIZE)).all()
    assert (letter != original).all()
    assert string.numel() == 3 * int(lengths(src).sum())  # each residue 3 times
    for aa in range(FIRST_RESIDUE, VOCAB_SIZE):  # every other letter can come in
        assert set(letter[original == aa].tolist()) == set(range(FIRST_RESIDUE, VOCAB_SIZE)) - {aa}
    again = attribution.occlusions(src, replacements=3, seed=0)[2]
    other = attribution.occlusions(src, replacements=3, seed=1)[2]
    assert torch.equal(letter, again) and not torch.equal(letter, other)


def test_every_occluded_string_differs_from_its_original_in_one_residue(monkeypatch):
    src, tgt = strings(n=30)
    seen = []
    log_probs = attribution.log_probs

    def recorded(model, src, tgt_in, tgt_out):
        seen.append(src)
        return log_probs(model, src, tgt_in, tgt_out)

    monkeypatch.setattr(attribution, "log_probs", recorded)
    attribution.importance(tiny_model(), src, tgt, replacements=3)
    assert torch.equal(seen[0], src)  # the baseline pass
    occluded = torch.cat(seen[1:])  # (M, Ls)
    string, position, _ = attribution.occlusions(src, 3, 0)
    differs = occluded != src[string]  # (M, Ls)
    assert (differs.sum(1) == 1).all() and differs[torch.arange(len(string)), position].all()
    assert (occluded[differs] >= FIRST_RESIDUE).all()


def test_padding_never_enters():
    """The same strings padded 5 wider (source and target) give the same rows."""
    src, tgt = strings(n=80)
    wide_src, wide_tgt = F.pad(src, (0, 5), value=PAD), F.pad(tgt, (0, 5), value=PAD)
    model = tiny_model()
    out = attribution.residue_attribution(model, src, tgt)
    wide = attribution.residue_attribution(model, wide_src, wide_tgt)
    assert out["residue_rows"] == wide["residue_rows"] == [int(lengths(src).sum())] * 2
    assert wide["residue_rho_by_layer"] == pytest.approx(out["residue_rho_by_layer"], abs=1e-6)
    with torch.no_grad():
        narrow_i = attribution.importance(model, src, tgt)
        wide_i = attribution.importance(model, wide_src, wide_tgt)
    Lt, Ls = narrow_i.shape[1:]
    assert (wide_i[:, :, Ls:] == 0).all()  # padding is never replaced
    torch.testing.assert_close(wide_i[:, :Lt, :Ls], narrow_i, rtol=0, atol=1e-5)


# A trained model ---------------------------------------------------------------------------------


def test_a_quickly_trained_model_gives_finite_signed_correlations():
    section = default_config()["reversal"]
    recipe = with_overrides(recipe_from_config(section), d_model=32, num_heads=2, d_ff=64,
                            num_layers=2, steps=400, batch_size=64, warmup=100, min_len=4,
                            max_len=8, cdr3="CASSIRS", device="cpu", log_every=1000,
                            checkpoint_every=100000, eval_n=200)  # fmt: skip
    model = train(recipe).model
    src, tgt = strings(n=200, low=4, high=8, seed=1)
    out = attribution.residue_attribution(model, src, tgt, replacements=2, seed=5)
    assert set(out) == KEYS and out["replacements"] == 2
    assert len(out["residue_rho_by_layer"]) == len(out["residue_rows"]) == 2
    values = [out["residue_rho"], *out["residue_rho_by_layer"]]
    assert all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in values)
    assert all(0 < rows <= int(lengths(src).sum()) for rows in out["residue_rows"])
    assert out["residue_rho"] == pytest.approx(np.mean(out["residue_rho_by_layer"]))
