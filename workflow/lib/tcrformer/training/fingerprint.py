"""A fingerprint of the numerics: the exact losses and weights of a short training run.

    python -m tcrformer.training.fingerprint --config config/config.yaml --steps 60

trains the configured recipe for `--steps` steps under the config's `numerics:` (pinned in
this process before torch is imported) and prints JSON: every step's float32 loss (as hex,
exact), the sha256 of the saved weights file, and the numerics in force. Two machines that
print the same JSON computed the same bits. tests/test_numerics.py compares it with
tests/golden/numerics_fingerprint.json. It trains on the CPU; `--device cuda` trains on the
GPU instead (autograd's step, CUDA's deterministic kernels), and `gpu` names that GPU.

    python -m tcrformer.training.fingerprint --config config/config.yaml --products

prints instead the sha256 of every matrix product of PRODUCT_CASES (forward, and the
gradients of every input): the model's own shapes and the edge cases of a kernel's
blocking, on exact inputs (integers over a power of two); and `torch_product`, the sha256
of one product torch computes itself, in MKL.

    python -m tcrformer.training.fingerprint --config config/config.yaml --torch-product

prints that hash alone: with `--mode native` and MKL_CBWR unset it is MKL's own choice of
code path for this CPU, which tests/test_emulated_cpus.py shows differs from CPU to CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core import numerics
from tcrformer.core.config import apply_receptor


def fingerprint(
    config: dict[str, Any], steps: int, seed: int | None = None, workers: int = 1,
    batch_size: int | None = None, hand_written: bool = True, device: str = "cpu",
) -> dict[str, Any]:  # fmt: skip
    """Train config's recipe for `steps` steps (torch must not be imported yet)."""
    pinned = pin_from_config(config)
    return short_run(config, steps, pinned, seed, workers, batch_size, hand_written, device)


def pin_from_config(config: dict[str, Any]) -> numerics.Pinned:
    """This process's numerics, from config's `numerics:`, a fallback said on stderr."""
    pinned = numerics.pin(numerics.Numerics.from_config(config.get("numerics")))
    if pinned.notice:
        print(f"numerics: {pinned.notice}", file=sys.stderr)
    numerics.configure_torch(pinned, threads=None)
    return pinned


def short_run(
    config: dict[str, Any], steps: int, pinned: numerics.Pinned, seed: int | None = None,
    workers: int = 1, batch_size: int | None = None, hand_written: bool = True,
    device: str = "cpu",
) -> dict[str, Any]:  # fmt: skip
    """The fingerprint of a process whose numerics are already `pinned`."""
    from tcrformer.training.loop import train
    from tcrformer.training.model import save_model
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    changes: dict[str, Any] = {"steps": steps, "device": device, "log_every": steps}
    if seed is not None:
        changes["seed"] = seed
    if batch_size is not None:
        changes["batch_size"] = batch_size
    recipe = with_overrides(recipe_from_config(config["reversal"]), **changes)
    trained = train(recipe, workers=workers, hand_written=hand_written)
    with tempfile.TemporaryDirectory() as folder:
        weights = Path(folder) / "model.safetensors"
        save_model(weights, trained.model, recipe.architecture())
        weights_sha256 = hashlib.sha256(weights.read_bytes()).hexdigest()
    losses = trained.losses.numpy()  # float32
    return {
        "steps": steps,
        "seed": recipe.seed,
        "workers": trained.timing["workers"],
        "step": trained.step,
        "batch_size": recipe.batch_size,
        "losses_float32_hex": [float(x).hex() for x in losses],
        "last_loss": float(losses[-1]),
        "losses_sha256": hashlib.sha256(losses.tobytes()).hexdigest(),
        "weights_sha256": weights_sha256,
        "numerics": numerics.describe(pinned),
        "gpu": trained.gpu,
    }


