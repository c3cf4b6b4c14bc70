"""The `toy:` config section, typed; every bad value is a ConfigError naming its key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.config import ConfigError

D_K = 2  # every toy head works in two dimensions, so it can be drawn in the plane


@dataclass(frozen=True)
class Head:
    """One hand-set head: W_Q, W_K, W_V as sparse [feature, column, value] entries; W_Q may
    instead be a rotation query {rotate: slow|fast, offset: k, scale: s}."""

    name: str
    Q: Any
    K: Any
    V: Any


@dataclass(frozen=True)
class Block:
    """The random weights of the pre-LN block and its LayerNorm."""

    seed: int
    init_std: float
    d_ff: int
    layer_norm_eps: float


@dataclass(frozen=True)
class Scaling:
    """The sqrt(d_k) demonstration: n_keys random queries and keys of width d_k."""

    d_k: int
    n_keys: int
    seed: int


@dataclass(frozen=True)
class Settings:
    sequence: str
    pe_base: float
    pe_dims: int
    focus_position: int  # 1-based
    heads: tuple[Head, ...]
    block: Block
    scaling: Scaling
    long_protein_length: int

    @property
    def width(self) -> int:
        """Columns of the input X: 4 chemistry numbers and the position numbers."""
        return 4 + self.pe_dims

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        toy = config["toy"]
        settings = cls(
            sequence=toy["sequence"],
            pe_base=toy["pe_base"],
            pe_dims=toy["pe_dims"],
            focus_position=toy["focus_position"],
            heads=tuple(Head(h["name"], h["Q"], h["K"], h["V"]) for h in toy["heads"]),
            block=Block(**toy["block"]),
            scaling=Scaling(**toy["scaling"]),
            long_protein_length=toy["long_protein_length"],
        )
        if settings.focus_position > len(settings.sequence):
            raise ConfigError(
                "toy.focus_position",
                settings.focus_position,
                f"outside toy.sequence (length {len(settings.sequence)})",
            )
        heads = len(settings.heads)
        if D_K * heads != settings.width:
            raise ConfigError(
                "toy.heads", f"{heads} heads",
                f"{heads} heads of width {D_K} must fill the {settings.width} input columns "
                "(4 + toy.pe_dims)",
            )  # fmt: skip
        return settings
