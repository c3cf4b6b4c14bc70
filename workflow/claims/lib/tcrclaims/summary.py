"""The claims table, its Markdown, and what the claims figures draw (no torch here)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcrclaims.metrics import GREEDY_ROOM

KIND_TITLES = {
    "experiment": "Experiments (paired over seeds; one Holm family of those testable here)",
    "analytic": "Analytic (no training)",
    "check": "Checks (identities, Monte-Carlo quantities and bounds every seed of a trained arm "
    "must meet: HOLDS or FAILS, counted apart)",
    "benchmark": "Benchmarks (this machine)",
}
CHANGED = "CHANGED after registration"
CODE_CHANGED = "decision code CHANGED after registration"


UNCHECKED_CODE = (
    "**Decision code not checked:** this registration fixed the code in another form than "
    "the file digest (`decision_code`, not `decision_code_sha256`), which this checkout "
    "cannot verify; no row is marked for code."
)


def registration_mark(claim, registration: Mapping[str, Any], recipes, code=None,
                      context=None) -> str:  # fmt: skip
    """Whether a claim, the arms it reads and the code that decides it are what was
    registered before training (`code`: this checkout's compute.decision_code_sha256). A
    registration without that digest is checked on the claim alone (code_checked)."""
    registered = (registration or {}).get("claims", {})
    if claim.id not in registered:
        return "not registered"
    if registered[claim.id] != claim.digest(recipes, context):
        return CHANGED
    frozen = (registration or {}).get("decision_code_sha256")
    if code is not None and frozen is not None and frozen != code:
        return CODE_CHANGED
    return "as registered"


def code_checked(registration: Mapping[str, Any] | None) -> bool:
    """Whether the registration's decision code can be checked: it has the file digest, or
    fixed no code at all."""
    registration = registration or {}
    return "decision_code_sha256" in registration or "decision_code" not in registration


def regime(claim, recipes: Mapping[str, Any]) -> str:
    """The model sizes and steps the claim's arms trained: '2+2 layers, d 64, 3000 steps'."""
    shapes = []
    for arm in claim.arms():
        r = recipes[arm]
        size = f"d {r.d_model}" if r.arch == "transformer" else r.arch  # a GRU's width: its job's
        shapes.append(f"{r.num_layers}+{r.num_layers} layers, {size}, {r.steps} steps")
    return "; ".join(dict.fromkeys(shapes))


def planned_seeds(plan: Mapping[str, Any] | None, claim_id: str) -> float:
    """The seeds the power plan (settings.POWER_PLAN) asks of a claim; nan where it has
    no row for it (a claim out of the Holm family by design, or no experiment) or no count."""
    seeds = ((plan or {}).get("claims") or {}).get(claim_id, {}).get("seeds")
    return math.nan if seeds is None else float(seeds)


def table_rows(settings, decisions, registration, plan=None, code=None) -> list[dict[str, Any]]:
    """One row per claim (claims.csv); `seeds` and `seeds_run`: the seeds the effect used
    and ran (an experiment's own count, Settings.seeds_of of its arms, the leading `seeds`
    of its test), `predicted`: the verdict registered before the run."""
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
            "holm_ci_low": found.holm_low if found else math.nan,
            "holm_ci_high": found.holm_high if found else math.nan,
            "margin": found.margin if found else math.nan,
            "direction": found.direction if found else "",
            "p_value": found.p_value if found else math.nan,
            "method": found.method if found else "",
            "monte_carlo_error": found.monte_carlo_error if found else math.nan,
            "secondary": found.secondary if found else "",
            "secondary_p": found.secondary_p if found else math.nan,
            "disagree": bool(found.disagree) if found else False,
            "holm": decision.adjusted,
            "seeds": found.seeds[0] if found else math.nan,
            "seeds_run": found.seeds[1] if found else math.nan,
            "seeds_planned": planned_seeds(plan, claim.id),
            "regime": regime(claim, settings.arms),
            "precondition": decision.precondition,
            "measured": decision.measured,
            "verdict": decision.verdict,
            "predicted": claim.predicted,
            "registered": registration_mark(claim, registration, settings.arms, code,
                                            settings.decision_context(claim)),
            "exact_fallback": found.fallback if found else "",
        })  # fmt: skip
    return rows


