"""Holm's step-down procedure over a family of hypotheses, and each one's level.

Sorted by p-value, the hypothesis of rank r (from 0) of m is rejected at level
alpha / (m - r), up to the first that is not; every one after it keeps that stopping level.
An interval at a hypothesis's level then excludes its margin exactly when Holm rejects it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses are rejected at family-wise `alpha` (each p-value at most its Holm
    level, holm_levels)."""
    return [p <= level for p, level in zip(p_values, holm_levels(p_values, alpha), strict=True)]


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """Each hypothesis's Holm level: alpha / (m - rank), rank by p-value, up to the first
    that fails; that stopping level for every one after it."""
    order = np.argsort(p_values, kind="stable")
    levels, stop = [math.nan] * len(p_values), None
    for rank, index in enumerate(order):
        level = alpha / (len(p_values) - rank)
        if stop is None and p_values[index] > level:
            stop = level
        levels[index] = level if stop is None else stop
    return levels
