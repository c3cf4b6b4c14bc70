"""Portable BLAS: OpenBLAS's Haswell kernels, the same bits on every AVX2 CPU.

A float32 matrix product rounds according to how its library blocks the reduction over k
and which micro-kernel sums each block, and MKL and OpenBLAS both pick those from the CPU
they find. OpenBLAS can be told which kernel family to run (`OPENBLAS_CORETYPE`), and its
Haswell family has block sizes fixed at compile time (no cache probing, no small-matrix
shortcut): so the same call gives the same bits on any x86-64 CPU with AVX2 and FMA, an
AVX2-only AMD EPYC and an AVX-512 Intel Xeon alike, at AVX2 + FMA speed. MKL's one
vendor-independent branch (`MKL_CBWR=COMPATIBLE`) is SSE2 without FMA, about 3x slower.

The library is the `scipy-openblas32` wheel (`libscipy_openblas.so`, symbols prefixed
`scipy_`), loaded with ctypes; NumPy's own OpenBLAS is another library and is left alone.
Every call is column-major (a row-major C = A B is computed as C^T = B^T A^T), which also
keeps OpenBLAS's AVX-512-only "direct" row-major shortcut out of the way.

This module loads the library and holds the process's choice; it imports no torch, so
that core.numerics can load the kernels before torch is imported. The products themselves,
forward and backward, are models.products.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

KERNELS = "Haswell"  # the one kernel family, on every CPU
OPENBLAS = "openblas-haswell"  # the products' path when the kernels are loaded
TORCH = "torch"  # torch's own products (MKL): COMPATIBLE in portable mode, native otherwise
PACKAGE = "scipy_openblas32"
_LIBRARY_FILE = "libscipy_openblas.so"
# One thread, whatever numerics.threads says. OpenBLAS's threaded driver splits k otherwise
# than its serial one (other bits), and its spinning threads fight torch's OpenMP threads
# for the cores: on 2 cores, 2 + 2 threads trained at 0.80 steps/s against 12.4 at 1 + 1
# (bench/README.md). The cores are better spent on the training's worker processes.
THREADS = 1
_COL_MAJOR, _NO_TRANS, _TRANS = 102, 111, 112  # CBLAS enums


class Unavailable(RuntimeError):
    """The portable kernels cannot be used here; the message says why, in one line."""


@dataclass(frozen=True)
class Kernels:
    """The loaded library: its handle and the kernel family it runs."""

    cdll: ctypes.CDLL
    path: str
    corename: str
    config: str  # OpenBLAS's own description: version, build options

    def describe(self) -> str:
        """'OpenBLAS 0.3.34 Haswell kernels, 1 thread'."""
        words = self.config.split()
        version = words[1] if len(words) > 1 else "?"
        return f"OpenBLAS {version} {self.corename} kernels, {THREADS} thread"

    def sgemm(self, gemm: Gemm, a: int, b: int, c: int, alpha: float, beta: float) -> None:
        """C = alpha op(A) op(B) + beta C for the float32 row-major matrices at addresses
        a, b, c (a batch of them when gemm.count > 1). Column-major, as C^T = B^T A^T."""
        op_a = _TRANS if gemm.a_transposed else _NO_TRANS
        op_b = _TRANS if gemm.b_transposed else _NO_TRANS
        m, n, k = gemm.m, gemm.n, gemm.k
        ldc = gemm.ldc or n
        if gemm.count == 1:
            self.cdll.scipy_cblas_sgemm(
                _COL_MAJOR, op_b, op_a, n, m, k, alpha, b, gemm.ldb, a, gemm.lda, beta, c, ldc
            )
            return
        self.cdll.scipy_cblas_sgemm_batch_strided(
            _COL_MAJOR, op_b, op_a, n, m, k, alpha,
            b, gemm.ldb, gemm.stride_b, a, gemm.lda, gemm.stride_a,
            beta, c, ldc, gemm.stride_c or m * ldc, gemm.count,
        )  # fmt: skip


class Gemm(NamedTuple):  # a tuple: made on every product, so cheap to make
    """The shape of C (m, n) = op(A) (m, k) op(B) (k, n), row-major: op(X) is X or X^T as
    stored (ld: the stored row length; ldc 0: n), `count` such products `stride` floats
    apart (stride_c 0: m ldc)."""

    m: int
    n: int
    k: int
    a_transposed: bool
    b_transposed: bool
    lda: int
    ldb: int
    count: int = 1
    stride_a: int = 0
    stride_b: int = 0
    ldc: int = 0
    stride_c: int = 0


def library_path() -> Path:
    """Where the wheel's library is, without importing the package (which loads it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(f"the {PACKAGE} package is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "lib" / _LIBRARY_FILE
    if not path.is_file():
        raise Unavailable(f"{path} is missing")
    return path


def load_kernels() -> Kernels:
    """Load OpenBLAS with its Haswell kernels on one thread, or raise Unavailable.

    OpenBLAS reads OPENBLAS_CORETYPE once, when the library is first loaded; it is set only
    for that moment, so NumPy's OpenBLAS and child processes keep the user's environment.
    """
    path = library_path()
    wanted = {"OPENBLAS_CORETYPE": KERNELS, "OPENBLAS_NUM_THREADS": str(THREADS)}
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        cdll = ctypes.CDLL(str(path))
    except OSError as err:
        raise Unavailable(f"{path.name} cannot be loaded: {err}") from err
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    for name in ("scipy_openblas_get_corename", "scipy_openblas_get_config"):
        getattr(cdll, name).restype = ctypes.c_char_p
    corename = cdll.scipy_openblas_get_corename().decode()
    if corename != KERNELS:  # loaded earlier in this process, before the core was set
        raise Unavailable(f"{path.name} runs its {corename} kernels here, not {KERNELS}")
    cdll.scipy_openblas_set_num_threads(THREADS)
    _declare(cdll)
    config = cdll.scipy_openblas_get_config().decode()
    return Kernels(cdll, str(path), corename, config)


def _declare(cdll: ctypes.CDLL) -> None:
    i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    cdll.scipy_cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    cdll.scipy_cblas_sgemm.restype = None
    batched = [i, i, i, i, i, i, f, p, i, i, p, i, i, f, p, i, i, i]
    cdll.scipy_cblas_sgemm_batch_strided.argtypes = batched
    cdll.scipy_cblas_sgemm_batch_strided.restype = None


_ACTIVE: Kernels | None = None


def activate() -> Kernels:
    """Route this process's products through the portable kernels (idempotent)."""
    global _ACTIVE
    if _ACTIVE is None:
        _ACTIVE = load_kernels()
    return _ACTIVE


def deactivate() -> None:
    global _ACTIVE
    _ACTIVE = None


def active() -> Kernels | None:
    return _ACTIVE
