"""One model's guess for one hidden CDR3 residue: probabilities over the 20 amino acids.

A language model scores every token of its vocabulary (ESM-2 also scores gaps, X, B, ...).
As in the explainer, the scores of the 20 standard amino acids are taken and turned into
probabilities with a softmax over those 20 alone, which is the same as renormalizing the
full softmax over them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tcrformer import AMINO_ACIDS
from tcrformer.chapters.plm.settings import TOP_K


def renormalized(logits: Sequence[float]) -> dict[str, float]:
    """Softmax over 20 logits given in AMINO_ACIDS order, as {amino acid: probability}."""
    scores = np.asarray(logits, dtype=np.float64)
    if scores.shape != (len(AMINO_ACIDS),):
        raise ValueError(f"expected {len(AMINO_ACIDS)} logits, got shape {scores.shape}")
    weights = np.exp(scores - scores.max())
    probabilities = weights / weights.sum()
    return dict(zip(AMINO_ACIDS, probabilities.tolist(), strict=True))


@dataclass(frozen=True)
class Guess:
    """What `model` predicts at the 1-based CDR3 `position` when that residue is hidden."""

    model: str
    position: int
    true_residue: str
    probabilities: dict[str, float]

    @property
    def p_true(self) -> float:
        return self.probabilities[self.true_residue]

    def ranked(self) -> list[str]:
        """Amino acids from most to least likely (ties in alphabetical order)."""
        return sorted(AMINO_ACIDS, key=lambda aa: (-self.probabilities[aa], aa))

    def top(self, k: int = TOP_K) -> list[str]:
        return self.ranked()[:k]

    @property
    def rank_true(self) -> int:
        """1 when the true residue is the best guess."""
        return self.ranked().index(self.true_residue) + 1

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "position": self.position,
            "true_residue": self.true_residue,
            "p_true": self.p_true,
            "rank_true": self.rank_true,
            f"top{TOP_K}": self.top(),
            "probabilities": self.probabilities,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Guess:
        return cls(data["model"], data["position"], data["true_residue"], data["probabilities"])


def guesses_of(result: Mapping) -> list[Guess]:
    """The guesses of a language model's result file (its "guesses" list)."""
    return [Guess.from_dict(g) for g in result.get("guesses", [])]
