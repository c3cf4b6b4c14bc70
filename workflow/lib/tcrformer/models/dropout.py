"""Dropout as the fast model and the hand-written step both run it: 16-bit draws from a
NumPy generator, turned into inverted-dropout masks.

`Dropout` is the draws: one object shared by every dropout site of a model, whose generator
state a checkpoint can hold. Under autograd (fast.py) it multiplies by a float mask made from
them. `DropoutMasks` hands the hand-written step (backprop.py) the same draws, site by site
in the same order, as `Mask`s, which apply them in one fused pass each (models.kernels) and
are kept for the backward pass.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tcrformer.models import kernels

_DRAW_LEVELS = 1 << 16  # dropout draws are 16-bit integers


class Dropout:
    """Inverted dropout, one object shared by every dropout site of a model.

    By default it is `F.dropout`. After `draw_bits_from(seed)` it reads 16-bit draws from a
    NumPy SFC64 generator instead (four per 64-bit word) and drops an element when its draw
    falls below round(p * 2^16): the drop probability is that count / 2^16 (0.1 -> 0.100006)
    and the kept elements are scaled by the exact 1 / (1 - p) of that probability.
    The generator's state is plain integers, so a checkpoint can hold it.
    """

    def __init__(self, p: float):
        self.p = p
        self.bits: np.random.SFC64 | None = None

    def draw_bits_from(self, seed: int | None) -> None:
        self.bits = None if seed is None else np.random.SFC64(seed)

    def state(self) -> dict | None:
        """The generator's state as plain integers (None when using F.dropout)."""
        if self.bits is None:
            return None
        state = self.bits.state
        return {
            "words": [int(w) for w in state["state"]["state"]],
            "has_uint32": int(state["has_uint32"]),
            "uinteger": int(state["uinteger"]),
        }

    def set_state(self, state: dict) -> None:
        self.bits = np.random.SFC64()
        self.bits.state = {
            "bit_generator": "SFC64",
            "state": {"state": np.array(state["words"], dtype=np.uint64)},
            "has_uint32": state["has_uint32"],
            "uinteger": state["uinteger"],
        }

    def __call__(self, x: Tensor, training: bool) -> Tensor:
        if not training or self.p == 0:
            return x
        if self.bits is None or x.device.type != "cpu":
            return F.dropout(x, self.p, True)
        return x * self.keep_multiplier(x.shape, x.dtype)

    @property
    def threshold(self) -> int:
        """An element is kept when its draw (uniform on [-2^15, 2^15)) is >= this."""
        return round(self.p * _DRAW_LEVELS) - _DRAW_LEVELS // 2

    @property
    def scale(self) -> float:
        """What a kept element is multiplied by: 1 / (1 - the exact drop probability)."""
        cut = round(self.p * _DRAW_LEVELS)
        return _DRAW_LEVELS / (_DRAW_LEVELS - cut)

    def draws(self, n: int) -> np.ndarray:
        """The next n draws, int16 (four per 64-bit word of the generator)."""
        return self.bits.random_raw((n + 3) // 4).view(np.int16)[:n]

    def keep_multiplier(self, shape: torch.Size, dtype: torch.dtype) -> Tensor:
        """scale where the element is kept, 0 where it is dropped, from the next draws."""
        draws = torch.from_numpy(self.draws(math.prod(shape))).view(shape)
        threshold = self.threshold
        # On integers, clamp(d, t - 1, t) - (t - 1) is 1 when d >= t and 0 otherwise: a few
        # float32 passes (exact for int16), where PyTorch's int16 compare and bool-to-float
        # cast cost about 8x more on the CPU.
        keep = draws.float().clamp_(threshold - 1, threshold).sub_(threshold - 1)  # exact
        return keep.mul_(self.scale).to(dtype)


class Mask:
    """One dropout site's mask, as its draws (a Dropout's): kept for the backward pass.
    Each product with it is one fused pass (models.kernels)."""

    def __init__(self, draws: np.ndarray, threshold: int, scale: float):
        self.draws, self.threshold, self.scale = draws, threshold, np.float32(scale)

    def _run(self, kernel, *tensors: Tensor) -> Tensor:
        out = torch.empty_like(tensors[0])
        flat = [t.view(-1).numpy() for t in (*tensors, out)]  # contiguous: views, no copies
        kernel(*flat[:-1], self.draws, self.threshold, self.scale, flat[-1])
        return out

    def apply(self, x: Tensor) -> Tensor:
        """x * mask."""
        return self._run(kernels.dropout, x)

    def residual(self, x: Tensor, f: Tensor) -> Tensor:
        """x + f * mask."""
        return self._run(kernels.residual_dropout, x, f)

    def relu_backward(self, dy: Tensor, hidden: Tensor) -> Tensor:
        """The gradient through relu then this mask, given the dropped output `hidden`."""
        return self._run(kernels.relu_dropout_backward, dy, hidden)


class DropoutMasks:
    """Inverted dropout with a Dropout's masks: each call takes the next mask, in the
    order the fast model takes them, and returns it for the backward pass (None when p = 0)."""

    def __init__(self, source: Dropout):
        self.source = source

    def next(self, x: Tensor) -> Mask | None:
        if self.source.p == 0:
            return None
        return Mask(self.source.draws(x.numel()), self.source.threshold, self.source.scale)

    def __call__(self, x: Tensor) -> tuple[Tensor, Mask | None]:
        """(x * mask, mask)."""
        mask = self.next(x)
        return (x, None) if mask is None else (mask.apply(x), mask)

    def residual(self, x: Tensor, f: Tensor) -> tuple[Tensor, Mask | None]:
        """(x + f * mask, mask): a sub-layer's output f, dropped, added to its input x."""
        mask = self.next(f)
        return (x + f, None) if mask is None else (mask.residual(x, f), mask)

    @staticmethod
    def backward(dy: Tensor, mask: Mask | None) -> Tensor:
        return dy if mask is None else mask.apply(dy)
