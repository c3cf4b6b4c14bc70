"""Distributions over an ensemble's seeds, and where a published value falls in them.

The golden bands these distributions give are in bands.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

STATS = ("n", "min", "p5", "median", "p95", "max")
QUANTILES = {"p5": 5.0, "median": 50.0, "p95": 95.0}


def stochastic_keys(values: Mapping[str, Any]) -> list[str]:
    """The keys that vary from seed to seed: the numbers, except the smoothing floor."""
    return sorted(
        k
        for k, v in values.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and "floor" not in k
    )


def seeds_frame(per_seed: Mapping[int, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per seed: seed, then every stochastic key."""
    keys = stochastic_keys(next(iter(per_seed.values())))
    rows = [{"seed": seed, **{k: values[k] for k in keys}} for seed, values in per_seed.items()]
    return pd.DataFrame(rows).sort_values("seed").reset_index(drop=True)


def published_values(
    golden: Mapping[str, Any], prefix: str, cdr3: str, keys: Sequence[str]
) -> dict[str, Any]:
    """The explainer's value of each ensemble key, where it printed one.

    `golden` holds the golden file's values for the chapter (empty when the run's inputs
    differ from the explainer's). cdr3_correct is 1 when the printed output is the reversal.
    """
    published = {k: golden[k] for k in keys if isinstance(golden.get(k), int | float)}
    output = golden.get(f"{prefix}.cdr3_output")
    if f"{prefix}.cdr3_correct" in keys and isinstance(output, str):
        published[f"{prefix}.cdr3_correct"] = int(output == cdr3[::-1])
    return published


def published_losses(table: pd.DataFrame, prefix: str) -> dict[int, float]:
    """{step: published loss} from a summary table's loss_step rows."""
    rows = table[table["key"].str.startswith(f"{prefix}.loss_step") & table["published"].notna()]
    return {
        int(k.rsplit("step", 1)[1]): float(v)
        for k, v in zip(rows["key"], rows["published"], strict=True)
    }


# Distributions --------------------------------------------------------------------------------


def quantiles(sample: Sequence[float]) -> dict[str, float]:
    """n, min, 5th percentile, median, 95th percentile, max (linear interpolation)."""
    x = np.asarray(sample, dtype=float)
    stats = {"n": int(x.size), "min": float(x.min()), "max": float(x.max())}
    stats.update({name: float(np.percentile(x, q)) for name, q in QUANTILES.items()})
    return {name: stats[name] for name in STATS}


def percentile_rank(value: float, sample: Sequence[float]) -> float:
    """The percentile at which `value` falls in `sample`: 100 (below + equal / 2) / n."""
    x = np.asarray(sample, dtype=float)
    below, equal = float((x < value).sum()), float((x == value).sum())
    return 100.0 * (below + equal / 2) / x.size


def placement(value: float, sample: Sequence[float]) -> str:
    """'at percentile 40 of 32 seeds', or 'below all 32 seeds' when outside the range."""
    x = np.asarray(sample, dtype=float)
    if value < x.min():
        return f"below all {x.size} seeds"
    if value > x.max():
        return f"above all {x.size} seeds"
    return f"at percentile {percentile_rank(value, x):.0f} of {x.size} seeds"


def summary_table(seeds: pd.DataFrame, published: Mapping[str, Any]) -> pd.DataFrame:
    """Per key: the distribution over seeds, the published value and where it falls."""
    rows = []
    for key in [c for c in seeds.columns if c != "seed"]:
        sample = seeds[key].to_numpy(dtype=float)
        row: dict[str, Any] = {"key": key, **quantiles(sample)}
        value = published.get(key)
        row["published"] = value
        row["published_percentile"] = None if value is None else percentile_rank(value, sample)
        row["published_placement"] = "" if value is None else placement(value, sample)
        rows.append(row)
    return pd.DataFrame(rows)


def loss_bands(losses: pd.DataFrame) -> pd.DataFrame:
    """Per training step, the loss over seeds: min, p5, median, p95, max.

    losses: long format, columns seed, step, loss.
    """
    wide = losses.pivot(index="step", columns="seed", values="loss").sort_index()
    frame = pd.DataFrame({"step": wide.index.to_numpy()})
    frame["min"], frame["max"] = wide.min(axis=1).to_numpy(), wide.max(axis=1).to_numpy()
    for name, q in QUANTILES.items():
        frame[name] = np.percentile(wide.to_numpy(), q, axis=1)
    return frame[["step", "min", "p5", "median", "p95", "max"]]


def summary_markdown(table: pd.DataFrame, title: str) -> str:
    """The summary as a Markdown table, one row per key."""
    lines = [
        f"# {title}",
        "",
        "| key | n | min | p5 | median | p95 | max | published | where it falls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        published = "—" if pd.isna(row.published) else f"{row.published:g}"
        cells = [f"{getattr(row, s):.4g}" for s in STATS[1:]]
        lines.append(
            f"| `{row.key}` | {row.n} | {' | '.join(cells)} | {published} "
            f"| {row.published_placement or '—'} |"
        )
    return "\n".join(lines) + "\n"
