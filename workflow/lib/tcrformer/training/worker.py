"""A rank 1..R-1 of a data-parallel training: `python -m tcrformer.training.worker`, started
by training.ranks with rank 0's recipe, store, threads and matrix products. It runs the same
loop as rank 0 (training.loop.train_rank) on its share of every batch (training.parallel).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from tcrformer.core import numerics
from tcrformer.training.loop import train_rank
from tcrformer.training.parallel import device_of, join
from tcrformer.training.recipe import Recipe, resolve_device
from tcrformer.training.shard import Shard


def _worker(
    rank: int, ranks: int, recipe, store: str, checkpoint_dir, threads: int, products: str
) -> None:
    """Ranks 1..R-1: the same loop, in a process of their own, on rank 0's products."""
    numerics.follow(products)
    torch.set_num_threads(threads)
    numerics.deterministic_kernels()
    shard = Shard(rank, ranks)
    device = device_of(resolve_device(recipe.device), shard)
    join(shard, Path(store), device)
    try:
        train_rank(recipe, shard, device, checkpoint_dir)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """A rank 1..R-1 of train_parallel (its arguments come from training.ranks)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    for name in ("rank", "ranks", "threads"):
        parser.add_argument(f"--{name}", type=int, required=True)
    for name in ("recipe", "store", "products"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--checkpoints", default=None)
    args = parser.parse_args(argv)
    recipe = Recipe.from_params(json.loads(Path(args.recipe).read_text(encoding="utf-8")))
    _worker(args.rank, args.ranks, recipe, args.store, args.checkpoints, args.threads,
            args.products)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
