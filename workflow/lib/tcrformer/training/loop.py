"""Train the reversal model: the paper's recipe, seeded, checkpointed, resumable.

One step, as in explainer section 10.9:
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]           teacher forcing, "shifted right"
    loss = CE_smoothed(model(src, tgt_in), tgt_out)      padding ignored
    clip ||grad|| to grad_clip, Adam step, schedule step

Two ways to take it. On the CPU the fast Transformer in fp32 trains with the hand-written
step (training.step: no autograd, the batch in chunks over `workers` processes, the same bits
for any number of them). Everything else (a GPU, the reference model, a GRU, bf16,
torch.compile) trains with autograd in this process; the record says which ran and why.
On a GPU that is one process on one device, with CUDA's deterministic kernels only
(core.numerics.deterministic_cuda), and the record names the GPU and its software.

Randomness is seeded from the recipe and saved in every checkpoint: torch's global generator
(weight init; autograd's dropout), a separate generator for the training batches, the fast
model's dropout generator under autograd, and on CUDA the device generator. The hand-written
step's dropout streams are derived from the seed, the chunk and the step, so they hold no
state. A run killed at any point and restarted from its last checkpoint replays exactly the
steps it lost.
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

from tcrformer.core import numerics
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
from tcrformer.training.step import STEP, HandStep, covers

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


def make_step(recipe: Recipe, model: nn.Module, optimizer, scheduler, device: torch.device):
    """The autograd step: step(src, tgt, index) -> (loss, the gradient norm before clipping),
    both detached. No .item(): nothing waits for the device here. grad_clip 0 clips nothing
    (the norm is still taken)."""
    loss_of = batch_loss
    max_norm = recipe.grad_clip if recipe.grad_clip > 0 else math.inf
    if recipe.compile:
        loss_of = torch.compile(batch_loss)  # forward and backward graphs, compiled once
    elif recipe.impl == "fast" and device.type == "cpu" and recipe.arch == "transformer":
        loss_of = packed_loss  # the same loss on the real rows only; on a GPU, finding them
        # (nonzero) would make the host wait for the device, and padding costs less there
    params = [p for p in model.parameters() if p.requires_grad]
    use_bf16 = recipe.precision == "bf16"

    def step(src: Tensor, tgt: Tensor, index: int = 0) -> tuple[Tensor, Tensor]:
        model.train()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss = loss_of(model, src, tgt, recipe.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        if recipe.stress_step and index == recipe.stress_step:
            (loss * recipe.stress_scale).backward()  # the bad batch: its gradient scaled
        else:
            loss.backward()
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
    strings: TrainingStrings  # the training data; its generator is saved in checkpoints
    losses: Tensor  # (steps,) on the device, filled as training goes
    grad_norms: Tensor  # (steps,) the gradient norm before clipping, at every step
    step: int = 0  # steps done
    hand: HandStep | None = None  # the hand-written step, or None: autograd
    optimizer: torch.optim.Optimizer | None = None  # autograd's
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
    why_autograd: str = ""  # why the hand-written step does not train this recipe

    @property
    def dropout_bits(self):
        """The fast model's own dropout generator under autograd (models.dropout.Dropout)."""
        dropout = getattr(self.model, "dropout", None)
        return dropout if getattr(dropout, "bits", None) is not None else None

    def step_function(self) -> Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]]:
        if self.hand is not None:
            return self.hand
        return make_step(self.recipe, self.model, self.optimizer, self.scheduler, self.device)

    def lr(self, step: int) -> float:
        """The learning rate step `step` (1-based) takes."""
        return self.hand.lr(step) if self.hand is not None else self.scheduler.get_last_lr()[0]

    def state(self) -> dict:
        """What a checkpoint holds."""
        rng = {"torch": torch.get_rng_state(), "batches": self.strings.generator.get_state()}
        if self.dropout_bits is not None:
            rng["dropout_bits"] = self.dropout_bits.state()
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        if self.hand is not None:
            optimiser = {"hand": self.hand.state()}
        else:
            optimiser = {"optimizer": self.optimizer.state_dict(),
                         "scheduler": self.scheduler.state_dict()}  # fmt: skip
        return {
            "format": CHECKPOINT_FORMAT,
            "fingerprint": self.recipe.fingerprint(),
            "step": self.step,
            "model": self.model.state_dict(),
            **optimiser,
            "rng": rng,
            "losses": self.losses[: self.step].cpu(),
            "grad_norms": self.grad_norms[: self.step].cpu(),
        }

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])  # into the bound views: copied in place
        if self.hand is not None:
            self.hand.restore(state["hand"])
        else:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        self.strings.generator.set_state(rng["batches"])
        if self.dropout_bits is not None:
            self.dropout_bits.set_state(rng["dropout_bits"])
        if self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], self.device)
        self.step = state["step"]
        self.losses[: self.step] = state["losses"].to(self.device)
        self.grad_norms[: self.step] = state["grad_norms"].to(self.device)

    def close(self) -> None:
        if self.hand is not None:
            self.hand.close()


# The loop ------------------------------------------------------------------------------------


