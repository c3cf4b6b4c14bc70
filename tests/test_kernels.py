"""The fused passes (models/kernels.py) against the torch expressions they replace, bit for bit.

Each kernel must give exactly the bits of its expression, on every input a training can
meet and a few it should not (signed zeros, infinities, NaN), at any dropout rate: the
hand-written step's bits, and so its fingerprints (tests/test_numerics.py), rest on it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tcrformer.models import fast
from tcrformer.models.dropout import Dropout, DropoutMasks

RATES = (0.1, 0.3, 0.5, 0.9)
SIZES = (1, 7, 64 * 17, 800 * 256 + 3)


def values(n: int, seed: int) -> torch.Tensor:
    """Normal floats with the awkward ones mixed in: 0, -0, tiny, huge, inf, -inf, NaN."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    special = np.array([0.0, -0.0, 1e-42, -1e-42, 3e38, np.inf, -np.inf, np.nan], np.float32)
    x[rng.integers(0, n, size=min(n, 16))] = rng.choice(special, size=min(n, 16))
    return torch.from_numpy(x)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def two_streams(p: float, seed: int = 5) -> tuple[Dropout, DropoutMasks]:
    """The autograd model's dropout and the hand-written step's, on identical generators."""
    reference, fused = Dropout(p), Dropout(p)
    reference.draw_bits_from(seed)
    fused.draw_bits_from(seed)
    return reference, DropoutMasks(fused)


@pytest.mark.parametrize("p", RATES)
@pytest.mark.parametrize("n", SIZES)
def test_dropout_and_its_gradient_are_torchs_product(p, n):
    reference, masks = two_streams(p)
    x, dy = values(n, 1), values(n, 2)
    mask = reference.keep_multiplier(x.shape, x.dtype)
    dropped, saved = masks(x)
    assert same_bits(dropped, x * mask)
    assert same_bits(DropoutMasks.backward(dy, saved), dy * mask)


@pytest.mark.parametrize("p", RATES)
@pytest.mark.parametrize("n", SIZES)
def test_residual_dropout_is_torchs_sum(p, n):
    reference, masks = two_streams(p)
    x, f = values(n, 3), values(n, 4)
    summed, _ = masks.residual(x, f)
    assert same_bits(summed, x + f * reference.keep_multiplier(f.shape, f.dtype))


@pytest.mark.parametrize("p", RATES)
@pytest.mark.parametrize("n", SIZES)
def test_relu_dropout_backward_is_torchs_threshold_backward(p, n):
    reference, masks = two_streams(p)
    pre, dy = values(n, 5), values(n, 6)
    hidden, saved = masks(pre.relu())
    expected = torch.ops.aten.threshold_backward(
        dy * reference.keep_multiplier(pre.shape, pre.dtype), hidden, 0
    )
    assert same_bits(saved.relu_backward(dy, hidden), expected)


def test_no_dropout_takes_no_draws_and_no_mask():
    _, masks = two_streams(0.0)
    x = values(10, 7)
    assert masks(x) == (x, None)
    summed, saved = masks.residual(x, x)
    assert saved is None and same_bits(summed, x + x)


@pytest.mark.parametrize("columns", (1, 64, 192))
def test_packed_rows_go_to_the_grid_and_back_as_torchs_index_ops(columns):
    torch.manual_seed(0)
    lengths = torch.randint(0, 18, (33,))
    lengths[0] = 17  # a full row
    rows = fast.Packed(torch.arange(17)[None, :] < lengths[:, None])
    x = values(len(rows.index) * columns, 8).view(-1, columns)
    expected = torch.zeros(33 * 17, columns).index_copy_(0, rows.index, x).view(33, 17, -1)
    grid = rows.to_grid(x)
    assert same_bits(grid, expected)
    grid.view(-1, columns)[~(torch.arange(17)[None, :] < lengths[:, None]).flatten()] = 1.0
    assert same_bits(rows.from_grid(grid), x)


def test_a_kernel_refuses_a_strided_tensor():
    """They read flat memory: a view that is not contiguous must fail, not be misread."""
    _, masks = two_streams(0.1)
    with pytest.raises(RuntimeError):
        masks(torch.randn(8, 8).t())
