"""Four numbers a chemist would recognise for each amino acid: the toy model's embeddings.

Real models learn their embeddings; the toy one is hand-made so that every number can be
read: hydropathy (Kyte-Doolittle / 4.5, 2 decimals), charge, polarity and aromaticity.
"""

from __future__ import annotations

import numpy as np

from . import AMINO_ACIDS

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
