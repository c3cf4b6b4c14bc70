"""A one-sided test, read in a hypothesis's direction.

A test of values against a margin m gives two one-sided p-values, p(m, greater) (small when
the values lie above m) and p(m, less). A direction turns them into the p-value that
supports it and the one that refutes it:

    greater     support p(m, greater)                          refute p(m, less)
    less        support p(m, less)                             refute p(m, greater)
    equivalent  support max(p(-m, greater), p(m, less))        (two one-sided tests, TOST)
                refute  min(p(-m, less), p(m, greater))

The smaller of the two is the test's p-value: what a family's correction (holm.py) reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

ALTERNATIVES = ("greater", "less")


def finite_values(d: Sequence[float], name: str) -> np.ndarray:
    """The values as a flat float array; a value that is not finite, or none at all, raises
    a ValueError naming `name`."""
    values = np.asarray(d, dtype=float).ravel()
    bad = ~np.isfinite(values)
    if bad.any():
        where = np.flatnonzero(bad).tolist()
        raise ValueError(f"{name}: per-seed values not finite at {where}: {values[bad].tolist()}")
    if values.size == 0:
        raise ValueError(f"{name}: no per-seed values")
    return values


def checked_alternative(name: str) -> str:
    """`name` if it is a one-sided alternative (greater or less); else a ValueError."""
    if name not in ALTERNATIVES:
        raise ValueError(f"alternative {name!r}: greater or less")
    return name


def support_and_refute(p_of: Callable[[float, str], float], margin: float, direction: str):
    """(p_support, p_refute) against `margin` in `direction`, from a one-sided test
    p_of(margin, alternative) (the module's table)."""
    if direction == "equivalent":
        support = np.maximum(p_of(-margin, "greater"), p_of(margin, "less"))
        refute = np.minimum(p_of(-margin, "less"), p_of(margin, "greater"))
        return float(support), float(refute)
    if direction not in ALTERNATIVES:
        raise ValueError(f"direction {direction!r}: greater, less or equivalent")
    other = "less" if direction == "greater" else "greater"
    return p_of(margin, direction), p_of(margin, other)


def disagree(primary: float, secondary: float, level: float) -> bool:
    """Whether two p-values of one hypothesis differ on rejection at `level` (a NaN
    secondary never disagrees)."""
    if math.isnan(secondary):
        return False
    return (primary <= level) != (secondary <= level)


@dataclass(frozen=True)
class Sides:
    """The two one-sided p-values of a test against its margin, in its direction."""

    p_support: float
    p_refute: float

    @property
    def p_value(self) -> float:
        """The smaller one-sided p-value: what enters a family's correction."""
        return min(self.p_support, self.p_refute)

    @property
    def supports(self) -> bool:
        """Whether the smaller p-value is the supporting one (ties: it is)."""
        return self.p_support <= self.p_refute
