"""The hand-written step's elementwise passes, fused: one sweep over memory each, where the
torch expressions they replace take two to seven (a float copy of the draws, a clamp, a
subtraction and a multiplication to make a dropout mask, then its product).

Each kernel performs the same IEEE-754 float32 operations on the same operands, in the same
order, as the torch expression in its docstring: a multiplication and an addition round
alike on every CPU, so the step's bits do not change (tests/test_kernels.py holds each kernel
to its expression, bit for bit). No kernel reduces, so there is no summation order to fix.

They are compiled by numba for the Haswell target (core.numerics sets `NUMBA_CPU_NAME` in
portable mode), cached on disk after the first compilation, and take flat NumPy views of
contiguous float32 tensors. A dropout mask is given by its draws (int16, one per element,
from dropout.Dropout): an element is kept when its draw is >= `threshold`, and then multiplied
by `scale` (dropout.Dropout.scale, rounded to float32).
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def dropout(x, draws, threshold, scale, out):
    """out = x * mask, mask = scale where kept, else 0  (Dropout's x * keep_multiplier)."""
    zero = np.float32(0.0)
    for i in range(x.size):
        out[i] = x[i] * (scale if draws[i] >= threshold else zero)


@_jit
def residual_dropout(x, f, draws, threshold, scale, out):
    """out = x + f * mask  (a sub-layer's output, dropped, added to its input)."""
    zero = np.float32(0.0)
    for i in range(x.size):
        out[i] = x[i] + f[i] * (scale if draws[i] >= threshold else zero)


@_jit
def relu_dropout_backward(dy, hidden, draws, threshold, scale, out):
    """out = threshold_backward(dy * mask, hidden, 0): the gradient through a dropped ReLU,
    0 where its output `hidden` is <= 0."""
    zero = np.float32(0.0)
    for i in range(dy.size):
        g = dy[i] * (scale if draws[i] >= threshold else zero)
        out[i] = zero if hidden[i] <= zero else g


@_jit
def rows_to_grid(x, row_of, grid):
    """grid[g] = x[row_of[g]], or zeros where row_of[g] < 0: packed rows (N, C) laid out
    on their (B L, C) grid, padding zeroed (fast.Packed.to_grid)."""
    zero = np.float32(0.0)
    for g in range(grid.shape[0]):
        r = row_of[g]
        if r < 0:
            for c in range(grid.shape[1]):
                grid[g, c] = zero
        else:
            for c in range(grid.shape[1]):
                grid[g, c] = x[r, c]


@_jit
def grid_to_rows(grid, index, x):
    """x[r] = grid[index[r]]: the packed rows of a (B L, C) grid (fast.Packed.from_grid)."""
    for r in range(x.shape[0]):
        g = index[r]
        for c in range(x.shape[1]):
            x[r, c] = grid[g, c]