def _number(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _interval(low: float, high: float) -> str:
    return "—" if math.isnan(low) else f"{low:.3g} to {high:.3g}"


def _p_cell(r) -> str:
    """'0.0039 (lattice)'; a Monte Carlo p with its standard error."""
    if not r.method:
        return _number(r.p_value)
    error = f" ± {r.monte_carlo_error:.1g}" if r.monte_carlo_error else ""
    return f"{_number(r.p_value)}{error} ({r.method.replace('_', ' ')})"


def _verdict_cell(r, mark: str = "") -> str:
    """'**INCONCLUSIVE** ≠ predicted' where the verdict is not the registered prediction."""
    differs = " ≠ predicted" if r.predicted and r.verdict != r.predicted else ""
    return f"**{r.verdict}**{differs}{mark}"


def _seeds_cell(r) -> str:
    """'24/24 (plan 18)': the seeds used of those run, and the power plan's count."""
    if math.isnan(r.seeds):
        return "—"
    cell = f"{r.seeds:g}/{r.seeds_run:g}"
    return cell if math.isnan(r.seeds_planned) else f"{cell} (plan {r.seeds_planned:g})"


def _seed_counts(table: pd.DataFrame, settings) -> str:
    """How many seeds the experiments ran: their range, each claim's in the table."""
    run = table.loc[(table["kind"] == "experiment") & table["seeds_run"].notna(), "seeds_run"]
    if not len(run):
        ran = "No experiment ran any seed"
    elif run.min() == run.max():
        ran = f"Each experiment ran {run.min():g} seeds"
    else:
        ran = f"The experiments ran {run.min():g} to {run.max():g} seeds (each its own)"
    return (
        f"{ran}, the leading ones of the {len(settings.seeds)} in `claims.seeds` (the column "
        f"seeds: used/run); arms only checks read ran {len(settings.check_seeds)}."
    )


def _beside(r) -> str:
    """The secondary test's p-value: 't-test 0.004', with ≠ where it differs at Holm."""
    if not r.secondary:
        return "—"
    return f"{r.secondary.split(' ')[0]} {_number(r.secondary_p)}{' ≠' if r.disagree else ''}"


def claims_markdown(table: pd.DataFrame, settings, registration: Mapping[str, Any]) -> str:
    """claims.md: the table by kind, with each claim's seeds and its registered prediction
    (≠ predicted marks a verdict that differs), under the claims file's version."""
    family = int(table["holm"].sum())
    lines = [
        f"# Claims: what the explainer says, tested (claims version {settings.version})",
        "",
        f"{_seed_counts(table, settings)} Every criterion, its predicted verdict and the "
        "decision code were registered "
        f"(`registration.json`, claims file sha256 "
        f"`{(registration or {}).get('claims_file_sha256', '?')[:12]}…`) before the first arm "
        "trained, and are evaluated by code. A claim whose manipulation check fails, or that "
        "cannot be tested here by design, is NOT TESTABLE HERE. Experiments: per-seed paired "
        "values, exact tests against each margin "
        "(the sign-flip test, or the exact unconditional test of paired binary outcomes), Holm "
        f"at alpha {settings.alpha:g} over the {family} experiments testable here; intervals by "
        "inverting the same test, at 95 % and at each claim's Holm level. Beside each, a "
        "secondary test (a t-test; McNemar's at margin 0); ≠ marks a t-test that differs on "
        "rejection at the Holm level, ≠ predicted a verdict other than the one registered.",
        "",
    ]
    if settings.reduced:
        lines += ["**Reduced run: not a verdict.** Fewer seeds and steps than the claims need.", ""]
    if not code_checked(registration):
        lines += [UNCHECKED_CODE, ""]
    changed = table[table["registered"].isin([CHANGED, CODE_CHANGED])]
    if len(changed):
        lines += [f"**Changed after registration:** {', '.join(changed['id'])}.", ""]
    fell = table[table["exact_fallback"].fillna("").astype(str) != ""]
    if len(fell):
        lines += ["**Monte Carlo where an exact test was due:** "
                  + "; ".join(f"{r.id} ({r.exact_fallback})"
                              for r in fell.itertuples(index=False)) + ".", ""]  # fmt: skip
    short = table[table["seeds"] < table["seeds_planned"]]
    if len(short):
        # the plan's path from the chapter's folder (workflow/claims/)
        lines += ["**Fewer seeds than the power plan asks** (config/claims_power.yaml): "
                  + ", ".join(f"{r.id} used {r.seeds:g} of {r.seeds_planned:g}"
                              for r in short.itertuples(index=False)) + ".", ""]  # fmt: skip
    counts = ", ".join(
        f"{kind}: " + ", ".join(f"{n} {v}" for v, n in group["verdict"].value_counts().items())
        for kind, group in table.groupby("kind", sort=False)
    )
    lines += [f"Verdicts by kind: {counts}.", ""]
    header = ["id", "claim", "effect", "95 % CI", "Holm-level CI", "margin", "p (test)",
              "beside", "seeds", "predicted", "verdict"]  # fmt: skip
    for kind, title in KIND_TITLES.items():
        rows = table[table["kind"] == kind]
        if not len(rows):
            continue
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        for r in rows.itertuples(index=False):
            margin = "—" if math.isnan(r.margin) else f"{r.direction} {r.margin:g}"
            mark = "" if r.registered == "as registered" else f" ({r.registered})"
            cells = [f"`{r.id}`", r.claim, _number(r.estimate), _interval(r.ci_low, r.ci_high),
                     _interval(r.holm_ci_low, r.holm_ci_high), margin, _p_cell(r), _beside(r),
                     _seeds_cell(r), r.predicted or "—", _verdict_cell(r, mark)]  # fmt: skip
            lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
        lines += ["", "Measured (regime; manipulation check; numbers):", ""]
        for r in rows.itertuples(index=False):
            situation = f" Manipulation check {r.precondition}." if r.precondition else ""
            lines.append(f"- `{r.id}` ({r.regime or 'no training'}).{situation} {r.measured}")
        lines.append("")
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


def _median_of(seeds: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """The median over the seeds that have the value (None where none has)."""
    values = [s[key] for s in seeds if s.get(key) is not None]
    return float(np.median(values)) if values else None


def _used_of_run(row) -> list[int] | None:
    """[used, run]: the seeds an experiment's effect used and ran (None without an effect)."""
    if math.isnan(row["seeds"]):
        return None
    return [int(row["seeds"]), int(row["seeds_run"])]


def figure_data(settings, metrics, histories, analytic_results, benchmarks, table):
    """What the figures draw; of the benchmarks (by claim), the first claim's of each rule;
    `seeds`: {arm: the seeds it ran (Settings.seeds_of)} of the arms that trained."""
    every = 10
    experiments = [c for c in settings.claims if c.kind == "experiment"]
    rows = table.set_index("id")

    def arms_of(metric: str) -> list[str]:
        return [a for a in settings.arms_reading(metric) if a in metrics]

    def first_of(rule: str) -> dict[str, Any]:
        claims = settings.benchmarked_by(rule)
        return dict(benchmarks[claims[0]]) if claims else {}

    return {
        "reduced": settings.reduced,
        "seeds": {
            arm: len(settings.seeds_of(arm))
            for arm in settings.arms
            if arm in metrics or arm in histories
        },  # fmt: skip
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
                "seeds": _used_of_run(rows.loc[c.id]),
            }
            for c in experiments
        ],  # fmt: skip
        "loss_curves": {arm: _median_curve(h, "loss", every) for arm, h in histories.items()},
        "grad_norm_curves": {
            arm: _median_curve(histories[arm], "grad_norm", every)
            for arm in arms_of("stress_damage")
        },
        "calibration": {arm: pooled_bins(metrics[arm]) for arm in arms_of("overconfidence")},
        "top1_agreement": {
            arm: [s.get("top1_agreement") for s in metrics[arm]]
            for arm in arms_of("top1_agreement")
        },  # fmt: skip
        "residue_rho": {
            arm: [s.get("residue_rho") for s in metrics[arm]] for arm in arms_of("residue_rho")
        },
        "greedy_by_step": {
            arm: [s.get("greedy_by_step", {}) for s in metrics[arm]]
            for arm in arms_of("beam_net_wins")
        },  # fmt: skip
        "beam_step": {
            arm: [s.get("beam_step") for s in metrics[arm]] for arm in arms_of("beam_net_wins")
        },  # fmt: skip
        "greedy_room": list(GREEDY_ROOM),
        "beam": {
            arm: {
                k: _median_of(metrics[arm], k)
                for k in ("beam_wins", "beam_ties", "beam_losses", "beam_net_wins")
            }
            for arm in arms_of("beam_net_wins")
        },  # fmt: skip
        "analytic": dict(analytic_results),
        "cost": first_of("claims_cost"),
        "speed": first_of("claims_rnn_speed"),
    }
