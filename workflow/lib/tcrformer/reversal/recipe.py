"""A training recipe read from the `reversal:` config section, and the device it runs on.

Every number comes from the config (whose defaults live in the schema); nothing here
repeats the seed's values. The speedrun recipe is the paper recipe with the keys of
`reversal.speedrun` laid over it; the task and the held-out test are not among them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..config import ConfigError

RECIPES = ("paper", "speedrun")
KEY_PREFIX = {"paper": "reversal", "speedrun": "speedrun"}
"""Prefix of the recipe's keys in values.json."""

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
)


@dataclass(frozen=True)
class Recipe:
    name: str  # paper | speedrun
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
    schedule: str  # noam: d^-0.5 min(t^-0.5, t w^-1.5) | linear: warm up to peak_lr, decay to 0
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
    # evaluation
    report_every: int
    eval_n: int
    eval_seed: int
    cdr3: str
    cross_attention_layer: int  # 1-based decoder layer

    @property
    def key_prefix(self) -> str:
        return KEY_PREFIX[self.name]

    @property
    def config_path(self) -> str:
        """Where this recipe's keys live in the config, for error messages."""
        return "reversal" if self.name == "paper" else "reversal.speedrun"

    def architecture(self) -> dict[str, Any]:
        keys = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "norm")
        return {k: getattr(self, k) for k in keys}

    def fingerprint(self) -> str:
        """Hash of everything that shapes the trained weights (not logging, not evaluation)."""
        training = {k: getattr(self, k) for k in _TRAINING_FIELDS}
        return hashlib.sha256(json.dumps(training, sort_keys=True).encode()).hexdigest()[:16]

    def training_params(self) -> dict[str, Any]:
        """What a change of should retrain: the training fields and the requested device."""
        return {
            "name": self.name,
            "device": self.device,
            **{k: getattr(self, k) for k in _TRAINING_FIELDS},
        }

    def evaluation_params(self) -> dict[str, Any]:
        """What a change of should re-evaluate (without retraining)."""
        keys = ("eval_n", "eval_seed", "cdr3", "cross_attention_layer", "report_every", "impl")
        return {k: getattr(self, k) for k in keys}

    def report_steps(self) -> list[int]:
        """The steps whose training loss goes to values.json: every report_every steps."""
        return list(range(self.report_every, self.steps + 1, self.report_every))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def recipe_from_config(section: Mapping[str, Any], name: str = "paper") -> Recipe:
    """The paper recipe from config['reversal'], or the speedrun laid over it."""
    if name not in RECIPES:
        raise ConfigError("recipe", name, f"must be one of {', '.join(RECIPES)}")
    values = _flat(section)
    if name == "speedrun":
        values.update(_flat(section.get("speedrun") or {}))
    known = {f.name for f in fields(Recipe)} - {"name"}
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
    if recipe.impl == "reference" and recipe.norm != "post":
        raise ConfigError(
            f"{where}.impl",
            "reference",
            "the reference model is Post-LN only; use impl: fast with norm: pre",
        )
    if recipe.schedule == "linear" and recipe.warmup >= recipe.steps:
        raise ConfigError(
            f"{where}.warmup",
            recipe.warmup,
            f"the linear schedule needs warmup < steps = {recipe.steps}",
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
