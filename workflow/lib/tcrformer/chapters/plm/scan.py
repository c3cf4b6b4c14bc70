"""Hide every CDR3 position in turn: how well each model guesses germline vs junctional residues.

The explainer's claim, "biology, not failure", says a model should be sure of the residues the V
and J genes write and unsure of the ones recombination makes at random. The scan turns it
into one number per model: the mean p(true residue) over germline-encoded positions minus
the mean over junctional ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tcrformer.chapters.plm.guess import Guess
from tcrformer.chapters.plm.segments import is_germline
from tcrformer.chapters.plm.settings import TOP_K

COLUMNS = ["model", "position", "true_residue", "segment", "p_true", "rank_true", f"top{TOP_K}"]


def all_positions(cdr3: str) -> tuple[int, ...]:
    return tuple(range(1, len(cdr3) + 1))


def table(guesses: Sequence[Guess], segments: Sequence[str]) -> pd.DataFrame:
    """One row per model and position; `top4` is the four best guesses, best first."""
    rows = [
        {
            "model": g.model,
            "position": g.position,
            "true_residue": g.true_residue,
            "segment": segments[g.position - 1],
            "p_true": g.p_true,
            "rank_true": g.rank_true,
            f"top{TOP_K}": " ".join(g.top()),
        }
        for g in guesses
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def _mean(values: pd.Series) -> float | None:
    return float(values.mean()) if len(values) else None


def model_summary(rows: pd.DataFrame) -> dict[str, float | int]:
    """Mean p(true) over germline and junctional positions of one model's rows."""
    germline = rows["segment"].map(is_germline)
    summary = {
        "mean_p_true_germline": _mean(rows.loc[germline, "p_true"]),
        "mean_p_true_junctional": _mean(rows.loc[~germline, "p_true"]),
        "n_germline": int(germline.sum()),
        "n_junctional": int((~germline).sum()),
    }
    if summary["n_germline"] and summary["n_junctional"]:
        difference = summary["mean_p_true_germline"] - summary["mean_p_true_junctional"]
        summary["germline_minus_junctional"] = difference
    return {k: v for k, v in summary.items() if v is not None}


def scan_summary(scan: pd.DataFrame) -> dict[str, dict]:
    """{model: its summary}, models in the order they appear in the table."""
    return {model: model_summary(rows) for model, rows in scan.groupby("model", sort=False)}
