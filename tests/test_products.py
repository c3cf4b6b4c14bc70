"""The portable matrix products (core.blas, models.products): right, routed, and the same bits.

In this process the products are torch's until a test turns the kernels on (`kernels`);
the committed hashes of PRODUCT_CASES are checked in a fresh, pinned process, as a training
is, with a negative control (the CPU's own OpenBLAS kernels give other bits) and the
fallback when the library cannot be had.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from tcrformer.core import blas, numerics
from tcrformer.models import fast, products, transformer
from tcrformer.training import data
from tcrformer.training.loop import batch_loss, packed_loss

from conftest import ROOT, run_fingerprint

FINGERPRINT = json.loads((ROOT / "tests/golden/numerics_fingerprint.json").read_text())
PORTABLE_HERE, WHY_NOT = numerics.portable_supported()
needs_avx2 = pytest.mark.skipif(not PORTABLE_HERE, reason=WHY_NOT or "portable unsupported")
AVX512_HERE = "avx512f" in numerics.cpu_info()["all_flags"]


@pytest.fixture
def kernels():
    """The portable kernels on in this process for one test, then torch's products again."""
    try:
        yield blas.activate()
    except blas.Unavailable as why:
        pytest.skip(str(why))
    finally:
        blas.deactivate()


def rand(*shape, grad=True, seed=0):
    generator = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=generator).requires_grad_(grad)


CASES = {  # name: (ours, torch's, inputs)
    "linear": (products.linear, F.linear, lambda: (rand(37, 64), rand(192, 64), rand(192))),
    "linear 3-d": (products.linear, F.linear, lambda: (rand(5, 7, 64), rand(96, 64), rand(96))),
    "linear one row": (products.linear, F.linear, lambda: (rand(1, 64), rand(64, 64), rand(64))),
    "linear no bias": (products.linear, F.linear, lambda: (rand(9, 3), rand(5, 3))),
    "scores": (
        lambda bias, q, k: products.baddbmm(bias, q, k.transpose(1, 2), 0.25),
        lambda bias, q, k: torch.baddbmm(bias, q, k.transpose(1, 2), alpha=0.25),
        lambda: (rand(12, 9, 11, grad=False), rand(12, 9, 16), rand(12, 11, 16)),
    ),
    "weighted values": (products.bmm, torch.bmm, lambda: (rand(12, 9, 11), rand(12, 11, 16))),
}


@pytest.mark.parametrize("name", CASES)
def test_each_product_and_its_gradients_agree_with_torch(kernels, name):
    ours, theirs, make = CASES[name]
    inputs = make()
    copies = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    out, expected = ours(*inputs), theirs(*copies)
    assert out.grad_fn is not None and type(out.grad_fn).__name__.startswith("_")  # ours ran
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    upstream = rand(*out.shape, grad=False, seed=7)
    out.backward(upstream)
    expected.backward(upstream)
    for mine, reference in zip(inputs, copies, strict=True):
        if mine.requires_grad:
            torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-5, atol=1e-4)


def test_the_kernels_run_one_thread_whatever_torch_runs(kernels):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert kernels.cdll.scipy_openblas_get_num_threads() == blas.THREADS == 1
        assert kernels.describe().endswith("Haswell kernels, 1 thread")
    finally:
        torch.set_num_threads(before)


def test_a_product_never_writes_into_its_bias(kernels):
    """The output starts as a copy of the bias; with one row, or a bias already of the
    output's shape, .contiguous() would hand back the bias itself."""
    x, weight, bias = rand(1, 8, grad=False), rand(4, 8, grad=False), rand(4, grad=False)
    before = bias.clone()
    products.linear(x, weight, bias)
    assert torch.equal(bias, before)
    scores_bias = rand(3, 5, 6, grad=False)
    kept = scores_bias.clone()
    products.baddbmm(scores_bias, rand(3, 5, 2, grad=False), rand(3, 2, 6, grad=False), 0.5)
    assert torch.equal(scores_bias, kept)


