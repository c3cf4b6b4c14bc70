"""The GRU with attention (the bottleneck control): its count and size matching, padding,
the decoders that drive it, and training it, where it reverses what the plain GRU cannot."""

from __future__ import annotations

import pytest
import torch
from test_rnn import BOS, EOS, HIDDEN, LAYERS, PAD, V, sources  # one small setting for both

from tcrformer.models import transformer
from tcrformer.models.counting import count_parameters
from tcrformer.models.decoding import beam_search, sequence_log_prob, through_first_eos
from tcrformer.models.rnn import (
    GruAttentionEncoderDecoder,
    GruEncoderDecoder,
    gru_attention_parameter_count,
    gru_hidden_for,
    gru_parameter_count,
)
from tcrformer.training import measures
from tcrformer.training.data import VOCAB_SIZE
from tcrformer.training.loop import train
from tcrformer.training.model import build_model, load_model, save_model, state_dicts_equal
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import default_config

torch.set_num_threads(1)
# A reversal small enough to train here in seconds: 1 + 1 layers, strings of 8..10 letters.
TINY = dict(d_model=32, num_heads=2, d_ff=64, num_layers=1, cross_attention_layer=1,
            batch_size=32, dropout=0.0, label_smoothing=0.0, schedule="linear", peak_lr=3e-3,
            warmup=20, log_every=10**6, checkpoint_every=10**6, device="cpu", eval_n=200,
            min_len=8, max_len=10, cdr3="CASSIRSSY", seed=0)  # fmt: skip


def build(seed: int = 0, **kwargs) -> GruAttentionEncoderDecoder:
    torch.manual_seed(seed)
    shape = {"hidden": HIDDEN, "num_layers": LAYERS, **kwargs}
    return GruAttentionEncoderDecoder(V, V, **shape).eval()


def through_eos(row: torch.Tensor) -> list[int]:
    """A row's tokens up to and including its first <eos> (all of them without one)."""
    return row[: 1 + int(through_first_eos(row[None, 1:], EOS).sum())].tolist()


def tiny(**changes):
    return with_overrides(recipe_from_config(default_config()["reversal"]), **{**TINY, **changes})


# The count and the size --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hidden", "src_vocab", "tgt_vocab", "layers"),
    [(16, 12, 12, 2), (7, 30, 5, 1), (32, 4, 9, 3), (1, 12, 12, 1)],
)
def test_the_closed_form_counts_the_modules(hidden, src_vocab, tgt_vocab, layers):
    model = GruAttentionEncoderDecoder(src_vocab, tgt_vocab, hidden, layers)
    count = gru_attention_parameter_count(hidden, src_vocab, tgt_vocab, layers)
    assert count == count_parameters(model)
    without = gru_parameter_count(hidden, src_vocab, tgt_vocab, layers)
    assert count - without == 3 * hidden * hidden  # W_a and W_c, nothing else


def test_the_shared_modules_are_the_plain_grus_drawn_alike():
    """The control differs by its attention only: the same modules, drawn in the same order."""
    torch.manual_seed(0)
    plain = GruEncoderDecoder(V, V, HIDDEN, LAYERS).state_dict()
    control = build().state_dict()
    assert set(control) - set(plain) == {"score.weight", "combine.weight"}
    assert all(torch.equal(plain[k], control[k]) for k in plain)


@pytest.mark.parametrize("target", [1_000, 25_000, 123_457, 2_000_000])
@pytest.mark.parametrize("layers", [1, 2])
def test_gru_hidden_for_sizes_the_attention_variant(target, layers):
    hidden = gru_hidden_for(target, V, V, layers, attention=True)
    count = count_parameters(GruAttentionEncoderDecoder(V, V, hidden, layers))
    nearby = range(max(1, hidden - 5), hidden + 6)
    errors = [abs(gru_attention_parameter_count(h, V, V, layers) - target) for h in nearby]
    assert abs(count - target) == min(errors)  # the closest of its neighbours


def test_gru_hidden_for_recovers_an_exact_size_and_keeps_the_plain_one():
    for hidden in (1, 16, 100, 513):
        exact = gru_attention_parameter_count(hidden, V, 20, 2)
        assert gru_hidden_for(exact, V, 20, 2, attention=True) == hidden
        assert gru_hidden_for(gru_parameter_count(hidden, V, 20, 2), V, 20, 2) == hidden
    assert gru_hidden_for(2_000_000, V, V, attention=True) < gru_hidden_for(2_000_000, V, V)


# Shapes and padding ------------------------------------------------------------------------------


def test_shapes_and_the_masks_passed_in_change_nothing():
    model, (src, _) = build(), sources()
    tgt_in = torch.randint(3, V, (6, 5))
    memory = model.encode(src)
    assert memory.state.shape == (LAYERS, 6, HIDDEN)
    assert memory.outputs.shape == (6, 8, HIDDEN) and memory.keep.shape == (6, 8)
    logits = model.decode(tgt_in, memory)
    assert logits.shape == (6, 5, V)
    assert torch.equal(model(src, tgt_in), logits)
    assert torch.equal(model(src, tgt_in, *transformer.make_masks(src, tgt_in)), logits)
    repeated = model.repeat_memory(memory, 3)
    assert repeated.state.shape == (LAYERS, 18, HIDDEN) and repeated.outputs.shape[0] == 18
    assert torch.equal(repeated.outputs[3], memory.outputs[1])
    assert torch.equal(repeated.keep[5], memory.keep[1])


