"""Build the reversal model from a recipe, and save or load its weights.

Both implementations share one state-dict layout, so the weights file does not say which
one wrote it; its metadata records the architecture, which is all a reader needs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tcrformer.core.io import ResultFileError, atomic_path
from tcrformer.training.data import VOCAB_SIZE

IMPLEMENTATIONS = ("reference", "fast")
GRU_ARCHS = ("gru", "gru_attention")  # recurrent, sized by gru_hidden; with attention or not


def build_model(architecture: dict[str, Any], impl: str, init: str = "xavier") -> nn.Module:
    """An encoder-decoder over the reversal vocabulary; weights drawn from torch's global RNG.

    init: xavier (the paper's), linear_default or default (models.transformer.initialise).
    """
    arch = architecture.get("arch", "transformer")
    if arch in GRU_ARCHS:
        from tcrformer.models.rnn import GruAttentionEncoderDecoder, GruEncoderDecoder

        layers, dropout = architecture["num_layers"], architecture["dropout"]
        hidden = architecture["gru_hidden"]
        kind = GruAttentionEncoderDecoder if arch == "gru_attention" else GruEncoderDecoder
        return kind(VOCAB_SIZE, VOCAB_SIZE, hidden, layers, dropout)
    shape = dict(
        src_vocab=VOCAB_SIZE,
        tgt_vocab=VOCAB_SIZE,
        d_model=architecture["d_model"],
        num_heads=architecture["num_heads"],
        d_ff=architecture["d_ff"],
        num_layers=architecture["num_layers"],
        dropout=architecture["dropout"],
    )
    switches = dict(
        norm_first=architecture.get("norm") == "pre",
        positions=architecture.get("positions", True),
        score_scale=architecture.get("score_scale", True),
        init=init,
    )
    if impl == "reference":
        from tcrformer.models.transformer import EncoderDecoder

        return EncoderDecoder(**shape, **switches)
    if impl == "fast":
        from tcrformer.models.fast import EncoderDecoder

        return EncoderDecoder(**shape, **switches)
    raise ValueError(f"unknown implementation {impl!r}; expected one of {IMPLEMENTATIONS}")


def save_model(path: str | Path, model: nn.Module, architecture: dict[str, Any]) -> None:
    """Weights as safetensors, the architecture as JSON metadata; written atomically."""
    save_models(path, {None: model}, architecture)


def save_models(
    path: str | Path, models: Mapping[int | None, nn.Module], architecture: dict[str, Any]
) -> None:
    """Several seeds' weights in one file, keys `seed<s>.<name>` (plain names for None)."""
    from safetensors.torch import save_file

    state, seeds = {}, [s for s in models if s is not None]
    for seed, model in models.items():
        prefix = "" if seed is None else f"seed{seed}."
        state.update({prefix + k: _own(v) for k, v in model.state_dict().items()})
    metadata = {"architecture": json.dumps(architecture)}
    if seeds:
        metadata["seeds"] = json.dumps(seeds)
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata=metadata)


def _own(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU copy with storage of its own (a parameter may be a view of the
    hand-written step's flat buffer, and safetensors refuses tensors that share storage)."""
    return tensor.detach().cpu().clone(memory_format=torch.contiguous_format)


def _read(path: str | Path) -> tuple[dict[str, Any], dict[str, str], dict]:
    """(architecture, metadata, state dict) of a weights file; errors name the file."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        architecture = json.loads(metadata["architecture"])
        state = load_file(str(path))
    except FileNotFoundError:
        raise ResultFileError(f"{path}: file not found") from None
    except (KeyError, json.JSONDecodeError) as err:
        raise ResultFileError(f"{path}: no architecture metadata ({err})") from None
    except Exception as err:  # safetensors raises its own error types for a corrupt header
        raise ResultFileError(f"{path}: not a readable safetensors file ({err})") from None
    return architecture, metadata, state


def _rebuild(path, architecture: dict[str, Any], state: dict, impl: str) -> nn.Module:
    try:
        model = build_model(architecture, impl)
    except ValueError as err:
        raise ResultFileError(f"{path}: cannot be read as impl {impl!r} ({err})") from None
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ResultFileError(f"{path}: weights do not fit the model ({err})") from None
    return model.eval()


def load_model(path: str | Path, impl: str) -> tuple[nn.Module, dict[str, Any]]:
    """The model saved by save_model, rebuilt as `impl`, in eval mode, on the CPU."""
    architecture, _, state = _read(path)
    return _rebuild(path, architecture, state, impl), architecture


def load_seed_model(path: str | Path, seed: int, impl: str) -> nn.Module:
    """One seed's model from a file written by save_models."""
    architecture, metadata, state = _read(path)
    if seed not in json.loads(metadata.get("seeds", "[]")):
        raise ResultFileError(f"{path}: holds no weights of seed {seed}")
    prefix = f"seed{seed}."
    mine = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    return _rebuild(path, architecture, mine, impl)


def state_dicts_equal(a: nn.Module, b: nn.Module) -> bool:
    """True when both models hold the same keys and bit-identical tensors."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def with_gru_size(recipe):
    """A GRU arm without a width gets the one that matches the Transformer's parameter count
    (with its own closed form: gru_attention holds 3 H^2 more)."""
    if recipe.arch not in GRU_ARCHS or recipe.gru_hidden is not None:
        return recipe
    from tcrformer.models.counting import count_parameters
    from tcrformer.models.rnn import gru_hidden_for

    transformer = recipe.replace(arch="transformer")
    size = count_parameters(build_model(transformer.architecture(), transformer.impl))
    attention = recipe.arch == "gru_attention"
    hidden = gru_hidden_for(size, VOCAB_SIZE, VOCAB_SIZE, recipe.num_layers, attention=attention)
    return recipe.replace(gru_hidden=hidden)
