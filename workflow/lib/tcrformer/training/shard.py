"""A process's place among data-parallel ranks (training.parallel): which strings of a batch
are its own, and the sums over the ranks. One rank (SOLO) shares nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from tcrformer.models.transformer import decoder_io
from tcrformer.training.data import PAD


@dataclass(frozen=True)
class Shard:
    """This process's place among the ranks (SOLO: one rank, nothing is shared)."""

    rank: int = 0
    size: int = 1

    @property
    def leads(self) -> bool:
        return self.rank == 0

    def rows(self, src: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """This rank's strings of the full batch, and its share of the target tokens."""
        mine = slice(self.rank, None, self.size)
        _, targets = decoder_io(tgt)  # the tokens the loss is a mean over
        tokens = (targets != PAD).sum()
        return src[mine], tgt[mine], (targets[mine] != PAD).sum() / tokens

    def sum_gradients(self, params: list[nn.Parameter], loss: Tensor) -> Tensor:
        """The gradients summed over the ranks, in place, and the summed loss: one flat
        all_reduce for both (a second collective for the loss alone costs a round trip)."""
        grads = [p.grad for p in params]
        flat = torch.cat([*(g.reshape(-1) for g in grads), loss.detach().reshape(1)])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        return flat[-1].clone()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        found: list[Any] = [None] * self.size
        dist.all_gather_object(found, obj)
        return found


SOLO = Shard()
