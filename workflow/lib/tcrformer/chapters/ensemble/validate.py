"""Does a band keep its promise? Its false-alarm rate on seeds it was not built from.

    python -m tcrformer.chapters.ensemble.validate [--golden config/golden/seed_values.yaml]

Two checks, both judged by the golden check itself (`tcrformer.core.golden.check`), so
what is measured is what a user's run gets:

- leave one out: for each fitting seed, bands fitted on the other n - 1 judge it;
- out of sample: the committed bands judge every seed of an ensemble they were not built
  from: config/golden/ensemble_holdout.csv (seeds 32..47, the numerics of their day), and
  ensemble_holdout_kernels.csv (seeds 48..63, portable numerics on the OpenBLAS kernels,
  which the bands' seeds never ran: a draw at new numerics, as a user's run is).

A draw fails when any trained key FAILs. Under the budget, failures over m draws are at
most Binomial(m, budget); `allowed` says whether the observed count is consistent with that
(a one-sided exact binomial test at the stated confidence).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from scipy import stats

from tcrformer.chapters.ensemble import bands as ensemble_bands
from tcrformer.core import golden

CONFIDENCE = 0.95  # of the test that a failure count is within the budget
HOLDOUTS = {  # check: the committed file of an ensemble the bands were not fitted on
    "out_of_sample": "ensemble_holdout",
    "out_of_sample_kernels": "ensemble_holdout_kernels",
}
CHECKS = ("leave_one_out", *HOLDOUTS)


@dataclass(frozen=True)
class Check:
    name: str
    draws: int
    failed_seeds: tuple[int, ...]
    failed_keys: tuple[str, ...]
    budget: float

    @property
    def failures(self) -> int:
        return len(self.failed_seeds)

    @property
    def p_value(self) -> float:
        """P(at least this many failures | each draw fails with probability `budget`)."""
        return float(stats.binomtest(self.failures, self.draws, self.budget, "greater").pvalue)

    @property
    def allowed(self) -> bool:
        return self.p_value >= 1 - CONFIDENCE

    def as_dict(self) -> dict[str, Any]:
        return {
            "draws": self.draws,
            "failed": self.failures,
            "failed_seeds": list(self.failed_seeds),
            "failed_keys": sorted(set(self.failed_keys)),
            "rate": self.failures / self.draws,
            "p_value_under_budget": round(self.p_value, 4),
            "within_budget": self.allowed,
        }


def failed_keys(values: Mapping[str, Any], entries: list[golden.GoldenEntry]) -> list[str]:
    """The trained keys the golden check FAILs for one seed's values."""
    trained = [e for e in entries if e.tolerance.kind == golden.ENSEMBLE]
    rows, _ = golden.check(values, trained)
    return [r.key for r in rows if r.status == golden.FAIL]


def judge_draws(
    draws: pd.DataFrame, entries: list[golden.GoldenEntry], prefix: str, name: str, budget: float
) -> Check:
    """Every row of `draws` (one seed each) judged by `entries`' bands."""
    cdr3 = _published_cdr3(entries, prefix)
    failed_seeds, keys = [], []
    for row in draws.to_dict("records"):
        failed = failed_keys(ensemble_bands.values_of(row, prefix, cdr3), entries)
        if failed:
            failed_seeds.append(int(row["seed"]))
            keys += failed
    return Check(name, len(draws), tuple(failed_seeds), tuple(keys), budget)


def leave_one_out(
    seeds: pd.DataFrame, entries: list[golden.GoldenEntry], prefix: str, budget: float, **fit
) -> Check:
    """Each seed judged by the bands of the other seeds (fit: floor, eval_n)."""
    failed_seeds, keys = [], []
    cdr3 = _published_cdr3(entries, prefix)
    for i, row in enumerate(seeds.to_dict("records")):
        rest = seeds.drop(index=seeds.index[i])
        fitted = ensemble_bands.fit_bands(rest, prefix, budget, **fit)
        bands = {k: golden.parse_band("leave-one-out", k, v) for k, v in fitted.items()}
        failed = failed_keys(
            ensemble_bands.values_of(row, prefix, cdr3), golden.with_bands(entries, bands)
        )
        if failed:
            failed_seeds.append(int(row["seed"]))
            keys += failed
    return Check("leave one out", len(seeds), tuple(failed_seeds), tuple(keys), budget)


def _published_cdr3(entries: list[golden.GoldenEntry], prefix: str) -> str:
    key = f"{prefix}.{ensemble_bands.CDR3_OUTPUT}"
    return next((str(e.value) for e in entries if e.key == key), "")


# The committed check -----------------------------------------------------------------------


def committed(golden_file: str | Path, checks: tuple[str, ...] = CHECKS) -> dict[str, Check]:
    """The checks on the committed files beside the golden file (ensemble_seeds.csv, the
    bands, ensemble_holdout.csv)."""
    golden_file = Path(golden_file)
    folder = golden_file.parent
    entries, _ = golden.load_golden(golden_file)
    bands_file = yaml.safe_load((folder / "ensemble_bands.yaml").read_text(encoding="utf-8"))
    fit, budget = bands_file["fit"], bands_file["method"]["budget"]
    prefix = fit["prefix"]
    done = {}
    if "leave_one_out" in checks:
        seeds = pd.read_csv(folder / "ensemble_seeds.csv")
        done["leave_one_out"] = leave_one_out(
            seeds, entries, prefix, budget, floor=fit["floor"], eval_n=fit["eval_n"]
        )
    for check, stem in HOLDOUTS.items():
        if check in checks:
            holdout = pd.read_csv(folder / f"{stem}.csv")
            name = check.replace("_", " ")
            done[check] = judge_draws(holdout, entries, prefix, name, budget)
    return done


def markdown(checks: Mapping[str, Check]) -> str:
    lines = [
        "| check | draws | failed | rate | P(this many or more, at the budget) | within budget |",
        "|---|---|---|---|---|---|",
    ]
    for check in checks.values():
        seeds = ", ".join(str(s) for s in check.failed_seeds) or "none"
        lines.append(
            f"| {check.name} | {check.draws} | {check.failures} (seeds: {seeds}) "
            f"| {check.failures / check.draws:.3f} | {check.p_value:.3f} "
            f"| {'yes' if check.allowed else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def enlarged_placement(golden_file: str | Path) -> pd.DataFrame:
    """Where the seed document's printed values fall among both committed ensembles."""
    from tcrformer.chapters.ensemble import distributions

    folder = Path(golden_file).parent
    names = ("ensemble_seeds.csv", *(f"{stem}.csv" for stem in HOLDOUTS.values()))
    both = pd.concat([pd.read_csv(folder / name) for name in names], ignore_index=True)
    entries, _ = golden.load_golden(golden_file)
    published = {e.key: e.value for e in entries if e.chapter == "reversal"}
    cdr3 = _published_cdr3(entries, "reversal")[::-1]
    keys = [c for c in both.columns if c != "seed"]
    values = distributions.published_values(published, "reversal", cdr3, keys)
    return distributions.summary_table(both, values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", default="config/golden/seed_values.yaml")
    args = parser.parse_args(argv)
    print(markdown(committed(args.golden)))
    table = enlarged_placement(args.golden)
    print("| key | seeds | published | where it falls |\n|---|---|---|---|")
    for row in table.itertuples(index=False):
        print(f"| `{row.key}` | {row.n} | {row.published:g} | {row.published_placement} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
