"""The `notes:` config section, typed; every bad value is a ConfigError naming its key.

Fig. 12 (teacher forcing and the masks) shows the receptor of the toy chapter, padded with
`figures.pad_tokens`; those two values are read here too, since this chapter draws its masks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.config import ConfigError
from tcrformer.models.positional import spread_dims

PERIOD_FRACTIONS = (0, 1 / 4, 1 / 2, 1)  # notes.pe.period_dims null: where, along d_model


@dataclass(frozen=True)
class Positional:
    table_positions: int
    probe_position: int
    probe_dims: int
    cosine_pairs: tuple[tuple[int, int], ...]
    period_dims: tuple[int, ...]


@dataclass(frozen=True)
class Parity:
    seed: int
    batch: int
    length: int


@dataclass(frozen=True)
class Shapes:
    batch: int
    src_len: int
    tgt_len: int


@dataclass(frozen=True)
class Page2:
    seq_len: int
    d_model: int
    nhead: int
    dim_feedforward: int
    seed: int


@dataclass(frozen=True)
class Settings:
    d_model: int
    num_heads: int
    d_ff: int
    num_layers: int
    src_vocab: int
    tgt_vocab: int
    dropout: float
    max_len: int
    seed: int
    pe: Positional
    parity: Parity
    shapes: Shapes
    page2: Page2
    masks_sequence: str  # Fig. 12: toy.sequence
    pad_tokens: int  # Fig. 12: figures.pad_tokens

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        notes = config["notes"]
        pe = notes["pe"]
        settings = cls(
            **{k: notes[k] for k in ("d_model", "num_heads", "d_ff", "num_layers", "src_vocab",
                                     "tgt_vocab", "dropout", "max_len", "seed")},
            pe=Positional(
                table_positions=pe["table_positions"],
                probe_position=pe["probe_position"],
                probe_dims=pe["probe_dims"],
                cosine_pairs=tuple(tuple(pair) for pair in pe["cosine_pairs"]),
                period_dims=tuple(
                    pe["period_dims"] if pe.get("period_dims") is not None
                    else spread_dims(notes["d_model"], PERIOD_FRACTIONS)
                ),
            ),
            parity=Parity(**notes["parity"]),
            shapes=Shapes(**notes["shapes"]),
            page2=Page2(**notes["page2"]),
            masks_sequence=config["toy"]["sequence"],
            pad_tokens=config["figures"]["pad_tokens"],
        )  # fmt: skip
        settings.check()
        return settings

    def check(self) -> None:
        _check_width("notes", self.d_model, "notes.num_heads", self.num_heads)
        for i, dim in enumerate(self.pe.period_dims):
            if dim >= self.d_model:
                raise ConfigError(
                    f"notes.pe.period_dims[{i}]", dim, f"not below notes.d_model = {self.d_model}"
                )
        if self.pe.probe_dims > self.d_model:
            raise ConfigError(
                "notes.pe.probe_dims",
                self.pe.probe_dims,
                f"more than notes.d_model = {self.d_model}",
            )
        for key in ("src_len", "tgt_len"):
            if getattr(self.shapes, key) > self.max_len:
                raise ConfigError(
                    f"notes.shapes.{key}",
                    getattr(self.shapes, key),
                    f"longer than notes.max_len = {self.max_len}",
                )
        _check_width("notes.page2", self.page2.d_model, "notes.page2.nhead", self.page2.nhead)


def _check_width(prefix: str, d_model: int, heads_key: str, heads: int) -> None:
    """d_model must be even (sin/cos pairs) and split evenly into heads."""
    if d_model % 2:
        raise ConfigError(f"{prefix}.d_model", d_model, "must be even (sin/cos pairs)")
    if d_model % heads:
        raise ConfigError(f"{prefix}.d_model", d_model, f"not divisible by {heads_key} = {heads}")
