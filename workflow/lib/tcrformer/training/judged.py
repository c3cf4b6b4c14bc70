"""What the golden check judges of one training run (golden check v3, config/golden/README.md).

A trained value is one draw from a distribution over seeds, so a run is judged by a few
statistics of its whole training, each against a band that a measured ensemble of correct
runs gives it (the bands file; fitted offline by tools/golden.py):

    loss_start    mean training loss over steps 101..300     a slow (or too fast) start
    loss_early    mean training loss over steps 401..600
    loss_late     mean training loss over steps 1,001..3,000
    misses        eval_n - held-out exact: strings the model got wrong
    antidiagonal  the cross-attention anti-diagonal while it writes the CDR3 reversed
                  (only when the CDR3 came back reversed)

Every key is judged on both sides except the misses (upper only: 0 misses is common). This
module only computes the statistics; core/golden.py compares them with their bands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

PREFIX = "curve"  # the keys are <recipe>.curve.<key>
WINDOWS = {  # steps, inclusive
    "loss_start": (101, 300),
    "loss_early": (401, 600),
    "loss_late": (1001, 3000),
}
KEYS = (*WINDOWS, "misses", "antidiagonal")
SIDES = {**dict.fromkeys(WINDOWS, "both"), "misses": "upper", "antidiagonal": "both"}


def window_mean(curve: np.ndarray, window: tuple[int, int]) -> float:
    """The mean of a loss curve (step 1 at index 0) over the steps of `window`."""
    first, last = window
    if len(curve) < last:
        raise ValueError(f"a curve of {len(curve)} steps has no window {first}..{last}")
    return float(np.mean(curve[first - 1 : last]))


def run_statistics(
    curve: np.ndarray, heldout_exact: int, eval_n: int, antidiagonal: float | None
) -> dict[str, float]:
    """The judged numbers of one run: the windows its curve covers, its misses, and the
    anti-diagonal when there is one (None: the CDR3 came back wrong)."""
    found = {key: window_mean(curve, w) for key, w in WINDOWS.items() if len(curve) >= w[1]}
    found["misses"] = float(eval_n - heldout_exact)
    if antidiagonal is not None:
        found["antidiagonal"] = float(antidiagonal)
    return found


def judged_values(prefix: str, statistics: Mapping[str, float]) -> dict[str, float]:
    """The statistics as values.json keys: <prefix>.curve.<key>."""
    return {f"{prefix}.{PREFIX}.{key}": value for key, value in statistics.items()}


def curves_table(losses: pd.DataFrame) -> pd.DataFrame:
    """Every seed's full loss curve, one column a seed (`seed<s>`), one row a step: what an
    ensemble commits, so that any window can be judged later. losses: long, seed/step/loss."""
    wide = losses.pivot(index="step", columns="seed", values="loss").sort_index()
    wide.columns = [f"seed{int(s)}" for s in wide.columns]
    return wide.reset_index()


def statistics_table(
    curves: pd.DataFrame, per_seed: Mapping[int, Mapping[str, Any]], prefix: str, eval_n: int
) -> pd.DataFrame:
    """One row per seed: its judged numbers (KEYS; NaN where it has none)."""
    rows = []
    for seed, values in sorted(per_seed.items()):
        right = bool(values[f"{prefix}.cdr3_correct"])
        antidiagonal = values[f"{prefix}.cross_attention_antidiagonal_mean"] if right else None
        curve = curves[f"seed{seed}"].to_numpy(float)
        found = run_statistics(curve, values[f"{prefix}.heldout_exact"], eval_n, antidiagonal)
        rows.append({"seed": int(seed), **dict.fromkeys(KEYS, np.nan), **found})
    return pd.DataFrame(rows, columns=["seed", *KEYS])
