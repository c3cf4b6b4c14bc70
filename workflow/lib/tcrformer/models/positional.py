"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5), in NumPy.

    PE[pos, 2i]   = sin(pos / base^(2i/d))
    PE[pos, 2i+1] = cos(pos / base^(2i/d))

Each (sin, cos) pair is a clock turning at frequency base^(-2i/d) radians per position.
The paper uses base 10000 (PE_BASE); the toy model uses base 9 and d = 4 so both clocks
are visible within 13 residues. This is the one definition of the table: the PyTorch models
turn it into a tensor (tcrformer.models.transformer.positional_table).
"""

from __future__ import annotations

import numpy as np

PE_BASE = 10000.0
"""The paper's wavelength constant: pair i of the table has period 2 pi PE_BASE^(2i/d)."""


def frequencies(d: int, base: float) -> np.ndarray:
    """(d/2,) angular frequency of each sin/cos pair, fastest first."""
    if d % 2:
        raise ValueError(f"the sinusoidal table needs an even number of dimensions, got {d}")
    i = np.arange(d // 2)
    return base ** (-2.0 * i / d)


def sinusoidal_table(n_positions: int, d: int, base: float = PE_BASE) -> np.ndarray:
    """(n_positions, d) table; even columns sines, odd columns cosines."""
    angles = np.arange(n_positions)[:, None] * frequencies(d, base)[None, :]  # (n, d/2)
    table = np.empty((n_positions, d))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table


def period(dim: int, d: int, base: float = PE_BASE) -> float:
    """Number of positions after which column `dim` repeats: 2*pi / frequency of its pair."""
    return float(2 * np.pi / frequencies(d, base)[dim // 2])


def spread_dims(d_model: int, fractions) -> list[int]:
    """Even dimensions (the sine of a pair) at these fractions of the width, the last pair at
    most, without repeats: what a figure shows of a table of any width. At d_model 512,
    fractions 0, 1/4, 1/2, 1 give 0, 128, 256, 510."""
    return sorted({min(2 * round(f * d_model / 2), d_model - 2) for f in fractions})
