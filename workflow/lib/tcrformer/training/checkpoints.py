"""Checkpoints: a run killed at any step resumes from its last one and replays exactly the
steps it lost (weights, optimizer, schedule, and every random generator are saved).

One file per recipe fingerprint, so a changed recipe starts afresh and never mixes runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tcrformer.core.io import ResultFileError, atomic_path
from tcrformer.training.recipe import Recipe

CHECKPOINT_FORMAT = 3  # 3: the hand-written step's Adam state; no ranks
# `run` below is a training.loop.Run: what it holds is its state() and restore().


def checkpoint_path(directory: str | Path, recipe: Recipe) -> Path:
    """One file per recipe fingerprint: a changed recipe starts afresh, never mixes runs."""
    return Path(directory) / recipe.fingerprint() / "last.pt"


def save_checkpoint(path: Path, run: Any) -> None:
    """torch.save of tensors and plain containers, renamed into place when complete."""
    state = run.state()
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path, run: Any) -> None:
    """Resume `run` from `path`; a corrupt or foreign file is an error naming the file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # unpickling errors come in many types
        raise ResultFileError(f"{path}: corrupt checkpoint ({err}); delete it to restart") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ResultFileError(f"{path}: not a reversal checkpoint (format {CHECKPOINT_FORMAT})")
    if state.get("fingerprint") != run.recipe.fingerprint():
        raise ResultFileError(f"{path}: checkpoint of a different recipe; delete it to restart")
    if "cuda" in state["rng"] and run.device.type != "cuda":
        raise ResultFileError(f"{path}: checkpoint written on a GPU, resumed on {run.device}")
    try:
        run.restore(state)
    except (KeyError, RuntimeError, ValueError) as err:
        raise ResultFileError(f"{path}: checkpoint does not fit the model ({err})") from None


def snapshot_path(directory: str | Path, recipe: Recipe, step: int) -> Path:
    """The weights after `step` (Recipe.snapshot_steps), beside the run's checkpoint: a
    resumed run keeps the snapshots it had written."""
    return Path(directory) / recipe.fingerprint() / f"step{step}.safetensors"


def discard_checkpoints(checkpoint_dir: str | Path, recipe: Recipe) -> None:
    """After a finished run its checkpoint has served; remove it (and its folder if empty)."""
    path = checkpoint_path(checkpoint_dir, recipe)
    path.unlink(missing_ok=True)
    for folder in (path.parent, path.parent.parent):
        if folder.exists() and not any(folder.iterdir()):
            folder.rmdir()
