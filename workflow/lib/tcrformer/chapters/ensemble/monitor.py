"""A curve monitor: flags a broken training while it runs, against a fitting ensemble.

Every BLOCK steps the monitor takes the mean loss of the block just finished and compares
it with what the fitting ensemble's seeds had over the same steps. On each block's scale
(log(mean - floor) for blocks that end by step LOG_UNTIL, where early losses are skewed;
the raw mean after, as golden check v2's windows) the n seeds give a mean m_b and an sd
s_b, and a new correct run's block lies above

    limit_b = m_b + t_{n-1}(1 - alpha / B) * s_b * sqrt(1 + 1/n)

with probability alpha / B exactly, if the block's values are normal (the predictive t:
the uncertainty of m_b and s_b included). A block mean below the label-smoothing floor is
out of reach of any correct run and is flagged whatever the ensemble says.

Anytime-valid: the B looks split the budget alpha (Bonferroni), so the chance that a correct
run is flagged at any look, at whichever look one stops, is at most alpha, however the
blocks of one run are correlated (they are: a seed that starts slow stays slow for a while).
The monitor is one-sided, like the bands: a broken run trains worse, or below the floor.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

BLOCK = 100  # steps per look
LOG_UNTIL = 1000  # blocks ending at or before this step are judged on log(mean - floor)

LOG = logging.getLogger("tcrformer.monitor")


def block_means(curve: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """(steps,) -> (steps // block,): the mean of each whole block; step 1 at index 0."""
    blocks = len(curve) // block
    return np.asarray(curve[: blocks * block], float).reshape(blocks, block).mean(axis=1)


def on_scale(means: np.ndarray, ends: np.ndarray, floor: float) -> np.ndarray:
    """Each block's mean on its scale; a log block at or below the floor: +inf (flagged)."""
    means, ends = np.asarray(means, float), np.asarray(ends)
    excess = means - floor
    logged = np.where(excess > 0, np.log(np.where(excess > 0, excess, 1.0)), np.inf)
    return np.where(ends <= LOG_UNTIL, logged, means)


@dataclass(frozen=True)
class Reference:
    """The limits of every block, fitted from an ensemble's curves."""

    block: int
    ends: tuple[int, ...]  # the step each block ends at
    limits: tuple[float, ...]  # on each block's scale
    floor: float
    alpha: float  # the monitor's family-wise budget
    n: int  # fitting seeds

    @classmethod
    def fit(cls, curves: np.ndarray, budget: float, floor: float, block: int = BLOCK):
        """curves: (n seeds, steps), each a correct run's loss at every step."""
        means = np.stack([block_means(c, block) for c in np.asarray(curves, float)])
        n, looks = means.shape
        ends = np.arange(1, looks + 1) * block
        y = on_scale(means, ends, floor)  # (n, looks)
        t = stats.t.ppf(1 - budget / looks, df=n - 1)
        limits = y.mean(0) + t * y.std(0, ddof=1) * math.sqrt(1 + 1 / n)
        return cls(block, tuple(int(e) for e in ends), tuple(float(x) for x in limits),
                   float(floor), float(budget), int(n))  # fmt: skip

    def record(self) -> dict[str, Any]:
        return {"block": self.block, "log_until": LOG_UNTIL, "floor": self.floor,
                "alpha": self.alpha, "n": self.n, "ends": list(self.ends),
                "limits": list(self.limits)}  # fmt: skip

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Reference:
        return cls(record["block"], tuple(record["ends"]), tuple(record["limits"]),
                   record["floor"], record["alpha"], record["n"])  # fmt: skip


def first_flag(reference: Reference, curve: np.ndarray) -> int | None:
    """The step at which the monitor would flag this curve, or None: a replay."""
    means = block_means(curve, reference.block)[: len(reference.ends)]
    ends = np.asarray(reference.ends[: len(means)])
    over = on_scale(means, ends, reference.floor) > np.asarray(reference.limits[: len(means)])
    below = means < reference.floor
    flagged = np.flatnonzero(over | below)
    return int(ends[flagged[0]]) if len(flagged) else None


class CurveMonitor:
    """Live: `observe(step, loss)` after every step; one log line per block, and a warning
    the first time a block is out of reach of a correct run."""

    def __init__(self, reference: Reference, log: logging.Logger = LOG):
        self.reference, self.log = reference, log
        self.limits = dict(zip(reference.ends, reference.limits, strict=True))
        self.total, self.count, self.flagged_at = 0.0, 0, None

    def observe(self, step: int, loss) -> None:
        self.total += loss  # a tensor stays on its device until the block ends
        self.count += 1
        if step % self.reference.block or step not in self.limits:
            return
        mean, whole = float(self.total) / self.count, self.count == self.reference.block
        self.total, self.count = 0.0, 0
        if not whole:  # resumed from a checkpoint within this block: not judged
            return
        y = on_scale(np.array([mean]), np.array([step]), self.reference.floor)[0]
        limit = self.limits[step]
        out = mean < self.reference.floor or y > limit
        first = step - self.reference.block + 1
        shown = self.reference.floor + math.exp(limit) if step <= LOG_UNTIL else limit
        self.log.info("monitor: steps %d-%d mean loss %.4f, limit %.4f: %s",
                      first, step, mean, shown, "OUT" if out else "ok")  # fmt: skip
        if out and self.flagged_at is None:
            self.flagged_at = step
            self.log.warning(
                "monitor: this training is out of reach of a correct run at step %d "
                "(family-wise false-alarm rate %.3g over %d looks, %d fitting seeds)",
                step, self.reference.alpha, len(self.limits), self.reference.n,
            )  # fmt: skip


def recipe_key(recipe) -> str:
    """The recipe's fingerprint with the seed set aside: what a reference was fitted for."""
    from tcrformer.training.recipe import with_overrides

    return with_overrides(recipe, seed=0).fingerprint()


def attach(bands_file: str | Path | None, recipe) -> tuple[CurveMonitor | None, str]:
    """A monitor for this training from golden check v2's bands file, or None and why not
    (no file, or a reference fitted for another recipe)."""
    import yaml

    if bands_file is None:
        return None, "monitor: off (golden.monitor is false, or the golden file names no bands_v2)"
    path = Path(bands_file)
    if not path.is_file():
        return None, f"monitor: off (no reference: {path} is not there yet)"
    record = yaml.safe_load(path.read_text(encoding="utf-8")).get("monitor")
    if not record or record.get("recipe") != recipe_key(recipe):
        return None, f"monitor: off ({path} was fitted for another recipe)"
    reference = Reference.from_record(record)
    return CurveMonitor(reference), (
        f"monitor: on, {len(reference.ends)} looks every {reference.block} steps against "
        f"{reference.n} seeds of {path}, family-wise false-alarm rate {reference.alpha:.3g}"
    )