def test_torch_ops_run_where_the_kernels_do_not_apply(kernels):
    """float64, bfloat16 autocast, vmap and a switched-off kernel: torch's own op."""
    x, weight, bias = rand(6, 4).double(), rand(3, 4).double(), rand(3).double()
    assert torch.equal(products.linear(x, weight, bias), F.linear(x, weight, bias))
    x32, w32 = rand(6, 4, grad=False), rand(3, 4, grad=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert products.linear(x32, w32).dtype == torch.bfloat16
    stacked = torch.stack([w32, 2 * w32])  # (2, 3, 4): two models' weights, vmapped
    batched = torch.func.vmap(lambda w: products.linear(x32, w))(stacked)
    assert torch.equal(batched, torch.func.vmap(lambda w: F.linear(x32, w))(stacked))
    blas.deactivate()
    assert torch.equal(products.linear(x32, w32), F.linear(x32, w32))


def test_the_fast_model_on_the_kernels_still_matches_the_reference(kernels):
    """The oracle: the reference model on torch's products, the fast one on the kernels."""
    shape = dict(d_model=32, num_heads=4, d_ff=64, num_layers=2, dropout=0.0)
    torch.manual_seed(0)
    reference = transformer.EncoderDecoder(data.VOCAB_SIZE, data.VOCAB_SIZE, **shape)
    torch.manual_seed(0)
    model = fast.EncoderDecoder(data.VOCAB_SIZE, data.VOCAB_SIZE, **shape)
    src, tgt = data.random_batch(24, 8, 16, torch.Generator().manual_seed(1))
    expected = batch_loss(reference, src, tgt, 0.1)
    expected.backward()
    loss = packed_loss(model, src, tgt, 0.1)
    loss.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    for (name, mine), theirs in zip(model.named_parameters(), reference.parameters(), strict=True):
        if name.endswith("w_k.bias"):  # its true gradient is 0: both are rounding noise
            continue
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5, msg=name)


# The bits, in fresh processes -------------------------------------------------------------


def products_run(patch: str = "", env: dict | None = None) -> dict:
    """PRODUCT_CASES' hashes in a fresh pinned process, after `patch` to core.blas."""
    return run_fingerprint("--products", patch=patch, env=env)


@needs_avx2
def test_every_product_gives_the_committed_bits():
    ours = products_run()
    assert ours["numerics"]["products"].split(",")[0].endswith("Haswell kernels")
    committed = FINGERPRINT["products"]["sha256"]
    differ = [name for name in committed if ours["products"][name] != committed[name]]
    assert not differ, f"other bits than committed in {differ}"
    assert set(ours["products"]) == set(committed)
    assert ours["torch_product"] == FINGERPRINT["products"]["torch_product"]["sha256"]


@needs_avx2
def test_the_users_openblas_settings_do_not_change_the_bits():
    """OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS in the environment are the user's (and
    NumPy's); the kernels are loaded with their own."""
    hostile = {"OPENBLAS_CORETYPE": "SkylakeX", "OPENBLAS_NUM_THREADS": "2"}
    ours = products_run(env=hostile)
    assert ours["products"] == FINGERPRINT["products"]["sha256"]
    assert ours["numerics"]["products"].endswith("Haswell kernels, 1 thread")


@needs_avx2
@pytest.mark.skipif(not AVX512_HERE, reason="the negative control needs an AVX-512 CPU")
def test_the_cpus_own_kernels_give_other_bits():
    """Without the Haswell pin OpenBLAS picks this CPU's kernels (SkylakeX on AVX-512),
    and the products round otherwise: the pin is what makes the bits portable."""
    theirs = products_run("blas.KERNELS = 'SkylakeX'")
    assert "SkylakeX kernels" in theirs["numerics"]["products"]
    committed = FINGERPRINT["products"]["sha256"]
    assert sum(theirs["products"][n] != committed[n] for n in committed) >= 10


@needs_avx2
def test_without_the_library_the_products_fall_back_and_say_so():
    fallback = products_run("blas.PACKAGE = 'no_such_openblas'")
    record = fallback["numerics"]
    assert record["mode"] == "portable" and record["products"] == "torch (MKL COMPATIBLE,STRICT)"
    assert "no_such_openblas package is not installed" in record["products_notice"]
    assert "MKL COMPATIBLE" in numerics.one_line(record)
    assert fallback["products"] != FINGERPRINT["products"]["sha256"]


def test_kernels_loaded_earlier_with_other_kernels_are_refused():
    """A library that was loaded before the core was set runs other kernels: load says
    why, in one line, instead of pretending."""
    code = "\n".join([
        "import ctypes", "from tcrformer.core import blas",
        "ctypes.CDLL(str(blas.library_path()))",  # loaded as the environment says: Prescott
        "try:", "    blas.load_kernels()", "except blas.Unavailable as why:", "    print(why)",
    ])  # fmt: skip
    env = {**os.environ, "OPENBLAS_CORETYPE": "Prescott"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"libscipy_openblas.so runs its \w+ kernels here, not Haswell", done.stdout.strip()
    )
