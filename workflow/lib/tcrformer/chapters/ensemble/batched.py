"""Several seeds of one recipe trained in one process, as one batched computation.

The models of K seeds are stacked parameter by parameter, (K, ...) each, and one
`torch.func.vmap` over the study-notes loss computes all K losses and gradients at once:

    grads_k, loss_k = grad(loss)(params_k, batch_k)       for k = 1..K, in one call
    clip each seed's gradient to its own norm, then one Adam step on the stacked params

Adam is elementwise and the schedule is shared, so one optimizer over the stacked
parameters is K independent optimizers. Each seed starts from the weights its single run
would draw and sees the batches its single run would see; only dropout's draws and the
rounding differ (vmap runs the padded layout, the single run the packed one). So the bits
differ from K separate runs and the statistics do not (tests/test_ensemble.py).

On a GPU this turns K small, launch-bound trainings into one that fills the device. On a
2-core CPU it is slower than separate runs (bench/README.md): the work is the same and the
padding costs a quarter more.
"""

from __future__ import annotations

import copy
import math
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, stack_module_state, vmap

from tcrformer.models.transformer import make_masks
from tcrformer.training.checkpoints import derive_seed
from tcrformer.training.data import PAD, random_batch
from tcrformer.training.loop import Trained
from tcrformer.training.model import build_model
from tcrformer.training.recipe import Recipe, resolve_device
from tcrformer.training.schedule import schedule_for

_CLIP_EPS = 1e-6  # as in torch.nn.utils.clip_grad_norm_


def _loss(base, label_smoothing, params, buffers, src, tgt) -> Tensor:
    """One seed's teacher-forced loss, as train.batch_loss (padded layout)."""
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)
    logits = functional_call(base, (params, buffers), (src, tgt_in, src_mask, tgt_mask))
    return F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


def clip_per_seed(grads: dict[str, Tensor], max_norm: float) -> Tensor:
    """Scale each seed's gradient (row k of every tensor) to norm <= max_norm, in place.

    Returns the pre-clip norms (K,), like clip_grad_norm_ does for one model.
    """
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)  # (K,)
    coef = (max_norm / (norms + _CLIP_EPS)).clamp(max=1.0)
    for g in grads.values():
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
    return norms


def initial_models(recipe: Recipe, seeds: list[int]) -> list[nn.Module]:
    """The model each seed's single run would start from (same draws, same order)."""
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(build_model(recipe.architecture(), recipe.impl))
    return models


def train_batched(recipe: Recipe, seeds: list[int]) -> list[Trained]:
    """Train `recipe` once per seed, all seeds in one vmapped computation."""
    device = resolve_device(recipe.device, f"{recipe.config_path}.device")
    models = [m.to(device) for m in initial_models(recipe, seeds)]
    params, buffers = stack_module_state(models)  # {name: (K, ...)}, leaves with grad
    buffers = {name: b[0] for name, b in buffers.items()}  # fixed tables: one copy
    base = copy.deepcopy(models[0]).to("meta").train()
    for module in base.modules():
        if hasattr(module, "fused"):
            module.fused = False  # the written-out attention, which vmap batches
    loss_and_grads = vmap(
        grad_and_value(lambda p, b, s, t: _loss(base, recipe.label_smoothing, p, b, s, t)),
        in_dims=(0, None, 0, 0),
        randomness="different",
    )
    base_lr, multiplier = schedule_for(recipe)
    optimizer = torch.optim.Adam(
        params.values(), lr=base_lr, betas=(recipe.beta1, recipe.beta2), eps=recipe.eps
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
    generators = [torch.Generator().manual_seed(derive_seed(s, "batches")) for s in seeds]
    torch.manual_seed(derive_seed(min(seeds), f"batched dropout {len(seeds)}"))
    losses = torch.full((recipe.steps, len(seeds)), math.nan, device=device)
    start = time.perf_counter()
    for step in range(recipe.steps):
        batches = [
            random_batch(recipe.batch_size, recipe.min_len, recipe.max_len, g) for g in generators
        ]
        src = torch.stack([b[0] for b in batches]).to(device)  # (K, B, Ls)
        tgt = torch.stack([b[1] for b in batches]).to(device)  # (K, B, Lt + 1)
        # Detached: torch.func differentiates its own inputs; with the leaves themselves the
        # gradients would carry an outer autograd graph that every step would keep alive.
        detached = {name: param.detach() for name, param in params.items()}
        grads, loss = loss_and_grads(detached, buffers, src, tgt)
        clip_per_seed(grads, recipe.grad_clip)
        for name, param in params.items():
            param.grad = grads[name]
        optimizer.step()
        scheduler.step()
        losses[step] = loss.detach()
    seconds = time.perf_counter() - start
    trained = []
    for k, model in enumerate(models):
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(params[name][k])
        timing = {"train_seconds": seconds, "batched_seeds": len(seeds), "device": str(device)}
        trained.append(Trained(model.cpu().eval(), losses[:, k].cpu(), timing))
    return trained
