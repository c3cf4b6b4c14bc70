"""A training recipe: everything that shapes a trained model, read from the `reversal:`
config section, and the device it runs on.

A recipe has one name, which is also the folder its results go to and the prefix of its
keys in values.json. The `reversal:` section holds two:

    reversal   the paper's recipe (seed section 10.9): the `reversal:` keys
    speedrun   a time-to-accuracy recipe: the keys of `reversal.speedrun` laid over those

The ensemble and claims chapters train variants of them (another seed, an arm's changes).
Every number comes from the config (whose defaults live in the schema); nothing here
repeats the seed's values. The task and the held-out test are the same for all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from tcrformer.core.config import ConfigError

RECIPES = ("reversal", "speedrun")

# Keys that shape training; a checkpoint is only resumed by a recipe that agrees on all.
_TRAINING_FIELDS = (
    "steps",
    "batch_size",
    "min_len",
    "max_len",
    "d_model",
    "num_heads",
    "d_ff",
    "num_layers",
    "dropout",
    "norm",
    "schedule",
    "peak_lr",
    "lr_scale",
    "warmup",
    "label_smoothing",
    "beta1",
    "beta2",
    "eps",
    "grad_clip",
    "seed",
    "impl",
    "compile",
    "precision",
    "init",
    "positions",
    "score_scale",
    "arch",
    "gru_hidden",
    "train_set",
)
# What the model is, beyond its sizes: saved with the weights when not the paper's default.
_ARCHITECTURE_DEFAULTS = {"positions": True, "score_scale": True, "arch": "transformer"}


@dataclass(frozen=True)
class Recipe:
    name: str  # reversal (the paper's) | speedrun: its folder and the prefix of its keys
    # the task
    min_len: int
    max_len: int
    # the model
    d_model: int
    num_heads: int
    d_ff: int
    num_layers: int
    dropout: float
    norm: str  # post (the paper) | pre
    # the optimisation
    steps: int
    batch_size: int
    schedule: str  # noam | noam_flat | linear (training.schedule)
    peak_lr: float
    warmup: int
    label_smoothing: float
    beta1: float
    beta2: float
    eps: float
    grad_clip: float
    seed: int
    # how it runs
    impl: str  # reference | fast
    device: str  # auto | cpu | cuda
    compile: bool
    precision: str  # fp32 | bf16 (autocast)
    checkpoint_every: int
    log_every: int
    # the model's parts (the claims chapter's arms change them; the paper's are the defaults)
    init: str = "xavier"  # xavier (the paper) | linear_default | default (models.transformer)
    positions: bool = True  # add the sinusoidal positional encoding
    score_scale: bool = True  # divide the attention scores by sqrt(d_k)
    arch: str = "transformer"  # transformer | gru (a recurrent encoder-decoder, no attention)
    gru_hidden: int | None = None  # gru: hidden width; None matches the transformer's size
    lr_scale: float = 1.0  # a factor on the schedule's rate (1: the paper's)
    train_set: int | None = None  # None: fresh strings every step; N: one fixed set of N
    # evaluation (None in a recipe built for training alone: see training_params)
    report_every: int | None = None
    eval_n: int | None = None
    eval_seed: int | None = None
    cdr3: str | None = None
    cross_attention_layer: int | None = None  # 1-based decoder layer

    @property
    def config_path(self) -> str:
        """Where this recipe's keys live in the config, for error messages."""
        return "reversal" if self.name == "reversal" else "reversal.speedrun"

    def architecture(self) -> dict[str, Any]:
        """What rebuilds the model from its weights (saved with them)."""
        keys = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "norm")
        architecture = {k: getattr(self, k) for k in keys}
        for key, default in _ARCHITECTURE_DEFAULTS.items():  # only where not the paper's
            if getattr(self, key) != default:
                architecture[key] = getattr(self, key)
        if self.arch == "gru":
            architecture["gru_hidden"] = self.gru_hidden
        return architecture

    def fingerprint(self) -> str:
        """Hash of everything that shapes the trained weights (not logging, not evaluation)."""
        training = {k: getattr(self, k) for k in _TRAINING_FIELDS}
        return hashlib.sha256(json.dumps(training, sort_keys=True).encode()).hexdigest()[:16]

    def training_params(self) -> dict[str, Any]:
        """What training reads, and so what a change of retrains: Recipe(**these) trains the
        same weights (the evaluation fields stay None)."""
        keys = (*_TRAINING_FIELDS, "name", "device", "checkpoint_every", "log_every")
        return {k: getattr(self, k) for k in keys}

    def params(self) -> dict[str, Any]:
        """Every field, for a rule's params: Recipe(**these) is this recipe."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def report_steps(self) -> list[int]:
        """The steps whose training loss goes to values.json: every report_every steps."""
        return list(range(self.report_every, self.steps + 1, self.report_every))


def recipe_from_config(section: Mapping[str, Any], name: str = "reversal") -> Recipe:
    """The paper's recipe from config['reversal'], or the speedrun laid over it."""
    if name not in RECIPES:
        raise ConfigError("recipe", name, f"must be one of {', '.join(RECIPES)}")
    values = _flat(section)
    if name == "speedrun":
        values.update(_flat(section.get("speedrun") or {}))
    known = {f.name for f in fields(Recipe)} - {"name"}
    values.pop("recipe", None)
    if values.get("cross_attention_layer") == "last":
        values["cross_attention_layer"] = values["num_layers"]
    recipe = Recipe(name=name, **{k: v for k, v in values.items() if k in known})
    _check(recipe)
    return recipe


