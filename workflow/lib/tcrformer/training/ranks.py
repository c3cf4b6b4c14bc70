"""The processes of ranks 1..R-1 of a data-parallel training (training.parallel), and the
folder where all the ranks meet. No torch here: a rule script starts them right after
pinning the numerics, before it imports torch itself, so the ranks' imports of torch (the
largest part of a short training's start, seconds on a small machine) run side by side
instead of one after the other.

    workers = Workers.start(recipe, ranks, threads, checkpoint_dir)   # before `import torch`
    ...                                                               # rank 0's own imports
    train(recipe, checkpoint_dir, ranks, workers)                     # rank 0 joins them
    workers.close()                                                   # always: see close

Each rank is `python -m tcrformer.training.worker`, never a copy of the caller's script,
with the caller's environment (so the portable pins of core.numerics hold in each), the
caller's matrix products (core.blas: the portable kernels, or torch's) and this tcrformer
first on its path. The ranks meet through a file store in the folder (no port to
pick).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tcrformer.core.numerics import products_in_force


@dataclass
class Workers:
    """Ranks 1..R-1, running; `store` is where rank 0 joins them."""

    ranks: int
    fingerprint: str  # the recipe's (Recipe.fingerprint): rank 0 must train the same one
    folder: tempfile.TemporaryDirectory
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def store(self) -> Path:
        return Path(self.folder.name) / "store"

    @classmethod
    def start(cls, recipe, ranks: int, threads: int, checkpoint_dir=None) -> Workers:
        """Start ranks 1..ranks-1 training `recipe` with `threads` threads each."""
        folder = tempfile.TemporaryDirectory(prefix="tcrformer-ranks-")
        workers = cls(ranks, recipe.fingerprint(), folder)
        recipe_file = Path(workers.folder.name) / "recipe.json"
        recipe_file.write_text(json.dumps(recipe.params()), encoding="utf-8")
        command = [sys.executable, "-m", "tcrformer.training.worker", "--ranks", str(ranks),
                   "--recipe", str(recipe_file), "--store", str(workers.store),
                   "--threads", str(threads), "--products", products_in_force()]  # fmt: skip
        if checkpoint_dir is not None:
            command += ["--checkpoints", str(checkpoint_dir)]
        lib = str(Path(__file__).resolve().parents[2])  # this tcrformer, ahead of any other
        path = os.pathsep.join([lib, *filter(None, [os.environ.get("PYTHONPATH")])])
        env = {**os.environ, "PYTHONPATH": path}
        workers.processes = [subprocess.Popen([*command, "--rank", str(r)], env=env)
                             for r in range(1, ranks)]  # fmt: skip
        return workers

    def close(self, timeout: float = 120) -> list[int]:
        """Wait for every rank (killing one that is still running after `timeout` seconds,
        or at once with timeout 0: rank 0 failed before they could finish), remove the
        folder, and return the exit codes that were not 0. Safe to call twice."""
        for process in self.processes:
            try:
                process.wait(timeout=timeout) if timeout > 0 else process.kill()
            except subprocess.TimeoutExpired:
                process.kill()
            process.wait()
        self.folder.cleanup()
        return [p.returncode for p in self.processes if p.returncode != 0]
