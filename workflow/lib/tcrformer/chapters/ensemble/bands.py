"""Golden bands of the trained values, with a stated false-alarm rate.

A trained value is one draw from a distribution over seeds. Its band must let a correct run
of the seed's recipe pass with a known probability, so the band is a prediction interval,
not the range of what we happened to see:

1. **The budget.** A fresh draw of a correct pipeline may FAIL at least one trained key
   with probability at most `budget` (the golden file's `error_budget`, family-wise). It is
   split equally over the K trained keys (Bonferroni): each key's band misses a correct
   draw with probability at most alpha = budget / K.
2. **A scale per key**, on which the seeds' spread is modelled as normal:
       a loss          y = log(loss - floor)      floor: the label-smoothing floor, below
                                                  which no loss can go; losses are skewed
       held-out exact  y = log(misses + 1/2)      misses = eval_n - exact, a bounded count
       anti-diagonal   y = logit(a)               a mean attention weight, inside (0, 1)
3. **The interval.** With n seeds of mean m and standard deviation s on that scale, a new
   draw lies in  m -+ t_{n-1}(1 - alpha/2) s sqrt(1 + 1/n)  with probability 1 - alpha when
   the scale is normal (Student's prediction interval: the uncertainty of m and s is in the
   t quantile and the sqrt(1 + 1/n)). It is mapped back to the key's own units.
4. **Keys the budget cannot judge.** The decoded CDR3 is right or wrong. A wrong CDR3 can be
   a FAIL only if the ensemble shows its rate to be below alpha, at 95 % confidence
   (Clopper-Pearson); 32 seeds can never show a rate below 1/800, so a wrong CDR3 is
   reported, not failed. The anti-diagonal is measured on the CDR3's own decoding, so a
   wrong CDR3 drags it down (seed 25 of the first ensemble: 0.60 against a median of 0.95).
   Its band is fitted on the seeds whose CDR3 came back right, and it is judged only when
   the run's CDR3 is right.

The normality of each scale is an assumption; the Shapiro-Wilk p-value of each fit is
recorded beside it, and the false-alarm rate is checked where it matters, on seeds the band
was not built from (`validate`, tests/test_golden_bands.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

CDR3_CORRECT, CDR3_OUTPUT = "cdr3_correct", "cdr3_output"
ANTIDIAGONAL = "cross_attention_antidiagonal_mean"
HELDOUT = "heldout_exact"
CONFIDENCE = 0.95  # of the upper bound on a right-or-wrong key's failure rate
MIN_SEEDS = 3  # fewer seeds give no band: the key is shown, not judged


@dataclass(frozen=True)
class Scale:
    """Where a key's spread over seeds is modelled as normal: y = forward(x)."""

    kind: str  # log_excess | log_misses | logit
    offset: float = 0.0  # log_excess: the floor; log_misses: the number of strings

    def forward(self, x: np.ndarray) -> np.ndarray:
        """On the real line. Values come rounded (losses to 6 digits, attention to 4), so
        an excess loss is kept above 1e-7 and a weight inside [5e-5, 1 - 5e-5]."""
        x = np.asarray(x, dtype=float)
        if self.kind == "log_excess":
            return np.log(np.maximum(x - self.offset, 1e-7))
        if self.kind == "log_misses":
            return np.log(self.offset - x + 0.5)
        x = np.clip(x, 5e-5, 1 - 5e-5)
        return np.log(x / (1 - x))  # logit

    def to_value(self, y: float) -> float:
        if self.kind == "log_excess":
            return self.offset + math.exp(y)
        if self.kind == "log_misses":
            return self.offset + 0.5 - math.exp(y)
        return 1 / (1 + math.exp(-y))

    def band(self, low_y: float, high_y: float) -> tuple[float, float]:
        """[low, high] in the key's own units (log_misses turns the order around)."""
        a, b = self.to_value(low_y), self.to_value(high_y)
        low, high = min(a, b), max(a, b)
        if self.kind == "log_misses":
            low, high = max(low, 0.0), min(high, self.offset)
        return low, high

    def __str__(self) -> str:
        if self.kind == "log_excess":
            return f"log(x - {self.offset:.6g})"
        if self.kind == "log_misses":
            return f"log({self.offset:g} - x + 0.5)"
        return "logit(x)"