def _flat(section: Mapping[str, Any]) -> dict[str, Any]:
    """{'adam': {'beta1': ..}, 'steps': ..} -> {'beta1': .., 'steps': ..}."""
    flat = {k: v for k, v in section.items() if not isinstance(v, Mapping)}
    flat.update(section.get("adam") or {})
    return flat


def _check(recipe: Recipe) -> None:
    """What the schema cannot say: bounds that involve two keys."""
    where = recipe.config_path
    if recipe.min_len > recipe.max_len:
        raise ConfigError(
            "reversal.min_len", recipe.min_len, f"greater than reversal.max_len = {recipe.max_len}"
        )
    if recipe.d_model % recipe.num_heads:
        raise ConfigError(
            f"{where}.d_model", recipe.d_model, f"not divisible by num_heads = {recipe.num_heads}"
        )
    if recipe.schedule == "linear" and recipe.warmup >= recipe.steps:
        raise ConfigError(
            f"{where}.warmup",
            recipe.warmup,
            f"the linear schedule needs warmup < steps = {recipe.steps}",
        )
    if recipe.cross_attention_layer is None:  # built for training alone
        return
    if not 1 <= recipe.cross_attention_layer <= recipe.num_layers:
        raise ConfigError(
            "reversal.cross_attention_layer",
            recipe.cross_attention_layer,
            f"must name a decoder layer, 1..{recipe.num_layers}",
        )
    if not recipe.min_len <= len(recipe.cdr3) <= recipe.max_len:
        raise ConfigError(
            "reversal.cdr3",
            recipe.cdr3,
            f"length {len(recipe.cdr3)} is outside the trained lengths "
            f"{recipe.min_len}..{recipe.max_len}",
        )


def with_overrides(recipe: Recipe, **changes: Any) -> Recipe:
    """A copy of the recipe with some fields changed (tests, the benchmark); checked again."""
    changed = replace(recipe, **changes)
    _check(changed)
    return changed


def resolve_device(requested: str, key: str = "reversal.device"):
    """auto -> cuda when a GPU is visible, else cpu; cuda without a GPU is a config error."""
    import torch

    if requested not in ("auto", "cpu", "cuda"):
        raise ConfigError(key, requested, "must be one of auto, cpu, cuda")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError(key, requested, "no CUDA GPU is visible here; use auto or cpu")
    if requested == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")
