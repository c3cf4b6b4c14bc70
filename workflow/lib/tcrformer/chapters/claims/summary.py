"""The claims table, its Markdown, and what the claims figures draw (no torch here)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

KIND_TITLES = {
    "experiment": "Experiments (seed-based; one Holm family)",
    "analytic": "Analytic (no training)",
    "check": "Checks (true by construction)",
    "benchmark": "Benchmarks (this machine)",
}
CHANGED = "CHANGED after registration"


def registration_mark(claim, registration: Mapping[str, Any], recipes) -> str:
    """Whether a claim, and the arms it reads, are what was registered before training."""
    registered = (registration or {}).get("claims", {})
    if claim.id not in registered:
        return "not registered"
    return "as registered" if registered[claim.id] == claim.digest(recipes) else CHANGED


def table_rows(settings, decisions, registration) -> list[dict[str, Any]]:
    rows = []
    for claim in settings.claims:
        decision = decisions[claim.id]
        found = decision.effect
        rows.append({
            "id": claim.id,
            "kind": claim.kind,
            "claim": claim.claim,
            "source": claim.source,
            "criterion": claim.criterion,
            "effect": found.name if found else "",
            "estimate": found.estimate if found else math.nan,
            "ci_low": found.low if found else math.nan,
            "ci_high": found.high if found else math.nan,
            "margin": found.margin if found else math.nan,
            "direction": found.direction if found else "",
            "p_value": found.p_value if found else math.nan,
            "holm": decision.adjusted,
            "measured": decision.measured,
            "verdict": decision.verdict,
            "registered": registration_mark(claim, registration, settings.arms),
        })  # fmt: skip
    return rows


def _number(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def claims_markdown(
    table: pd.DataFrame, settings, registration: Mapping[str, Any], sweeps: Mapping[str, Any]
) -> str:
    seeds = len(settings.seeds)
    lines = [
        "# Claims: what the seeds say, tested",
        "",
        f"Each training arm ran {seeds} seeds. Every criterion was registered "
        f"(`registration.json`, claims file sha256 "
        f"`{(registration or {}).get('claims_file_sha256', '?')[:12]}…`) before the first arm "
        f"trained, and is evaluated by code. Experiments: 95 % percentile bootstrap intervals "
        f"over seeds, one-sided tests against each margin, Holm-corrected at "
        f"alpha {settings.alpha:g} over the {int((table['kind'] == 'experiment').sum())} "
        "experiments.",
        "",
    ]
    if settings.reduced:
        lines += ["**Reduced run: not a verdict.** Fewer seeds and steps than the claims need.", ""]
    changed = table[table["registered"] == CHANGED]
    if len(changed):
        lines += [f"**Changed after registration:** {', '.join(changed['id'])}.", ""]
    counts = ", ".join(
        f"{kind}: " + ", ".join(f"{n} {v}" for v, n in group["verdict"].value_counts().items())
        for kind, group in table.groupby("kind", sort=False)
    )
    lines += [f"Verdicts by kind: {counts}.", ""]
    for kind, title in KIND_TITLES.items():
        rows = table[table["kind"] == kind]
        if not len(rows):
            continue
        lines += [f"## {title}", "", "| id | claim | effect | 95 % CI | margin | p | verdict |",
                  "|---" * 7 + "|"]  # fmt: skip
        for r in rows.itertuples(index=False):
            interval = "—" if math.isnan(r.ci_low) else f"{r.ci_low:.3g} to {r.ci_high:.3g}"
            margin = "—" if math.isnan(r.margin) else f"{r.direction} {r.margin:g}"
            mark = "" if r.registered == "as registered" else f" ({r.registered})"
            cells = [f"`{r.id}`", r.claim, _number(r.estimate), interval, margin,
                     _number(r.p_value), f"**{r.verdict}**{mark}"]  # fmt: skip
            lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
        lines += ["", "Measured:", ""]
        lines += [f"- `{r.id}`: {r.measured}" for r in rows.itertuples(index=False)]
        lines.append("")
    for choice in (sweeps or {}).values():
        lines.append(
            f"Sweep `{choice['sweep']}`: {choice['key']} = {choice['value']:g} for arm "
            f"`{choice['arm']}` (candidate `{choice['chosen']}`, best median "
            f"{choice['validation']['metric']} on the validation strings over seeds "
            f"{choice['seeds']}: "
            + ", ".join(f"{a} {m:.4g}" for a, m in choice["validation"]["median"].items())
            + ")."
        )
    return "\n".join(lines).rstrip() + "\n"


# Figures ----------------------------------------------------------------------------------------


def _median_curve(frames: Sequence[pd.DataFrame], column: str, every: int) -> dict[str, list]:
    stacked = np.stack([f[column].to_numpy() for f in frames])  # (seeds, steps)
    steps = frames[0]["step"].to_numpy()
    keep = (steps % every == 0) | (steps == 1)
    median = np.nanmedian(np.where(np.isfinite(stacked), stacked, np.nan), 0)[keep]
    return {"step": steps[keep].tolist(), "median": [None if np.isnan(v) else float(v)
                                                     for v in median]}  # fmt: skip


def pooled_bins(seeds: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """The calibration bins of all seeds together: [count, mean confidence, accuracy]."""
    bins = np.array([[[np.nan if v is None else v for v in b] for b in s["calibration_bins"]]
                     for s in seeds], float)  # (S, b, 3)  # fmt: skip
    bins = np.nan_to_num(bins)
    count = bins[..., 0].sum(0)
    weighted = (bins[..., 1:] * bins[..., :1]).sum(0) / np.maximum(count, 1)[:, None]
    return np.column_stack([count, weighted]).tolist()


def figure_data(settings, metrics, histories, analytic_results, cost, cost_table, speed, table):
    every = 10
    experiments = [c for c in settings.claims if c.kind == "experiment"]
    rows = table.set_index("id")

    def arms_of(metric: str) -> list[str]:
        return [a for a in settings.arms_needing(metric) if a in metrics]

    return {
        "reduced": settings.reduced,
        "seeds": len(settings.seeds),
        "eval_n": settings.eval_n,
        "verdicts": dict(zip(table["id"], table["verdict"], strict=True)),
        "claim_arms": {c.id: [a for a in c.arms() if a in histories] for c in experiments},
        "effects": [
            {
                "id": c.id,
                "estimate": None
                if math.isnan(rows.loc[c.id, "estimate"])
                else float(rows.loc[c.id, "estimate"]),
                "low": None
                if math.isnan(rows.loc[c.id, "ci_low"])
                else float(rows.loc[c.id, "ci_low"]),
                "high": None
                if math.isnan(rows.loc[c.id, "ci_high"])
                else float(rows.loc[c.id, "ci_high"]),
                "margin": float(c.test["margin"]),
                "direction": c.test["direction"],
            }
            for c in experiments
        ],  # fmt: skip
        "loss_curves": {arm: _median_curve(h, "loss", every) for arm, h in histories.items()},
        "grad_norm_curves": {
            arm: _median_curve(histories[arm], "grad_norm", every) for arm in arms_of("worst_jump")
        },
        "calibration": {arm: pooled_bins(metrics[arm]) for arm in arms_of("overconfidence")},
        "heads": [
            {**h, "seed": seed}
            for arm in arms_of("importance_rho")
            for seed, s in zip(settings.seeds_of(arm), metrics[arm], strict=True)
            for h in s.get("heads", [])
        ],  # fmt: skip
        "exact_by_length": {
            arm: {
                str(n): float(np.median([s["exact_by_length"][n] for s in metrics[arm]]))
                for n in metrics[arm][0]["exact_by_length"]
            }
            for arm in arms_of("forgetting")
        },  # fmt: skip
        "beam": {
            arm: {
                k: float(np.median([s[k] for s in metrics[arm]]))
                for k in ("beam_wins", "beam_ties", "beam_losses", "beam_net_wins")
            }
            for arm in arms_of("beam_net_wins")
        },  # fmt: skip
        "analytic": dict(analytic_results),
        "cost": {**cost, "rows": cost_table.to_dict(orient="records")},
        "speed": dict(speed),
    }
