"""The toy model's input: four numbers a chemist would recognise for each amino acid,
stacked beside sinusoidal position numbers (explainer section 2).

Real models learn their embeddings; the toy one is hand-made so that every number can be
read: hydropathy (Kyte-Doolittle / 4.5, 2 decimals), charge, polarity and aromaticity. The
column names (`feature_names`) are defined here once: the config's hand-set heads name
them, and the figures label their axes with them.
"""

from __future__ import annotations

import numpy as np

from tcrformer import AMINO_ACIDS
from tcrformer.models.positional import sinusoidal_table

# Kyte & Doolittle (1982) hydropathy index, all 20 standard amino acids.
KYTE_DOOLITTLE = {
    "A": 1.8, "R": -4.5, "N": -3.5, "D": -3.5, "C": 2.5, "Q": -3.5, "E": -3.5,
    "G": -0.4, "H": -3.2, "I": 4.5, "L": 3.8, "K": -3.9, "M": 1.9, "F": 2.8,
    "P": -1.6, "S": -0.8, "T": -0.7, "W": -0.9, "Y": -1.3, "V": 4.2,
}  # fmt: skip
KD_MAX = max(abs(v) for v in KYTE_DOOLITTLE.values())  # 4.5 (isoleucine, arginine)

CHARGE = {"K": 1.0, "R": 1.0, "D": -1.0, "E": -1.0}  # side chains at pH 7 (His as neutral)
POLAR = frozenset("STNQYH")
AROMATIC = frozenset("FWY")

CHEMISTRY_FEATURES = ("hydropathy", "charge", "polar", "aromatic")


def check_sequence(sequence: str) -> str:
    """Return the sequence if it only holds the 20 standard amino acids, else raise."""
    bad = sorted(set(sequence) - set(AMINO_ACIDS))
    if not sequence or bad:
        raise ValueError(f"not a protein sequence of the 20 standard amino acids: {sequence!r}")
    return sequence


def residue_features(residue: str) -> list[float]:
    """[hydropathy, charge, polar, aromatic] for one amino acid."""
    return [
        round(KYTE_DOOLITTLE[residue] / KD_MAX, 2),
        CHARGE.get(residue, 0.0),
        float(residue in POLAR),
        float(residue in AROMATIC),
    ]


def chemistry_matrix(sequence: str) -> np.ndarray:
    """(n, 4) chemistry numbers of a sequence, one row per residue."""
    check_sequence(sequence)
    return np.array([residue_features(a) for a in sequence], dtype=float)


def clock_columns(clock: str) -> tuple[str, str]:
    """The names of one position clock's two columns of X: (sine, cosine)."""
    return f"pos_sin_{clock}", f"pos_cos_{clock}"


def feature_names(pe_dims: int) -> list[str]:
    """Names of the columns of X: 4 chemistry numbers, then one sin/cos pair per clock.

    The first pair is called `fast`, the last `slow`; pairs in between are `mid<i>`.
    """
    n_pairs = pe_dims // 2
    names = list(CHEMISTRY_FEATURES)
    for i in range(n_pairs):
        clock = "fast" if i == 0 else "slow" if i == n_pairs - 1 else f"mid{i}"
        names += clock_columns(clock)
    return names


def toy_input(sequence: str, pe_dims: int, pe_base: float) -> np.ndarray:
    """X (n, 4 + pe_dims): chemistry numbers stacked beside the position numbers."""
    return np.hstack(
        [chemistry_matrix(sequence), sinusoidal_table(len(sequence), pe_dims, pe_base)]
    )