# (name, product, shapes of its inputs): `linear` x (N, d_in), W (d_out, d_in), b (d_out,);
# `baddbmm` bias, a (B, m, k), b given as (B, n, k) and passed transposed (the scores);
# `bmm` a (B, m, k), b (B, k, n); `nn` a plain row-major (m, k) @ (k, n), alpha 1, beta 0
# (the case OpenBLAS would hand to its AVX-512 "direct" shortcut if called row-major).
PRODUCT_CASES = (
    ("qkv", "linear", (1597, 64), (192, 64), (192,)),
    ("w_o", "linear", (1597, 64), (64, 64), (64,)),
    ("cross_kv", "linear", (1411, 64), (128, 64), (128,)),
    ("ffn_in", "linear", (1597, 64), (256, 64), (256,)),
    ("ffn_out", "linear", (1597, 256), (64, 256), (64,)),
    ("generator", "linear", (1597, 64), (23, 64), (23,)),
    ("k300", "linear", (211, 300), (77, 300), (77,)),
    ("odd", "linear", (37, 61), (53, 61), (53,)),
    ("one_row", "linear", (1, 64), (64, 64), (64,)),
    ("tiny", "linear", (1, 1), (1, 1), (1,)),
    ("no_bias", "linear", (2, 3), (5, 3), None),
    ("scores", "baddbmm", (512, 17, 17), (512, 17, 16), (512, 17, 16)),
    ("weighted_values", "bmm", (512, 17, 17), (512, 17, 16)),
    ("odd_batch", "bmm", (7, 5, 3), (7, 3, 9)),
    ("nn", "nn", (64, 48), (48, 80)),
)


def exact_inputs(shapes, seed: int) -> list:
    """Float32 tensors of integers over 2^12 in [-2, 2): the same values on any machine."""
    import numpy as np
    import torch

    rng = np.random.Generator(np.random.PCG64(seed))
    return [
        None if shape is None
        else torch.from_numpy((rng.integers(-(2**13), 2**13, shape) / 2**12).astype(np.float32))
        for shape in shapes
    ]  # fmt: skip


def products_fingerprint() -> dict[str, str]:
    """{case: sha256 of its output and every input's gradient} in this process's numerics."""
    from tcrformer.core import blas
    from tcrformer.models import products

    def run(kind, inputs):
        if kind == "linear":
            return products.linear(*inputs)
        if kind == "baddbmm":
            bias, a, b = inputs
            return products.baddbmm(bias, a, b.transpose(1, 2), 0.25)
        if kind == "bmm":
            return products.bmm(*inputs)
        a, b = (t.detach() for t in inputs)  # nn: the plain product, no autograd
        return (
            a @ b
            if blas.active() is None
            else products.gemm(a, b, a.new_empty(a.shape[0], b.shape[1]))
        )

    hashes = {}
    for index, (name, kind, *shapes) in enumerate(PRODUCT_CASES):
        inputs = [t if t is None else t.requires_grad_() for t in exact_inputs(shapes, index)]
        out = run(kind, inputs)
        tensors = [out.detach()]
        if out.requires_grad:
            (upstream,) = exact_inputs([tuple(out.shape)], 1000 + index)
            out.backward(upstream)
            tensors += [t.grad for t in inputs if t is not None and t.grad is not None]
        digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in tensors))
        hashes[name] = digest.hexdigest()
    return hashes


# Torch's own product (m, k) @ (k, n), in MKL: in portable mode under MKL_CBWR=COMPATIBLE,
# what still calls MKL (and every product of the fallback) runs like this.
TORCH_PRODUCT = (512, 300, 200)


def torch_product() -> str:
    """sha256 of torch's own float32 (m, k) @ (k, n) on exact inputs: MKL, on the branch this
    process's MKL_CBWR names (its automatic dispatch when unset)."""
    m, k, n = TORCH_PRODUCT
    a, b = exact_inputs([(m, k), (k, n)], 0)
    return hashlib.sha256((a @ b).numpy().tobytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a config YAML (config/config.yaml)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=None, help="replace reversal.seed")
    parser.add_argument("--mode", choices=numerics.MODES, help="replace numerics.mode")
    parser.add_argument("--workers", type=int, default=1, help="the training's processes")
    parser.add_argument("--autograd", action="store_true", help="train with autograd's step")
    parser.add_argument("--batch-size", type=int, help="replace reversal.batch_size")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="train here")
    parser.add_argument("--products", action="store_true", help="the products' fingerprint")
    parser.add_argument("--torch-product", action="store_true", help="torch's own product only")
    args = parser.parse_args(argv)
    config = apply_receptor(yaml.safe_load(Path(args.config).read_text(encoding="utf-8")))
    if args.mode:
        config["numerics"] = {**(config.get("numerics") or {}), "mode": args.mode}
    if args.products or args.torch_product:
        pinned = pin_from_config(config)
        result = {"torch_product": torch_product(), "numerics": numerics.describe(pinned)}
        if args.products:
            result["products"] = products_fingerprint()
    else:
        result = fingerprint(config, args.steps, args.seed, args.workers, args.batch_size,
                             not args.autograd, args.device)  # fmt: skip
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