def scale_of(key: str, floor: float, eval_n: int) -> Scale:
    """The scale of a trained key, by what it is; a key with none is an error to fix here."""
    name = key.split(".", 1)[1]
    if name.startswith("loss_step"):
        return Scale("log_excess", floor)
    if name == HELDOUT:
        return Scale("log_misses", float(eval_n))
    if name == ANTIDIAGONAL:
        return Scale("logit")
    raise ValueError(f"{key}: no scale is defined for this trained key (ensemble/bands.py)")


def prediction_interval(y: np.ndarray, alpha: float) -> tuple[float, float]:
    """Student's two-sided prediction interval for one more draw of a normal sample y."""
    n = len(y)
    half = stats.t.ppf(1 - alpha / 2, df=n - 1) * np.std(y, ddof=1) * math.sqrt(1 + 1 / n)
    return float(np.mean(y) - half), float(np.mean(y) + half)


def failure_rate_upper(failures: int, n: int, confidence: float = CONFIDENCE) -> float:
    """Clopper-Pearson upper bound on the rate of a right-or-wrong outcome."""
    return float(stats.binomtest(failures, n).proportion_ci(confidence, method="exact").high)


def trained_keys(columns) -> list[str]:
    """The keys the golden file judges by a band: every column but the seed."""
    return [c for c in columns if c != "seed"]


def fit_bands(
    seeds: pd.DataFrame, prefix: str, budget: float, floor: float, eval_n: int
) -> dict[str, dict[str, Any]]:
    """{golden key: band} from an ensemble (one row per seed), for a family-wise budget."""
    keys = trained_keys(seeds.columns)
    alpha = budget / len(keys)
    right = seeds[f"{prefix}.{CDR3_CORRECT}"] == 1 if f"{prefix}.{CDR3_CORRECT}" in seeds else None
    bands = {}
    for key in keys:
        if key == f"{prefix}.{CDR3_CORRECT}":
            bands[f"{prefix}.{CDR3_OUTPUT}"] = _outcome_band(seeds[key].to_numpy(), alpha)
            continue
        sample = seeds[key]
        given = None
        if key == f"{prefix}.{ANTIDIAGONAL}" and right is not None:
            sample, given = sample[right], f"{prefix}.{CDR3_OUTPUT}"
        bands[key] = _band(sample.to_numpy(dtype=float), scale_of(key, floor, eval_n), alpha)
        if given:
            bands[key]["given"] = given
    return bands


def _band(x: np.ndarray, scale: Scale, alpha: float) -> dict[str, Any]:
    if len(x) < MIN_SEEDS:
        return {"n": int(len(x)), "judged": False, "scale": str(scale), "false_alarm": 0.0}
    y = scale.forward(x)
    low_y, high_y = prediction_interval(y, alpha)
    low, high = scale.band(low_y, high_y)
    return {
        "low": round(low, 6),
        "high": round(high, 6),
        "n": int(len(x)),
        "scale": str(scale),
        "false_alarm": alpha,
        "mean_on_scale": float(np.mean(y)),
        "sd_on_scale": float(np.std(y, ddof=1)),
        "shapiro_p": float(stats.shapiro(y).pvalue),
    }


def _outcome_band(correct: np.ndarray, alpha: float) -> dict[str, Any]:
    n, wrong = len(correct), int((np.asarray(correct) == 0).sum())
    upper = failure_rate_upper(wrong, n)
    return {
        "outcome": "right or wrong",
        "n": n,
        "wrong": wrong,
        "wrong_rate_upper": upper,
        "false_alarm": alpha,
        "judged": upper <= alpha,
    }


def method(budget: float, keys: int, n: int) -> dict[str, Any]:
    """What the bands file says about how its bands were made."""
    return {
        "budget": budget,
        "keys": keys,
        "per_key": budget / keys,
        "interval": (
            f"Student prediction interval for one new seed, from {n} seeds, on each key's "
            "scale (log excess loss, log misses, logit), two-sided at the per-key rate "
            "(Bonferroni); a right-or-wrong key is judged only if its rate is shown below it"
        ),
    }


def values_of(row: Mapping[str, Any], prefix: str, published_cdr3: str) -> dict[str, Any]:
    """One ensemble row as the values.json of that seed's run (what the golden check reads)."""
    values = {k: v for k, v in row.items() if k != "seed"}
    correct = values.pop(f"{prefix}.{CDR3_CORRECT}", None)
    if correct is not None:
        values[f"{prefix}.{CDR3_OUTPUT}"] = published_cdr3 if correct == 1 else "(wrong)"
    return values
