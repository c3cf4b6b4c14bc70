"""The learning rate and the loss floor of the recipe.

noam       lr(t) = d_model^-0.5 * min(t^-0.5, t * warmup^-1.5)   (the paper; base lr 1)
noam_flat  lr(t) = d_model^-0.5 * max(t, warmup)^-0.5: noam's peak rate from step 1, then
           the same decay (no warm-up, without noam's 20-fold rate at step 1 when warmup=0)
linear     warm up to peak_lr over `warmup` steps, then decay linearly to 0 at the last step

`lr_scale` multiplies every rate (the claims' peak-rate sweep); the paper's is 1.
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
    flat: bool = False  # noam_flat: the peak rate until `warmup`, then the same decay
    scale: float = 1.0

    def __call__(self, index: int) -> float:  # LambdaLR counts from 0; step t = index + 1
        t = index + 1
        if self.warmup == 0:
            rate = self.d_model**-0.5 * t**-0.5
        elif self.flat:
            rate = self.d_model**-0.5 * max(t, self.warmup) ** -0.5
        else:
            rate = self.d_model**-0.5 * min(t**-0.5, t * self.warmup**-1.5)
        return rate if self.scale == 1.0 else self.scale * rate


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
    if recipe.schedule in ("noam", "noam_flat"):
        flat = recipe.schedule == "noam_flat"
        return 1.0, NoamSchedule(recipe.d_model, recipe.warmup, flat, recipe.lr_scale)
    return recipe.peak_lr * recipe.lr_scale, LinearSchedule(recipe.warmup, recipe.steps)


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
