"""Where ESM-2's weight files live, worked out without importing torch (the Snakefile uses it).

fair-esm keeps a model as two files: `<model>.pt` and `<model>-contact-regression.pt`
beside it. Without a configured checkpoint they sit in the torch hub cache,
`$TORCH_HOME/hub/checkpoints/` (TORCH_HOME defaults to `$XDG_CACHE_HOME/torch`, that is
`~/.cache/torch`), as `torch.hub.get_dir()` says.
"""

from __future__ import annotations

import os
from pathlib import Path

from tcrformer.chapters.plm.settings import Esm2Options, regression_path

__all__ = ["esm2_checkpoint", "hub_dir", "regression_path", "weight_files"]


def hub_dir() -> Path:
    """torch.hub.get_dir(), without torch (ignores a torch.hub.set_dir() in this process)."""
    cache = os.environ.get("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    torch_home = os.environ.get("TORCH_HOME", os.path.join(cache, "torch"))
    return Path(os.path.expanduser(torch_home)) / "hub"


def esm2_checkpoint(options: Esm2Options) -> Path:
    """The configured checkpoint, or the model's file in the torch hub cache."""
    if options.checkpoint:
        return Path(options.checkpoint)
    return hub_dir() / "checkpoints" / f"{options.model}.pt"


def weight_files(options: Esm2Options) -> list[str]:
    """The weight files that exist now: a rule input, so new weights make the rule rerun."""
    checkpoint = esm2_checkpoint(options)
    return [str(p) for p in (checkpoint, regression_path(checkpoint)) if p.is_file()]
