"""A process's place among data-parallel ranks (training.parallel): which strings of a batch
are its own, and the sums over the ranks. One rank (SOLO) shares nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def gradients(self, params: list[nn.Parameter]) -> SharedGradients:
        """The buffer the ranks sum their gradients and loss in (SharedGradients)."""
        return SharedGradients(params)

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        found: list[Any] = [None] * self.size
        dist.all_gather_object(found, obj)
        return found


class SharedGradients:
    """Every parameter's gradient as a view into one flat buffer, and after them one element
    for the loss: the ranks sum it with one all_reduce (a second collective for the loss
    alone costs a round trip), with nothing to gather into it or copy back out of it.

        shared.zero()          before the backward pass: zeros, every .grad a view of them
        loss.backward()        autograd adds each gradient into its view
        loss = shared.sum(loss)
    """

    def __init__(self, params: list[nn.Parameter]):
        self.params = params
        self.flat = params[0].new_zeros(sum(p.numel() for p in params) + 1)
        parts = self.flat[:-1].split([p.numel() for p in params])
        self.views = [part.view_as(p) for part, p in zip(parts, params, strict=True)]

    def zero(self) -> None:
        """Zero the buffer and point every parameter's .grad at its view (autograd adds
        into a .grad that exists: 0 + g is g)."""
        self.flat.zero_()
        for param, view in zip(self.params, self.views, strict=True):
            param.grad = view

    def sum(self, loss: Tensor) -> Tensor:
        """The gradients summed over the ranks, in place, and the summed loss."""
        self.flat[-1] = loss.detach()
        dist.all_reduce(self.flat, op=dist.ReduceOp.SUM)
        return self.flat[-1].clone()


SOLO = Shard()
