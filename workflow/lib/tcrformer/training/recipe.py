"""A training recipe: everything that shapes a trained model, read from the `reversal:`
config section, and the device it runs on.

A recipe has one name, which is also the folder its results go to and the prefix of its
keys in values.json. The `reversal:` section holds two:

    reversal   the paper's recipe (explainer section 10.9): the `reversal:` keys
    speedrun   a time-to-accuracy recipe: the keys of `reversal.speedrun` laid over those

The ensemble and claims chapters train variants of them (another seed, an arm's changes).
Every number comes from the config (whose defaults live in the schema); nothing here
repeats the explainer's values. The task and the held-out test are the same for all.

A recipe is its name and seed and six frozen records: task, model, optimiser, runtime
(each of these shapes the bits), host (where it runs and how often it writes) and
evaluation. The fingerprint, which keys checkpoints and the between-run cache, is read
from the records that shape the bits, so a new field is covered by the record it is
declared in; no list of names is kept apart from the records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from tcrformer.core.config import ConfigError

RECIPES = ("reversal", "speedrun")


# The records a recipe is made of ---------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """What is learnt, and from which strings."""

    min_len: int
    max_len: int
    train_set: int | None = None  # None: fresh strings every step; N: one fixed set of N


@dataclass(frozen=True)
class Model:
    """The network (the claims chapter's arms change its parts; the paper's are the defaults)."""

    d_model: int
    num_heads: int
    d_ff: int
    num_layers: int
    dropout: float
    norm: str  # post (the paper) | pre
    init: str = "xavier"  # xavier (the paper) | linear_default | default (models.transformer)
    positions: bool = True  # add the sinusoidal positional encoding
    score_scale: bool = True  # divide the attention scores by sqrt(d_k)
    arch: str = "transformer"  # transformer | gru (recurrent, no attention) | gru_attention
    gru_hidden: int | None = None  # gru: hidden width; None matches the transformer's size


@dataclass(frozen=True)
class Optimiser:
    """The loss and how it is minimised."""

    steps: int
    batch_size: int
    schedule: str  # noam | noam_flat | linear (training.schedule)
    peak_lr: float
    warmup: int
    label_smoothing: float
    beta1: float
    beta2: float
    eps: float
    grad_clip: float  # 0: no clipping
    lr_scale: float = 1.0  # a factor on the schedule's rate (1: the paper's)
    # One bad batch (the claims' clipping stress): at step stress_step (0: never) the loss,
    # and so the gradient, is stress_scale times the batch's.
    stress_step: int = 0
    stress_scale: float = 1.0


@dataclass(frozen=True)
class Runtime:
    """How the arithmetic runs: each of these changes the bits."""

    impl: str  # reference | fast
    compile: bool
    precision: str  # fp32 | bf16 (autocast)
    # The hand-written step's chunks of a batch (training.step): each computed alone, with
    # dropout draws of its own, and summed in order; any number of workers runs them.
    chunks: int = 2


@dataclass(frozen=True)
class Host:
    """Where it runs and how often it writes: never the bits on a given device."""

    device: str  # auto | cpu | cuda
    checkpoint_every: int
    log_every: int
    # Steps whose weights are kept beside the checkpoint (training.checkpoints.snapshot_path),
    # for measures taken at several points of one run (the claims' eval-mode excess).
    snapshot_steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class EvaluationPlan:
    """What the trained model is asked (all None in a recipe built for training alone)."""

    report_every: int | None = None
    eval_n: int | None = None
    eval_seed: int | None = None
    cdr3: str | None = None
    cross_attention_layer: int | None = None  # 1-based decoder layer


# Which records shape the trained weights: the fingerprint (checkpoint resume, the between-run
# cache) and a rule's training params are read from them, so a field added to one of these
# records is covered where it is declared.
RECORDS = {"task": Task, "model": Model, "optimiser": Optimiser, "runtime": Runtime,
           "host": Host, "evaluation": EvaluationPlan}  # fmt: skip
SHAPES_BITS = ("task", "model", "optimiser", "runtime")
# Fields left out of the fingerprint while at their defaults: a recipe that does not use them
# has the same fingerprint (checkpoints, cache entries) as a recipe without them.
_UNHASHED_AT_DEFAULT = {"stress_step": 0, "stress_scale": 1.0}
# Host fields left out of a rule's params while at their defaults: a rule that does not use
# them has the same params, so it does not rerun (a changed param reruns a rule).
_UNLISTED_AT_DEFAULT = {"snapshot_steps": ()}
_TOP = ("name", "seed")  # the recipe's own fields; the seed seeds init, batches and dropout
_OWNER = {f.name: record for record, kind in RECORDS.items() for f in fields(kind)}
# What the model is beyond its sizes: saved with the weights only where not the paper's.
_OPTIONAL_PARTS = {f.name: f.default for f in fields(Model)
                   if f.name in ("positions", "score_scale", "arch")}  # fmt: skip


def _known_fields(names) -> None:
    unknown = set(names) - set(_OWNER) - set(_TOP)
    if unknown:
        raise TypeError(f"not a recipe field: {', '.join(sorted(unknown))}")


@dataclass(frozen=True)
class Recipe:
    """A training recipe: its name and seed, and its records. A field reads through to its
    record (recipe.steps is recipe.optimiser.steps); field names are unique across records."""

    name: str  # reversal (the paper's) | speedrun: its folder and the prefix of its keys
    seed: int
    task: Task
    model: Model
    optimiser: Optimiser
    runtime: Runtime
    host: Host
    evaluation: EvaluationPlan = EvaluationPlan()

    def __getattr__(self, key: str) -> Any:  # only for names that are not the Recipe's own
        record = _OWNER.get(key)
        if record is None:
            raise AttributeError(f"a Recipe has no field {key!r}")
        return getattr(object.__getattribute__(self, record), key)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Recipe:
        """The inverse of params() and training_params() (a rule's params)."""
        _known_fields(params)
        values = {**params}
        if "snapshot_steps" in values:  # a list in JSON and YAML
            values["snapshot_steps"] = tuple(values["snapshot_steps"])
        records = {
            record: kind(**{f.name: values[f.name] for f in fields(kind) if f.name in values})
            for record, kind in RECORDS.items()
        }
        return cls(name=params["name"], seed=params["seed"], **records)

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some fields changed, each in its record (unchecked: with_overrides)."""
        _known_fields(changes)
        updates = {k: changes[k] for k in _TOP if k in changes}
        for record in RECORDS:
            mine = {k: v for k, v in changes.items() if _OWNER.get(k) == record}
            if mine:
                updates[record] = replace(getattr(self, record), **mine)
        return replace(self, **updates)

    @property
    def config_path(self) -> str:
        """Where this recipe's keys live in the config, for error messages."""
        return "reversal" if self.name == "reversal" else "reversal.speedrun"

    def architecture(self) -> dict[str, Any]:
        """What rebuilds the model from its weights (saved with them)."""
        keys = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "norm")
        architecture = {k: getattr(self.model, k) for k in keys}
        for key, default in _OPTIONAL_PARTS.items():  # only where not the paper's
            if getattr(self.model, key) != default:
                architecture[key] = getattr(self.model, key)
        if self.model.arch in ("gru", "gru_attention"):
            architecture["gru_hidden"] = self.model.gru_hidden
        return architecture

    def _flat(self, records) -> dict[str, Any]:
        flat = {}
        for record in records:
            flat.update(asdict(getattr(self, record)))
        for key, default in _UNLISTED_AT_DEFAULT.items():
            if key in flat and flat[key] == default:
                del flat[key]
        return flat

    def fingerprint(self) -> str:
        """Hash of everything that shapes the trained weights: the seed and the records of
        SHAPES_BITS (not where it runs, not logging, not evaluation)."""
        training = {"seed": self.seed, **self._flat(SHAPES_BITS)}
        for key, default in _UNHASHED_AT_DEFAULT.items():
            if training[key] == default:
                del training[key]
        return hashlib.sha256(json.dumps(training, sort_keys=True).encode()).hexdigest()[:16]

    def training_params(self) -> dict[str, Any]:
        """What training reads, and so what a change of retrains: Recipe.from_params(these)
        trains the same weights (its evaluation record is empty)."""
        return {"name": self.name, "seed": self.seed,
                **self._flat([r for r in RECORDS if r != "evaluation"])}  # fmt: skip

    def params(self) -> dict[str, Any]:
        """Every field, flat, for a rule's params: Recipe.from_params(these) is this recipe."""
        return {"name": self.name, "seed": self.seed, **self._flat(RECORDS)}

    def report_steps(self) -> list[int]:
        """The steps whose training loss goes to values.json: every report_every steps."""
        every = self.evaluation.report_every
        return list(range(every, self.optimiser.steps + 1, every))


def recipe_from_config(section: Mapping[str, Any], name: str = "reversal") -> Recipe:
    """The paper's recipe from config['reversal'], or the speedrun laid over it."""
    if name not in RECIPES:
        raise ConfigError("recipe", name, f"must be one of {', '.join(RECIPES)}")
    values = _flat(section)
    if name == "speedrun":
        values.update(_flat(section.get("speedrun") or {}))
    values.pop("recipe", None)
    if values.get("cross_attention_layer") == "last":
        values["cross_attention_layer"] = values["num_layers"]
    known = {k: v for k, v in values.items() if k in _OWNER or k == "seed"}
    recipe = Recipe.from_params({"name": name, **known})
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
    if any(not 1 <= step <= recipe.steps for step in recipe.snapshot_steps):
        raise ConfigError(
            f"{where}.snapshot_steps", list(recipe.snapshot_steps), f"outside 1..{recipe.steps}"
        )
    if recipe.stress_step > recipe.steps:
        raise ConfigError(
            f"{where}.stress_step", recipe.stress_step, f"after the last step ({recipe.steps})"
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
    changed = recipe.replace(**changes)
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
