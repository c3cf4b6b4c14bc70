"""The learning rate and the loss floor of the recipe.

noam    lr(t) = d_model^-0.5 * min(t^-0.5, t * warmup^-1.5)   (the paper; base lr 1)
linear  warm up to peak_lr over `warmup` steps, then decay linearly to 0 at the last step
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tcrformer.training.data import VOCAB_SIZE
from tcrformer.training.recipe import Recipe


@dataclass
class NoamSchedule:
    """lr(t) = d_model^-0.5 * min(t^-0.5, t * warmup^-1.5), t = 1, 2, ... (base lr 1);
    warmup 0 is no warm-up: lr(t) = d_model^-0.5 t^-0.5 from the first step.

    A plain callable object, so LambdaLR saves its fields, not code, in a checkpoint.
    """

    d_model: int
    warmup: int

    def __call__(self, index: int) -> float:  # LambdaLR counts from 0; step t = index + 1
        t = index + 1
        if self.warmup == 0:
            return self.d_model**-0.5 * t**-0.5
        return self.d_model**-0.5 * min(t**-0.5, t * self.warmup**-1.5)


@dataclass
class LinearSchedule:
    """Linear warm-up to the base lr over `warmup` steps, then linear decay to 0 at `steps`."""

    warmup: int
    steps: int

    def __call__(self, index: int) -> float:
        t = index + 1
        if t <= self.warmup:  # never with warmup 0
            return t / self.warmup
        return max(0.0, (self.steps - t + 1) / (self.steps - self.warmup))


def schedule_for(recipe: Recipe) -> tuple[float, Callable[[int], float]]:
    """(base lr, multiplier per step) for LambdaLR."""
    if recipe.schedule == "noam":
        return 1.0, NoamSchedule(recipe.d_model, recipe.warmup)
    return recipe.peak_lr, LinearSchedule(recipe.warmup, recipe.steps)


def label_smoothing_floor(epsilon: float, vocab_size: int = VOCAB_SIZE) -> float:
    """The lowest loss label smoothing allows: the entropy of the smoothed target.

    PyTorch's CrossEntropyLoss(label_smoothing=eps) scores against
    q = (1 - eps) * one_hot + eps / V, so even p = q costs H(q) =
    -(1 - eps + eps/V) log(1 - eps + eps/V) - (V - 1) (eps/V) log(eps/V).
    """
    if epsilon == 0:
        return 0.0
    true, other = 1 - epsilon + epsilon / vocab_size, epsilon / vocab_size
    return -true * math.log(true) - (vocab_size - 1) * other * math.log(other)
