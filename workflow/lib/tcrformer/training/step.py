"""The training step written for this model: no autograd, the batch in chunks, fused Adam.

    g_c    = the gradient of chunk c's part of the batch's mean loss    (models.backprop)
    g      = g_0 + g_1 + ... + g_{C-1}                                    (in chunk order)
    g      = g min(1, clip / (||g|| + 1e-6))                              (as clip_grad_norm_)
    params = Adam(params, g, lr(t))                                       (torch's fused kernel)

The chunk count C is the recipe's (`chunks`), not the machine's: the chunks run on
`numerics.threads` workers (training.workers), and the bits are the same for any number of
them. Chunk c of a batch is its strings c, c + C, c + 2C, ...; its dropout draws from a
stream of its own, seeded by the recipe's seed, the chunk and the step, so no generator state
is carried from step to step or from worker to worker.

The recipes this step covers: the Transformer (impl fast) in fp32, on the CPU, not compiled.
Anything else (a GRU arm, the reference model, bf16, torch.compile, a GPU) trains with
autograd in one process (training.loop), and the run's record says why (`covers`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from tcrformer.models.backprop import Network, Switches
from tcrformer.models.dropout import Dropout, DropoutMasks
from tcrformer.models.flat import Layout, Weights, bind
from tcrformer.training.data import PAD, derive_seed
from tcrformer.training.recipe import Recipe
from tcrformer.training.schedule import schedule_for
from tcrformer.training.workers import Workers, keep_freed_memory, shared

STEP = "hand-written"  # what numerics.json names this step


def covers(recipe: Recipe, device: torch.device) -> str:
    """'' when this step trains `recipe` on `device`, else why it does not."""
    reasons = [
        (recipe.arch != "transformer", f"arch {recipe.arch}"),
        (recipe.impl != "fast", f"impl {recipe.impl}"),
        (recipe.precision != "fp32", f"precision {recipe.precision}"),
        (recipe.compile, "compile"),
        (device.type != "cpu", f"device {device.type}"),
    ]
    found = [why for applies, why in reasons if applies]
    return f"autograd: the hand-written step covers no {', '.join(found)}" if found else ""


def dropout_stream(seed: int, chunk: int, step: int) -> int:
    return derive_seed(seed, f"dropout chunk {chunk} step {step}")


class HandStep:
    """step(src, tgt, t) -> (loss, gradient norm before clipping) of step t (1-based); the
    weights are the model's own parameters, bound to a shared flat buffer. state() and
    restore() are what a checkpoint holds of it. More workers than chunks would idle: at
    most `chunks` run."""

    def __init__(self, recipe: Recipe, model: nn.Module, workers: int = 1):
        self.recipe, self.model = recipe, model
        self.chunks = recipe.chunks
        self.layout = Layout.of(model)
        size, d = self.layout.size, recipe.d_model
        self.params = shared((size,), torch.float32)
        bind(model, self.params, self.layout)
        self.grads = shared((self.chunks, size), torch.float32)
        self.src = shared((recipe.batch_size, recipe.max_len), torch.long)
        self.tgt = shared((recipe.batch_size, recipe.max_len + 2), torch.long)
        self.chunk_losses = shared((self.chunks,), torch.float32)
        self.weights = Weights.of(self.params, self.layout, d)
        self.chunk_grads = [Weights.of(g, self.layout, d) for g in self.grads]
        self.switches = Switches(recipe.num_heads, recipe.norm == "pre", recipe.positions,
                                 recipe.score_scale, recipe.label_smoothing)  # fmt: skip
        self.total = torch.empty(size) if self.chunks > 1 else self.grads[0]
        self.exp_avg, self.exp_avg_sq = torch.zeros(size), torch.zeros(size)
        self.adam_steps = torch.zeros(())  # Adam's own step count (its bias correction)
        self.base_lr, self.multiplier = schedule_for(recipe)
        self.max_norm = recipe.grad_clip if recipe.grad_clip > 0 else math.inf
        model.train()
        # Every worker computes on one thread, this process too: a reduction split over
        # threads sums in another order, and the bits must not depend on the core count.
        self.threads_before = torch.get_num_threads()
        torch.set_num_threads(1)
        keep_freed_memory()  # before the fork: the workers inherit it
        self.workers = Workers(min(workers, self.chunks), self.chunks, self.chunk_gradient)

    def chunk_gradient(self, chunk: int, step: int) -> None:
        """Chunk `chunk`'s part of step `step`'s loss and its gradient, into its buffers."""
        rows = slice(chunk, None, self.chunks)
        draws = Dropout(self.recipe.dropout)
        draws.draw_bits_from(dropout_stream(self.recipe.seed, chunk, step))
        network = Network(self.weights, self.switches, self.model.pe, DropoutMasks(draws))
        n_tokens = int((self.tgt[:, 1:] != PAD).sum())  # the whole batch's target tokens
        with torch.no_grad():
            self.chunk_losses[chunk] = network.forward(
                self.src[rows], self.tgt[rows], n_tokens, PAD
            )
            network.backward(self.chunk_grads[chunk])

    def __call__(self, src: Tensor, tgt: Tensor, step: int) -> tuple[Tensor, Tensor]:
        self.src.copy_(src)
        self.tgt.copy_(tgt)
        self.workers.run(step)
        gradient, loss = self.total, self.chunk_losses[0].clone()
        if self.chunks > 1:
            gradient.copy_(self.grads[0])
            for chunk in range(1, self.chunks):
                gradient.add_(self.grads[chunk])
                loss += self.chunk_losses[chunk]
        if self.recipe.stress_step and step == self.recipe.stress_step:  # the bad batch
            gradient.mul_(self.recipe.stress_scale)
        norm = torch.linalg.vector_norm(gradient)
        gradient.mul_((self.max_norm / (norm + 1e-6)).clamp_(max=1.0))
        self.adam_steps += 1
        torch._fused_adam_(
            [self.params], [gradient], [self.exp_avg], [self.exp_avg_sq], [], [self.adam_steps],
            amsgrad=False, lr=self.lr(step),
            beta1=self.recipe.beta1, beta2=self.recipe.beta2, weight_decay=0.0,
            eps=self.recipe.eps, maximize=False,
        )  # fmt: skip
        return loss, norm

    def lr(self, step: int) -> float:
        """The learning rate step `step` (1-based) takes."""
        return self.base_lr * self.multiplier(step - 1)

    def state(self) -> dict:
        return {"exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone(),
                "adam_steps": self.adam_steps.clone()}  # fmt: skip

    def restore(self, state: dict) -> None:
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        self.adam_steps.copy_(state["adam_steps"])

    def close(self) -> None:
        self.workers.close()
        torch.set_num_threads(self.threads_before)
