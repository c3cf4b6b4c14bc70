"""What the claims figures draw, written by claims_summary (one JSON file)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.io import read_json

FILES = {"figure_data": "figure_data.json"}


@dataclass(frozen=True)
class ClaimsFigures:
    reduced: bool
    seeds: dict[str, int]  # arm -> the seeds it ran (Settings.seeds_of), arms that trained
    eval_n: int
    verdicts: dict[str, str]  # claim id -> verdict
    claim_arms: dict[str, list[str]]  # experiment id -> the training arms it compares
    # per experiment: id, estimate, low, high, margin, direction, seeds ([used, run] or None)
    effects: list[dict[str, Any]]
    loss_curves: dict[str, dict[str, list]]  # arm -> {step, median}: the median over seeds
    grad_norm_curves: dict[str, dict[str, list]]
    calibration: dict[str, list[list[float]]]  # arm -> bins [count, confidence, accuracy]
    top1_agreement: dict[str, list[float | None]]  # arm -> per seed, top-1 agreement
    residue_rho: dict[
        str, list[float | None]
    ]  # arm -> per seed, the residue-level rank correlation
    greedy_by_step: dict[str, list[dict[str, float]]]  # arm -> per seed, {step: greedy exact}
    beam_step: dict[str, list[float | None]]  # arm -> per seed, the step beam was judged at
    greedy_room: list[float]  # metrics.GREEDY_ROOM: the greedy exact with room for beam
    beam: dict[str, dict[str, float]]  # arm -> beam wins, ties, losses, net wins (medians)
    analytic: dict[str, Any]
    cost: dict[str, Any]  # the claim, exponents, rows (length, seconds, allocated_bytes, ...)
    speed: dict[str, Any]  # the claim, steps per second of each recipe and block

    def title(self, text: str, claim: str) -> str:
        """A panel title with the claim's verdict (and the reduced-run mark)."""
        mark = " (reduced run: not a verdict)" if self.reduced else ""
        return f"{text}\n{self.verdicts.get(claim, '?')}{mark}"

    def seed_range(self, arms=None) -> str:
        """'12-48 seeds' (or '12 seeds'): how many the arms (default: all) ran."""
        counts = [n for arm, n in self.seeds.items() if arms is None or arm in arms]
        if not counts:
            return "no seeds"
        low, high = min(counts), max(counts)
        return f"{low} seeds" if low == high else f"{low}-{high} seeds"


def read(paths: Mapping[str, str]) -> ClaimsFigures:
    return ClaimsFigures(**read_json(paths["figure_data"]))
