"""Train the reversal model: the paper's recipe, seeded, checkpointed, resumable.

One step, as in seed section 10.9:
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]           teacher forcing, "shifted right"
    loss = CE_smoothed(model(src, tgt_in), tgt_out)      padding ignored
    clip ||grad|| to grad_clip, Adam step, schedule step

Randomness has three sources, each seeded from the recipe and saved in every checkpoint:
torch's global generator (weight init, dropout), a separate generator for the training
batches, and on CUDA the device generator. A run killed at any point and restarted from its
last checkpoint therefore replays exactly the steps it lost.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from tcrformer.models.transformer import decoder_io, make_masks, token_loss
from tcrformer.training.checkpoints import (
    CHECKPOINT_FORMAT,
    checkpoint_path,
    discard_checkpoints,
    load_checkpoint,
    save_checkpoint,
    snapshot_path,
)
from tcrformer.training.data import PAD, TrainingStrings, derive_seed
from tcrformer.training.model import build_model, save_model, with_gru_size
from tcrformer.training.recipe import Recipe, resolve_device
from tcrformer.training.schedule import schedule_for
from tcrformer.training.shard import SOLO, Shard

LOG = logging.getLogger("tcrformer.reversal")


# One step -----------------------------------------------------------------------------------


def batch_loss(model: nn.Module, src: Tensor, tgt: Tensor, label_smoothing: float) -> Tensor:
    """The objective (models.transformer.token_loss) on the padded batch, teacher-forced."""
    tgt_in, tgt_out = decoder_io(tgt)  # (B, Lt) each
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)  # (B, 1, Ls), (B, Lt, Lt)
    logits = model(src, tgt_in, src_mask, tgt_mask)  # (B, Lt, V)
    return token_loss(logits.flatten(0, 1), tgt_out.flatten(), label_smoothing, PAD)


def packed_loss(model: nn.Module, src: Tensor, tgt: Tensor, label_smoothing: float) -> Tensor:
    """batch_loss computed without the padding rows (fast model only; see its packed_loss)."""
    return model.packed_loss(src, tgt, label_smoothing, PAD)


def make_optimizer(recipe: Recipe, model: nn.Module, device: torch.device):
    """Adam; the fast path uses PyTorch's fused kernel (one call for all parameters)."""
    base_lr, multiplier = schedule_for(recipe)
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=base_lr,
        betas=(recipe.beta1, recipe.beta2),
        eps=recipe.eps,
        fused=True if recipe.impl == "fast" else None,
    )
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)


def make_step(
    recipe: Recipe, model: nn.Module, optimizer, scheduler, device: torch.device, shard=SOLO
):
    """step(src, tgt) -> (loss, the gradient norm before clipping), both detached. No .item():
    nothing waits for the device here. grad_clip 0 clips nothing (the norm is still taken).
    Over several ranks (training.parallel) each takes its share of the batch, and the loss
    and the gradients are the full batch's, summed over the ranks."""
    loss_of = batch_loss
    max_norm = recipe.grad_clip if recipe.grad_clip > 0 else math.inf
    if recipe.compile:
        loss_of = torch.compile(batch_loss)  # forward and backward graphs, compiled once
    elif recipe.impl == "fast" and device.type == "cpu" and recipe.arch == "transformer":
        loss_of = packed_loss  # the same loss on the real rows only; on a GPU, finding them
        # (nonzero) would make the host wait for the device, and padding costs less there
    params = [p for p in model.parameters() if p.requires_grad]
    use_bf16 = recipe.precision == "bf16"
    stress_step = recipe.stress_step  # the step whose gradient is scaled (0: none)
    shared = shard.gradients(params) if shard.size > 1 else None  # what the ranks sum

    def step(src: Tensor, tgt: Tensor) -> Tensor:
        model.train()
        share = None
        if shard.size > 1:
            src, tgt, share = shard.rows(src, tgt)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss = loss_of(model, src, tgt, recipe.label_smoothing)
        if share is not None:
            loss = loss * share  # this rank's part of the full batch's mean loss
        if shared is None:
            optimizer.zero_grad(set_to_none=True)
        else:
            shared.zero()
        if stress_step and scheduler.last_epoch + 1 == stress_step:
            (loss * recipe.stress_scale).backward()  # the bad batch: its gradient scaled
        else:
            loss.backward()
        if shared is not None:
            loss = shared.sum(loss)
        norm = nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        optimizer.step()
        scheduler.step()
        return loss.detach(), norm.detach()

    return step


