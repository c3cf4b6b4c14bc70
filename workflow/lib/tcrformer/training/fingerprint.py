"""A fingerprint of the numerics: the exact losses and weights of a short training run.

    python -m tcrformer.training.fingerprint --config config/config.yaml --steps 60

trains the configured recipe for `--steps` steps under the config's `numerics:` (pinned in
this process before torch is imported) and prints JSON: every step's float32 loss (as hex,
exact), the sha256 of the saved weights file, and the numerics in force. Two machines that
print the same JSON computed the same bits. tests/test_numerics.py compares it with
tests/golden/numerics_fingerprint.json.
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


def fingerprint(
    config: dict[str, Any], steps: int, seed: int | None = None, ranks: int = 1
) -> dict[str, Any]:
    """Train config's recipe for `steps` steps (torch must not be imported yet)."""
    pinned = numerics.pin(numerics.Numerics.from_config(config.get("numerics")))
    numerics.configure_torch(pinned, threads=None)
    return short_run(config, steps, pinned, seed, ranks)


def short_run(
    config: dict[str, Any], steps: int, pinned: numerics.Pinned, seed: int | None = None,
    ranks: int = 1,
) -> dict[str, Any]:  # fmt: skip
    """The fingerprint of a process whose numerics are already `pinned`."""
    from tcrformer.training.model import save_model
    from tcrformer.training.parallel import train_on
    from tcrformer.training.recipe import recipe_from_config, with_overrides

    changes: dict[str, Any] = {"steps": steps, "device": "cpu", "log_every": steps}
    if seed is not None:
        changes["seed"] = seed
    recipe = with_overrides(recipe_from_config(config["reversal"]), **changes)
    trained = train_on(recipe, ranks)
    with tempfile.TemporaryDirectory() as folder:
        weights = Path(folder) / "model.safetensors"
        save_model(weights, trained.model, recipe.architecture())
        weights_sha256 = hashlib.sha256(weights.read_bytes()).hexdigest()
    losses = trained.losses.numpy()  # float32
    return {
        "steps": steps,
        "seed": recipe.seed,
        "ranks": ranks,
        "losses_float32_hex": [float(x).hex() for x in losses],
        "last_loss": float(losses[-1]),
        "losses_sha256": hashlib.sha256(losses.tobytes()).hexdigest(),
        "weights_sha256": weights_sha256,
        "numerics": numerics.describe(pinned),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a config YAML (config/config.yaml)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=None, help="replace reversal.seed")
    parser.add_argument("--mode", choices=numerics.MODES, help="replace numerics.mode")
    parser.add_argument("--ranks", type=int, default=1, help="data-parallel ranks")
    args = parser.parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    if args.mode:
        config["numerics"] = {**(config.get("numerics") or {}), "mode": args.mode}
    print(json.dumps(fingerprint(config, args.steps, args.seed, args.ranks), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
