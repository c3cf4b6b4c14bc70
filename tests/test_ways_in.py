"""One trainer: every key of a recipe reaches the weights through every way into training.

The ways in are the chapters' own training functions: the reversal chapter (on 1 worker and
on 2), an ensemble job and a claims arm. Each calls training.loop.train. For every key of
the records that shape the bits (Recipe.fingerprint), a tiny recipe is trained with the key
changed:
- the ways give the same bits for the same recipe: the weights, and the losses as the
  results files hold them (to LOSS_DIGITS; a claims arm keeps no weights);
- the changed key changes those bits, through every way (`grad_clip: 0` trains without
  clipping, and does not zero the gradients);
- 2 workers train the bits of 1, whatever the key.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields

import numpy as np
import pytest
import torch

from tcrclaims.compute import train_claim_arm
from tcrformer.chapters.ensemble.compute import train_ensemble
from tcrformer.chapters.reversal.compute import train_reversal
from tcrformer.training import recipe as recipes
from tcrformer.training.loop import train
from tcrformer.training.recipe import recipe_from_config, with_overrides
from tcrformer.training.values import LOSS_DIGITS

from conftest import default_config

torch.set_num_threads(1)
TINY = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, cross_attention_layer=1, steps=4,
            batch_size=8, warmup=2, dropout=0.1, grad_clip=1.0, log_every=100,
            checkpoint_every=100, device="cpu", eval_n=8, report_every=2)  # fmt: skip

# One other value for every field that shapes the bits. A field added to one of those
# records fails test_every_key_that_shapes_the_bits_is_changed_here until it is listed.
CHANGES = {
    "seed": {"seed": 1},
    "min_len": {"min_len": 9},
    "max_len": {"max_len": 17},
    "train_set": {"train_set": 32},
    "d_model": {"d_model": 24},
    "num_heads": {"num_heads": 4},
    "d_ff": {"d_ff": 48},
    "num_layers": {"num_layers": 1},
    "dropout": {"dropout": 0.0},
    "norm": {"norm": "pre"},
    "init": {"init": "linear_default"},
    "positions": {"positions": False},
    "score_scale": {"score_scale": False},
    "arch": {"arch": "gru"},
    "gru_hidden": {"arch": "gru", "gru_hidden": 12},  # the GRU's own width by default
    "steps": {"steps": 5},
    "batch_size": {"batch_size": 6},
    "schedule": {"schedule": "linear"},
    "peak_lr": {"schedule": "linear", "peak_lr": 2e-3},  # noam's rate has no peak_lr
    "lr_scale": {"lr_scale": 0.5},
    "warmup": {"warmup": 3},
    "label_smoothing": {"label_smoothing": 0.0},
    "beta1": {"beta1": 0.8},
    "beta2": {"beta2": 0.95},
    "eps": {"eps": 1e-3},
    "grad_clip": {"grad_clip": 0.0},  # 0: no clipping
    "stress_step": {"stress_step": 2, "stress_scale": 100.0},  # one bad batch at step 2
    "stress_scale": {"stress_step": 2, "stress_scale": 10.0, "grad_clip": 0.0},
    "impl": {"impl": "reference"},
    "precision": {"precision": "bf16"},
    "compile": {"compile": True},
    "chunks": {"chunks": 3},
}
# Reaches the trainer (the fingerprint) but is not trained here:
# torch.compile takes minutes on the CPU, and compiled bits need not differ.
NOT_TRAINED = {"compile"}
# What a change is compared against, where not TINY: the key matters only with another.
BASE_OF = {"gru_hidden": {"arch": "gru"}, "peak_lr": {"schedule": "linear"},
           # unclipped: a clipped bad batch has the same norm at any scale
           "stress_scale": {"stress_step": 2, "stress_scale": 100.0, "grad_clip": 0.0}}  # fmt: skip
TWO_WORKER_KEYS = ("grad_clip", "init", "train_set", "label_smoothing", "chunks")


def tiny(**changes):
    return with_overrides(recipe_from_config(default_config()["reversal"]), **{**TINY, **changes})


def digest(*tensors) -> str:
    sha = hashlib.sha256()
    for tensor in tensors:
        sha.update(tensor.detach().double().contiguous().numpy().tobytes())
    return sha.hexdigest()[:16]


def state_digest(model) -> str:
    return digest(*model.state_dict().values())


def via_reversal(recipe, tmp, workers=1) -> dict:
    out = train_reversal(recipe, tmp / "reversal", {}, workers)
    path = tmp / "model.safetensors"
    out["model"](path)
    from tcrformer.training.model import load_model

    loaded, _ = load_model(path, recipe.impl)
    return {"losses": digest(torch.tensor(out["losses"]["loss"].to_numpy())),
            "weights": state_digest(loaded)}  # fmt: skip


def via_ensemble(recipe, tmp) -> dict:
    out = train_ensemble(recipe, tmp / "ensemble", {})
    path = tmp / "models.safetensors"
    out["models"](path)
    from tcrformer.training.model import load_seed_model

    return {"losses": digest(torch.tensor(out["losses"]["loss"].to_numpy())),
            "weights": state_digest(load_seed_model(path, recipe.seed, recipe.impl))}  # fmt: skip


def via_claims(recipe, tmp) -> dict:
    out = train_claim_arm(recipe, recipe, tmp / "claims", {})
    losses = np.round(out["history"]["loss"].to_numpy(), LOSS_DIGITS)  # as losses.csv has them
    return {"losses": digest(torch.tensor(losses))}


WAYS = {"reversal": via_reversal, "ensemble": via_ensemble, "claims": via_claims}


def test_every_key_that_shapes_the_bits_is_changed_here():
    shaping = {"seed"} | {f.name for record in recipes.SHAPES_BITS
                          for f in fields(recipes.RECORDS[record])}  # fmt: skip
    assert set(CHANGES) == shaping, shaping ^ set(CHANGES)
    for key, change in CHANGES.items():  # each change is a valid recipe that moves its key
        base, changed = tiny(**BASE_OF.get(key, {})), tiny(**change)
        assert getattr(changed, key) != getattr(base, key), key
        assert changed.fingerprint() != base.fingerprint(), key


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """{(way, key or None): bits} for every way in and every trained key (None: TINY)."""
    cases = [(None, {}), *((k, c) for k, c in CHANGES.items() if k not in NOT_TRAINED),
             *(("base " + k, b) for k, b in BASE_OF.items())]  # fmt: skip
    bits = {}
    for key, change in cases:
        recipe = tiny(**change)
        for way, through in WAYS.items():
            bits[way, key] = through(recipe, tmp_path_factory.mktemp(f"{way}-{key}"))
    return bits


@pytest.mark.parametrize("key", [None, *(k for k in CHANGES if k not in NOT_TRAINED)])
def test_the_one_rank_ways_in_train_the_same_bits(trained, key):
    reversal, ensemble, claims = (trained[way, key] for way in WAYS)
    assert reversal == ensemble, key
    assert claims["losses"] == reversal["losses"], key


@pytest.mark.parametrize("key", [k for k in CHANGES if k not in NOT_TRAINED])
@pytest.mark.parametrize("way", list(WAYS))
def test_each_key_changes_the_bits_through_each_way(trained, way, key):
    base = trained[way, "base " + key if key in BASE_OF else None]
    assert trained[way, key]["losses"] != base["losses"], (way, key)


def test_grad_clip_0_is_no_clipping_not_zeroed_gradients():
    """grad_clip 0 trains as a bound no gradient reaches does, and unlike a tight bound."""
    none, huge, tight = (train(tiny(grad_clip=c)) for c in (0.0, 1e9, 1e-3))
    assert digest(none.losses) == digest(huge.losses)
    assert state_digest(none.model) == state_digest(huge.model)
    assert digest(none.losses) != digest(tight.losses)


@pytest.mark.parametrize("key", TWO_WORKER_KEYS)
def test_two_workers_train_the_bits_of_one(tmp_path, key):
    """The key changes the bits on 2 workers too, and 2 workers train exactly what 1 does."""
    one, two = (via_reversal(tiny(**CHANGES[key]), tmp_path / str(w), workers=w) for w in (1, 2))
    assert one == two
    base = via_reversal(tiny(), tmp_path / "base", workers=2)
    assert two["losses"] != base["losses"] and two["weights"] != base["weights"]


def test_three_chunks_on_one_two_and_three_workers_give_one_set_of_bits(tmp_path):
    """Every split of 3 chunks over workers (all in one process; 2 + 1; one each) trains the
    same weights and losses, and the record names the workers that ran."""
    runs = {w: via_reversal(tiny(chunks=3), tmp_path / str(w), workers=w) for w in (1, 2, 3)}
    assert runs[1] == runs[2] == runs[3]
    out = train_reversal(tiny(chunks=3), tmp_path / "record", {}, workers=3)
    assert out["numerics"]["workers"] == 3 and out["numerics"]["chunks"] == 3
    assert out["numerics"]["step"] == "hand-written"


@pytest.mark.parametrize(
    ("change", "why"),
    [({"impl": "reference"}, "impl reference"), ({"precision": "bf16"}, "precision bf16"),
     ({"arch": "gru"}, "arch gru")],
)  # fmt: skip
def test_what_the_hand_written_step_does_not_cover_falls_back_and_says_so(tmp_path, change, why):
    """A recipe the hand-written step does not cover trains with autograd in one process,
    and the training's record says so: nothing falls back silently."""
    out = train_reversal(tiny(**change), tmp_path, {}, workers=2)
    assert out["numerics"]["step"] == f"autograd: the hand-written step covers no {why}"
    assert out["numerics"]["workers"] == 1
