"""The fast model's matrix products, through the portable kernels when they are on.

`linear`, `bmm` and `baddbmm` have the meaning of their torch namesakes. When core.blas has
loaded OpenBLAS's Haswell kernels (portable numerics, core.numerics) and the operands are
float32 CPU tensors, not under autocast, torch.compile or vmap, they run there, forward and
backward (a torch.autograd.Function each); otherwise they are torch's own ops. Either way
the reference model (models/transformer.py) stays on torch's ops: it is the oracle.

Shapes, row-major as in torch:  a (..., m, k) @ b (..., k, n) -> (..., m, n). OpenBLAS is
column-major, so a row-major C = A B is computed as C^T = B^T A^T; a transposed view is
read in place (the CBLAS transpose flag), never copied.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from tcrformer.core import blas


def _portable(*tensors: Tensor) -> bool:
    """Run here? Not under autocast, torch.compile or torch.func's transforms (vmap, grad:
    their batched tensors have no plain memory to hand to a C library)."""
    if blas.active() is None or torch.is_autocast_enabled("cpu") or torch.compiler.is_compiling():
        return False
    if torch._C._are_functorch_transforms_active():
        return False
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def _matrix(t: Tensor) -> tuple[Tensor, bool, int, int]:
    """(t or a copy, transposed, ld, batch stride) of a (m, k) or (B, m, k) float32 view:
    row-major with rows `ld` floats apart, or (transposed) the transpose of such a matrix,
    e.g. a .transpose(-1, -2) view or one head's columns of a wider grid, read in place."""
    *_, rows, cols = t.shape
    strides = t.stride()
    row_stride, col_stride = strides[-2], strides[-1]
    batch = strides[0] if len(strides) == 3 else 0
    if col_stride == 1 and row_stride >= max(cols, 1):
        return t, False, row_stride, batch
    if row_stride == 1 and col_stride >= max(rows, 1):
        return t, True, col_stride, batch
    t = t.contiguous()
    return t, False, max(cols, 1), (t.stride(0) if t.dim() == 3 else 0)


def gemm(a: Tensor, b: Tensor, out: Tensor, alpha: float = 1.0, beta: float = 0.0) -> Tensor:
    """out = alpha a @ b + beta out, for (m, k) @ (k, n) or a batch (B, m, k) @ (B, k, n).

    Any operand may be a strided view (a transpose, one head's columns of a grid); `out`'s
    rows must be contiguous. On the portable kernels when they are loaded, else torch's
    own product (in place). Returns out."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.mul_(beta)
    kernels = blas.active()
    if kernels is None:
        if out.dim() == 3:
            return out.baddbmm_(a, b, beta=beta, alpha=alpha)
        return out.addmm_(a, b, beta=beta, alpha=alpha)
    a, a_t, lda, stride_a = _matrix(a)
    b, b_t, ldb, stride_b = _matrix(b)
    out_strides = out.stride()
    if out_strides[-1] != 1:
        raise ValueError("gemm: the output's rows must be contiguous")
    shape = blas.Gemm(
        m, n, k, a_t, b_t, lda=lda, ldb=ldb, count=a.shape[0] if a.dim() == 3 else 1,
        stride_a=stride_a, stride_b=stride_b, ldc=out_strides[-2],
        stride_c=out_strides[0] if len(out_strides) == 3 else 0,
    )  # fmt: skip
    kernels.sgemm(shape, a.data_ptr(), b.data_ptr(), out.data_ptr(), alpha, beta)
    return out


def _filled(value: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A new contiguous tensor of `shape` holding `value` broadcast: the output a product
    is added into (never `value` itself, which .contiguous() could return)."""
    return value.new_empty(shape).copy_(value)


def _matmul(a: Tensor, b: Tensor, alpha: float = 1.0) -> Tensor:
    out = a.new_empty((*a.shape[:-1], b.shape[-1]))
    return gemm(a, b, out, alpha)


class _Linear(torch.autograd.Function):
    """y = x W^T + b; backward dx = dy W, dW = dy^T x, db = sum over the rows of dy."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        rows = x.reshape(-1, x.shape[-1])  # (N, d_in)
        if bias is None:
            y = _matmul(rows, weight.t())
        else:  # y starts as the bias, the product is added to it (as addmm does)
            y = _filled(bias, (rows.shape[0], weight.shape[0]))
            gemm(rows, weight.t(), y, beta=1.0)
        ctx.save_for_backward(rows, weight)
        ctx.in_shape, ctx.with_bias = x.shape, bias is not None
        return y.view(*x.shape[:-1], weight.shape[0])  # (..., d_out)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        rows, weight = ctx.saved_tensors
        grad = grad.reshape(-1, weight.shape[0]).contiguous()  # (N, d_out)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _matmul(grad, weight).view(ctx.in_shape)
        if ctx.needs_input_grad[1]:
            dw = _matmul(grad.t(), rows)  # (d_out, d_in)
        if ctx.with_bias and ctx.needs_input_grad[2]:
            db = grad.sum(0)
        return dx, dw, db


class _Baddbmm(torch.autograd.Function):
    """bias + alpha a @ b, batched; bias broadcasts to the output."""

    @staticmethod
    def forward(ctx, bias: Tensor, a: Tensor, b: Tensor, alpha: float) -> Tensor:
        out = _filled(bias, (a.shape[0], a.shape[1], b.shape[2]))
        gemm(a, b, out, alpha, beta=1.0)
        ctx.save_for_backward(a, b)
        ctx.alpha, ctx.bias_shape = alpha, bias.shape
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        a, b = ctx.saved_tensors
        grad = grad.contiguous()
        d_bias = grad.sum_to_size(ctx.bias_shape) if ctx.needs_input_grad[0] else None
        da = _matmul(grad, b.transpose(1, 2), ctx.alpha) if ctx.needs_input_grad[1] else None
        db = _matmul(a.transpose(1, 2), grad, ctx.alpha) if ctx.needs_input_grad[2] else None
        return d_bias, da, db, None


class _Bmm(torch.autograd.Function):
    """a @ b, batched: (B, m, k) @ (B, k, n)."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return _matmul(a, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        a, b = ctx.saved_tensors
        grad = grad.contiguous()
        da = _matmul(grad, b.transpose(1, 2)) if ctx.needs_input_grad[0] else None
        db = _matmul(a.transpose(1, 2), grad) if ctx.needs_input_grad[1] else None
        return da, db


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear: x (..., d_in), weight (d_out, d_in), bias (d_out,) -> (..., d_out)."""
    if _portable(x, weight, *([] if bias is None else [bias])):
        return _Linear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


def baddbmm(bias: Tensor, a: Tensor, b: Tensor, alpha: float = 1.0) -> Tensor:
    """torch.baddbmm(bias, a, b, alpha=alpha): bias + alpha a @ b, (B, m, k) @ (B, k, n)."""
    if _portable(bias, a, b):
        return _Baddbmm.apply(bias, a, b, alpha)
    return torch.baddbmm(bias, a, b, alpha=alpha)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """torch.bmm: (B, m, k) @ (B, k, n) -> (B, m, n)."""
    if _portable(a, b):
        return _Bmm.apply(a, b)
    return torch.bmm(a, b)