def test_attention_ignores_the_padding():
    """A padded row writes what it writes alone, whatever the padding would feed in."""
    model, (src, lengths) = build(), sources()
    tgt_in = torch.randint(3, V, (6, 5))
    logits = model(src, tgt_in)
    weights = model.attention_weights(model.decoder(model.tgt_embed(tgt_in))[0], model.encode(src))
    padding = (src == PAD).unsqueeze(1).expand_as(weights)
    assert (weights[padding] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, 5))
    for row, length in enumerate(lengths.tolist()):
        alone = model(src[row : row + 1, :length], tgt_in[row : row + 1])
        torch.testing.assert_close(alone[0], logits[row], atol=1e-6, rtol=0)
    longer = torch.cat([src, torch.zeros(6, 4, dtype=torch.long)], dim=1)  # more padding
    torch.testing.assert_close(model(longer, tgt_in), logits, atol=1e-6, rtol=0)


def test_every_source_position_reaches_the_first_output():
    """Through attention the first letter read is one step from the decoder: changing it
    moves the first logits even with the final state held fixed."""
    model, (src, _) = build(), sources()
    memory = model.encode(src)
    changed = src.clone()
    changed[:, 0] = torch.where(src[:, 0] == 3, 4, 3)
    other = model.encode(changed)
    mixed = other._replace(state=memory.state)  # other outputs, the same final state
    start = torch.full((6, 1), BOS)
    assert not torch.allclose(model.decode(start, mixed), model.decode(start, memory))


# The decoders drive it ---------------------------------------------------------------------------


def test_greedy_decode_runs_it():
    model, (src, _) = build(), sources()
    ys = transformer.greedy_decode(model, src, max_len=7, bos=BOS, eos=EOS)
    assert ys.shape[0] == 6 and 2 <= ys.shape[1] <= 8 and (ys[:, 0] == BOS).all()
    for step in range(1, ys.shape[1]):  # each token is the argmax given the ones before
        logits = model.decode(ys[:, :step], model.encode(src))[:, -1]
        assert torch.equal(ys[:, step], logits.argmax(-1))


@pytest.mark.parametrize("width", [1, 3])
def test_beam_search_runs_it_and_scores_its_outputs(width):
    model, (src, _) = build(), sources()
    tokens, scores = beam_search(model, src, 7, BOS, EOS, width)
    assert tokens.shape[0] == 6 and (tokens[:, 0] == BOS).all()
    torch.testing.assert_close(
        scores, sequence_log_prob(model, src, tokens, EOS), atol=1e-5, rtol=0
    )
    if width == 1:  # greedy's output, through each row's first <eos>
        greedy = transformer.greedy_decode(model, src, 7, BOS, EOS)
        assert [through_eos(r) for r in tokens] == [through_eos(r) for r in greedy]


# Training ----------------------------------------------------------------------------------------


def test_a_gru_attention_recipe_trains_and_its_weights_reload(tmp_path):
    recipe = tiny(arch="gru_attention", steps=4, warmup=2)
    trained = train(recipe)
    assert isinstance(trained.model, GruAttentionEncoderDecoder)
    transformer_size = count_parameters(build_model(tiny().architecture(), recipe.impl))
    width = gru_hidden_for(transformer_size, VOCAB_SIZE, VOCAB_SIZE, 1, attention=True)
    plain = gru_hidden_for(transformer_size, VOCAB_SIZE, VOCAB_SIZE, 1)
    assert trained.recipe.gru_hidden == width != plain  # sized by its own closed form
    assert torch.isfinite(trained.losses).all()
    architecture = trained.recipe.architecture()
    assert architecture["arch"] == "gru_attention" and architecture["gru_hidden"] == width
    save_model(tmp_path / "model.safetensors", trained.model, architecture)
    loaded, _ = load_model(tmp_path / "model.safetensors", recipe.impl)
    assert isinstance(loaded, GruAttentionEncoderDecoder)
    assert state_dicts_equal(loaded, trained.model)


def test_attention_reverses_what_the_bottleneck_forgets():
    """500 steps on strings of 8..10 letters, both GRUs the Transformer's size: without
    attention almost none are exact (~0 with this seed), with it most are (~0.85)."""
    exact = {}
    for arch in ("gru", "gru_attention"):
        trained = train(tiny(arch=arch, steps=500))
        src, tgt = measures.heldout(trained.recipe)
        exact[arch] = measures.exact_rows(trained.model, src, tgt).float().mean().item()
    assert exact["gru"] < 0.2 and exact["gru_attention"] > 0.5, exact