@dataclass
class Trained:
    model: nn.Module
    losses: Tensor  # (steps,) float32 on the CPU: the training loss at every step
    timing: dict = field(default_factory=dict)  # wall-clock facts, never results
    grad_norms: Tensor | None = None  # (steps,) the gradient norm before clipping
    recipe: Recipe | None = None  # what was trained (a GRU's width filled in)
    step: str = STEP  # which step trained it: STEP, or why autograd did
    gpu: dict = field(default_factory=dict)  # core.numerics.describe_gpu of its device


def new_run(
    recipe: Recipe, device: torch.device, workers: int = 1, hand_written: bool = True
) -> Run:
    """A fresh run: the model from the seed, and the step that trains it (the hand-written
    one on `workers` processes where it covers the recipe and `hand_written` allows it,
    else autograd's)."""
    recipe = with_gru_size(recipe)
    torch.manual_seed(recipe.seed)  # the initial weights
    model = build_model(recipe.architecture(), recipe.impl, init=recipe.init).to(device)
    strings = TrainingStrings(recipe)
    losses = torch.full((recipe.steps,), math.nan, device=device)
    grad_norms = torch.full((recipe.steps,), math.nan, device=device)
    run = Run(recipe, device, model, strings, losses, grad_norms)
    run.why_autograd = covers(recipe, device) if hand_written else "autograd: asked for"
    if not run.why_autograd:
        run.hand = HandStep(recipe, model, workers)
        return run
    fast_transformer = recipe.impl == "fast" and recipe.arch == "transformer"
    if fast_transformer and device.type == "cpu" and not recipe.compile:
        model.dropout.draw_bits_from(derive_seed(recipe.seed, "dropout"))
    run.optimizer, run.scheduler = make_optimizer(recipe, model, device)
    return run


def train(
    recipe: Recipe,
    checkpoint_dir: str | Path | None = None,
    workers: int = 1,
    on_step: Callable[[int], None] | None = None,
    on_loss: Callable[[int, Tensor], None] | None = None,
    hand_written: bool = True,
) -> Trained:
    """The one way in: train `recipe` from scratch, or from the last checkpoint in
    checkpoint_dir if there is one, which is removed once the run has finished. On the CPU
    the hand-written step runs its chunks on `workers` processes (training.workers);
    hand_written=False trains with autograd (the benchmarks, the numerics' anchors).
    `on_step(step)` and `on_loss(step, loss)` (the step's loss, a 0-d tensor on the device)
    run after every step (a progress bar, a live loss curve)."""
    recipe = with_gru_size(recipe)  # a GRU without a width: the Transformer's size
    device = resolve_device(recipe.device, f"{recipe.config_path}.device")
    if device.type == "cuda":
        numerics.deterministic_cuda()  # before the model's first CUDA op
    run = new_run(recipe, device, workers, hand_written)
    try:
        trained = _loop(run, checkpoint_dir, on_step, on_loss)
    finally:
        run.close()
    if run.why_autograd:
        LOG.info("%s", run.why_autograd)
    trained.timing["workers"] = run.hand.workers.count if run.hand is not None else 1
    trained.gpu = numerics.describe_gpu(device)
    if checkpoint_dir is not None:
        discard_checkpoints(checkpoint_dir, trained.recipe)
    return trained


def _loop(run: Run, checkpoint_dir, on_step, on_loss) -> Trained:
    recipe, device = run.recipe, run.device
    ckpt = checkpoint_path(checkpoint_dir, recipe) if checkpoint_dir else None
    if ckpt is not None and ckpt.exists():
        load_checkpoint(ckpt, run)
        LOG.info("resumed from %s at step %d", ckpt, run.step)
    resumed_from = run.step
    step_fn = run.step_function()
    progress = Progress(recipe.steps, run.step)
    first_step_s = None
    for step in range(run.step + 1, recipe.steps + 1):
        src, tgt = run.strings.next_batch()
        lr = run.lr(step)
        run.losses[step - 1], run.grad_norms[step - 1] = step_fn(
            _to(src, device), _to(tgt, device), step
        )
        run.step = step
        if first_step_s is None:
            first_step_s = progress.elapsed()  # includes compilation when compile is on
        if step % recipe.log_every == 0 or step == recipe.steps:
            progress.log(step, run.losses[step - 1].item(), lr)
        if ckpt is not None and step % recipe.checkpoint_every == 0 and step < recipe.steps:
            save_checkpoint(ckpt, run)
        if checkpoint_dir and step in recipe.snapshot_steps:
            save_model(
                snapshot_path(checkpoint_dir, recipe, step), run.model, recipe.architecture()
            )
        if on_step is not None:
            on_step(step)
        if on_loss is not None:
            on_loss(step, run.losses[step - 1])
    timing = {
        "train_seconds": progress.elapsed(),
        "first_step_seconds": first_step_s,
        "steps_run": recipe.steps - resumed_from,
        "resumed_from_step": resumed_from,
        "device": str(device),
        "impl": recipe.impl,
        "compile": recipe.compile,
        "precision": recipe.precision,
        "step": run.why_autograd or STEP,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    step_name = run.why_autograd or STEP
    return Trained(run.model, run.losses.cpu(), timing, run.grad_norms.cpu(), recipe, step_name)


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