@dataclass
class Run:
    """Everything that changes while training, i.e. everything a checkpoint must hold."""

    recipe: Recipe
    device: torch.device
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    strings: TrainingStrings  # the training data; its generator is saved in checkpoints
    losses: Tensor  # (steps,) on the device, filled as training goes
    grad_norms: Tensor  # (steps,) the gradient norm before clipping, at every step
    step: int = 0  # steps done
    shard: Shard = SOLO  # this process's rank among the ranks (training.parallel)

    @property
    def dropout_bits(self):
        """The fast model's own dropout generator, when it uses one (see fast.Dropout)."""
        dropout = getattr(self.model, "dropout", None)
        return dropout if getattr(dropout, "bits", None) is not None else None

    def _rng(self) -> dict:
        rng = {"torch": torch.get_rng_state(), "batches": self.strings.generator.get_state()}
        if self.dropout_bits is not None:
            rng["dropout_bits"] = self.dropout_bits.state()
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        return rng

    def state(self) -> dict:
        """What a checkpoint holds; over several ranks, every rank's random streams (a
        collective: every rank calls it)."""
        rng = self._rng()
        if self.shard.size > 1:
            rng = {"ranks": self.shard.gather({k: _cpu(v) for k, v in rng.items()})}
        return {
            "ranks": self.shard.size,
            "format": CHECKPOINT_FORMAT,
            "fingerprint": self.recipe.fingerprint(),
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng,
            "losses": self.losses[: self.step].cpu(),
            "grad_norms": self.grad_norms[: self.step].cpu(),
        }

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        rng = state["rng"]["ranks"][self.shard.rank] if self.shard.size > 1 else state["rng"]
        torch.set_rng_state(rng["torch"])
        self.strings.generator.set_state(rng["batches"])
        if self.dropout_bits is not None:
            self.dropout_bits.set_state(rng["dropout_bits"])
        if self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], self.device)
        self.step = state["step"]
        self.losses[: self.step] = state["losses"].to(self.device)
        self.grad_norms[: self.step] = state["grad_norms"].to(self.device)


# The loop ------------------------------------------------------------------------------------


@dataclass
class Trained:
    model: nn.Module
    losses: Tensor  # (steps,) float32 on the CPU: the training loss at every step
    timing: dict = field(default_factory=dict)  # wall-clock facts, never results
    grad_norms: Tensor | None = None  # (steps,) the gradient norm before clipping
    recipe: Recipe | None = None  # what was trained (a GRU's width filled in)


def new_run(recipe: Recipe, device: torch.device, shard: Shard = SOLO) -> Run:
    recipe = with_gru_size(recipe)
    torch.manual_seed(recipe.seed)  # every rank: the same initial weights
    model = build_model(recipe.architecture(), recipe.impl, init=recipe.init).to(device)
    fast_transformer = recipe.impl == "fast" and recipe.arch == "transformer"
    if fast_transformer and device.type == "cpu" and not recipe.compile:
        stream = "dropout" if shard.size == 1 else f"dropout rank {shard.rank}"
        model.dropout.draw_bits_from(derive_seed(recipe.seed, stream))
    elif shard.size > 1:  # torch's own dropout: its generator, offset by the rank
        torch.manual_seed(derive_seed(recipe.seed, f"dropout rank {shard.rank}"))
    optimizer, scheduler = make_optimizer(recipe, model, device)
    strings = TrainingStrings(recipe)
    losses = torch.full((recipe.steps,), math.nan, device=device)
    grad_norms = torch.full((recipe.steps,), math.nan, device=device)
    return Run(recipe, device, model, optimizer, scheduler, strings, losses, grad_norms, 0, shard)


def train(
    recipe: Recipe,
    checkpoint_dir: str | Path | None = None,
    ranks: int = 1,
    workers=None,
    threads: int | None = None,
    on_step: Callable[[int], None] | None = None,
    on_loss: Callable[[int, Tensor], None] | None = None,
) -> Trained:
    """The one way in: train `recipe` from scratch, or from the last checkpoint in
    checkpoint_dir if there is one, which is removed once the run has finished. Over
    `ranks` > 1 the same step is split by rows (training.parallel; `workers` are ranks
    1..R-1 started early by training.ranks, else they start here). `on_step(step)` and
    `on_loss(step, loss)` (the step's loss, a 0-d tensor on the device) run after every
    step on the first rank (a progress bar, a live loss curve)."""
    if threads:
        torch.set_num_threads(threads)
    if ranks > 1:
        from tcrformer.training.parallel import train_parallel

        trained = train_parallel(
            recipe, ranks, train_rank, checkpoint_dir, on_step, workers, on_loss
        )
    else:
        device = resolve_device(recipe.device, f"{recipe.config_path}.device")
        trained = train_rank(recipe, SOLO, device, checkpoint_dir, on_step, on_loss)
    if checkpoint_dir is not None:
        discard_checkpoints(checkpoint_dir, trained.recipe)
    return trained


