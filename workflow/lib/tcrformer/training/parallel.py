"""Data-parallel training over R ranks, through torch.distributed (gloo on the CPU, NCCL on
CUDA): one training run on every core, with bits that depend on R and on nothing else.

Every rank builds the same model from the same seed and draws the same full batch from the
same generator, then keeps its share of the strings: rank r the rows r, r + R, r + 2R, ...
Its loss is the mean over its own target tokens times its share of the batch's target
tokens, N_r / N, so the ranks' losses sum to the full batch's mean loss and the gradients,
summed over the ranks (all_reduce), are the full batch's gradient. Every rank then clips and
steps on that same gradient, so the weights stay identical on every rank. Dropout draws from
a stream of each rank's own, seeded from the run's seed and the rank. One rank is the
unsharded loop, bit for bit.

The calling process is rank 0; ranks 1..R-1 are fresh Python processes (training.ranks,
which a rule script calls before it imports torch, so that the ranks' imports overlap;
each runs training.worker) that
inherit its environment, so the portable pins (core.numerics) hold in each, and each runs
the same number of threads. They meet through a file store in a temporary folder (no port to
pick); gloo's own traffic stays on the loopback interface.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist

from tcrformer.training.ranks import Workers
from tcrformer.training.shard import Shard


def backend(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def join(shard: Shard, store: Path, device: torch.device) -> None:
    dist.init_process_group(
        backend(device),
        store=dist.FileStore(str(store), shard.size),
        rank=shard.rank,
        world_size=shard.size,
    )


def device_of(device: torch.device, shard: Shard) -> torch.device:
    return torch.device("cuda", shard.rank) if device.type == "cuda" else device


def train_parallel(recipe, ranks: int, train_rank, checkpoint_dir=None, on_step=None,
                   workers=None, on_loss=None):  # fmt: skip
    """Train `recipe` over `ranks` ranks, each running `train_rank` (training.loop.train
    calls this with its own); returns rank 0's Trained (the model every rank holds, the full
    batches' losses)."""
    from tcrformer.core.numerics import check_ranks_fit
    from tcrformer.training.recipe import resolve_device

    if workers is None:
        workers = Workers.start(recipe, ranks, torch.get_num_threads(), checkpoint_dir)
    shard = Shard(0, ranks)
    done = False
    try:
        if (workers.ranks, workers.fingerprint) != (ranks, recipe.fingerprint()):
            raise ValueError(f"the {workers.ranks} ranks started train another recipe or "
                             f"rank count than this {ranks}-rank training")  # fmt: skip
        device = resolve_device(recipe.device, f"{recipe.config_path}.device")
        if device.type == "cuda":  # a job on a node the config check did not see
            check_ranks_fit(ranks, "cuda", max(torch.cuda.device_count(), 1))
        device = device_of(device, shard)
        join(shard, workers.store, device)
        trained = train_rank(recipe, shard, device, checkpoint_dir, on_step, on_loss)
        done = True
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        failed = workers.close(timeout=120 if done else 0)
    if failed:
        raise RuntimeError(f"a training rank exited with {failed} (pid {os.getpid()})")
    trained.timing["ranks"] = ranks
    return trained