def train_rank(
    recipe: Recipe,
    shard: Shard,
    device: torch.device,
    checkpoint_dir: str | Path | None = None,
    on_step: Callable[[int], None] | None = None,
    on_loss: Callable[[int, Tensor], None] | None = None,
) -> Trained:
    """The loop on one rank (all of it with one rank). Over several ranks every rank first
    shows the others the fingerprint of the recipe it was handed: one that trains another
    recipe (a key lost on its way to a rank's process) stops them all."""
    recipe = with_gru_size(recipe)  # a GRU without a width: the Transformer's size
    if shard.size > 1:
        prints = shard.gather(recipe.fingerprint())
        if len(set(prints)) > 1:
            raise ValueError(f"the ranks were handed different recipes: fingerprints {prints}")
    run = new_run(recipe, device, shard)
    ckpt = checkpoint_path(checkpoint_dir, recipe) if checkpoint_dir else None
    if ckpt is not None and ckpt.exists():
        load_checkpoint(ckpt, run)
        if shard.leads:
            LOG.info("resumed from %s at step %d", ckpt, run.step)
    resumed_from = run.step
    step_fn = make_step(recipe, run.model, run.optimizer, run.scheduler, device, shard)
    progress = Progress(recipe.steps, run.step)
    first_step_s = None
    for step in range(run.step + 1, recipe.steps + 1):
        src, tgt = run.strings.next_batch()
        lr = run.scheduler.get_last_lr()[0]
        run.losses[step - 1], run.grad_norms[step - 1] = step_fn(_to(src, device), _to(tgt, device))
        run.step = step
        if first_step_s is None:
            first_step_s = progress.elapsed()  # includes compilation when compile is on
        if shard.leads and (step % recipe.log_every == 0 or step == recipe.steps):
            progress.log(step, run.losses[step - 1].item(), lr)
        if ckpt is not None and step % recipe.checkpoint_every == 0 and step < recipe.steps:
            save_checkpoint(ckpt, run)  # every rank calls it; the first rank writes
        if checkpoint_dir and shard.leads and step in recipe.snapshot_steps:
            path = snapshot_path(checkpoint_dir, recipe, step)
            save_model(path, run.model, recipe.architecture())
        if on_step is not None and shard.leads:
            on_step(step)
        if on_loss is not None and shard.leads:
            on_loss(step, run.losses[step - 1])
    seconds = progress.elapsed()
    timing = {
        "train_seconds": seconds,
        "first_step_seconds": first_step_s,
        "steps_run": recipe.steps - resumed_from,
        "resumed_from_step": resumed_from,
        "device": str(device),
        "impl": recipe.impl,
        "compile": recipe.compile,
        "precision": recipe.precision,
        "threads": torch.get_num_threads(),
        "ranks": shard.size,
        "torch": torch.__version__,
    }
    return Trained(run.model, run.losses.cpu(), timing, run.grad_norms.cpu(), run.recipe)


def _cpu(value):
    return value.cpu() if isinstance(value, Tensor) else value


def _to(batch: Tensor, device: torch.device) -> Tensor:
    """CPU batch -> device; on CUDA through pinned memory, so the host never waits."""
    if device.type != "cuda":
        return batch
    return batch.pin_memory().to(device, non_blocking=True)


class Progress:
    """One log line every few steps: step, loss, learning rate, steps/s, time left."""

    def __init__(self, total: int, start: int):
        self.total, self.t0 = total, time.perf_counter()
        self.last_step, self.last_t = start, self.t0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, step: int, loss: float, lr: float) -> None:
        now = time.perf_counter()
        rate = (step - self.last_step) / max(now - self.last_t, 1e-12)
        eta = (self.total - step) / rate if rate > 0 else math.inf
        LOG.info(
            "step %*d/%d  loss %.4f  lr %.2e  %.1f steps/s  ETA %s",
            len(str(self.total)),
            step,
            self.total,
            loss,
            lr,
            rate,
            _clock(eta),
        )
        self.last_step, self.last_t = step, now


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s"
