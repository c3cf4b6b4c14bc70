"""The held-out validation's tests, simulated: how often each rejects a correct method, and a
faulty one, with the null taken as a binomial at the nominal share and by the parametric
bootstrap of validate.py.

    python -m tools.golden validation_null report [--outer R] [--replicates B] [--seed S]

One outer simulation is one v4 validation from a known truth: 80 fitting seeds and 100
held-out seeds drawn from it (the keys jointly, through the truth's copula), the bands made
by the method, the held-out counts judged by validate.judge with B bootstrap replicates
(fitted on those 80 fitting seeds, as at validation). The truth is the model validate fits,
fitted on v3's 80 fitting seeds (their moments, lambdas and correlation of normal scores).

The multipliers are calibrated at the truth (calibrated_table: each band's mean exact
exceedance over fits equals its share), so that a count's only departure from its binomial is
the fitting ensemble's variation, which is what the binomial tests ignore. The misses' levels
are calibrated at the truth once (misses.calibrate) and held in every outer simulation, as
the bootstrap holds the fitting data's; misses_null_check measures what holding them changes
in the misses' null counts against recalibrating every replicate. The record,
validation_null.md, was written by this simulation at commit 5e7df53, when lam was sought on
a grid in lam per window (the same fit wherever lam-hat stays off that grid's edges).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from tcrformer.stats.binary import exact_binomial_interval
from tcrformer.training import judged

from tools.golden import laws, misses, records, scale, validate

REPORT = records.SIMULATION / "validation_null.md"
OUTER, REPLICATES = 2000, 999  # the report's outer simulations and bootstrap replicates
MISSES_CHECK = (300, 200)  # the misses' check: runs, and calibration draws in each
CALIBRATION_FITS = 8000  # fits per key and band where a multiplier is calibrated
FAULTS = (("loss_late", 0.5), ("loss_late", 1.0))  # held-out loss_late moved up, in its SDs


def design_fitting() -> dict[str, np.ndarray]:
    """v3's fitting seeds with every key (64..143, 80 seeds), on the keys' scales."""
    table = pd.read_csv(records.ROOT / "config/golden/v3/fitting.csv")
    table = table.dropna(subset=list(judged.WINDOWS))
    floor = records.recipe_inputs()[1]
    return {key: validate.to_scale(key, table[key].to_numpy(float), floor) for key in validate.KEYS}


# Multipliers and levels calibrated at a model ------------------------------------------------


def multiplier(model: laws.Model, fit: scale.ScaleFit, side: str, share: float) -> float:
    """The k at which the fits' mean exact exceedance under the model equals the share."""

    def excess(k: float) -> float:
        return float(model.exceedance(fit.bound(k, side), side).mean()) - share

    return optimize.brentq(excess, *laws.MULTIPLIER_RANGE, xtol=1e-6)


def calibrated_multipliers(key, models, method: validate.Method, fits: int, rng) -> dict:
    """Per band, the key's (k_low, k_high): per side the largest over the models (the
    method's rule), each from `fits` fits of 80 drawn from the model, refitted as the method
    refits them."""
    found = {band: [] for band in validate.BANDS}
    for model in models:
        t = model.draw((fits, validate.FITTING_SEEDS), rng)
        if model.lam is None:
            fit = scale.fixed_fit(t, None)
        else:
            fit = scale.refit_relative(t, method.grid)
        for band in validate.BANDS:
            share = method.share(band)
            found[band].append([multiplier(model, fit, side, share) for side in ("low", "high")])
    return {band: tuple(float(k) for k in np.max(ks, axis=0)) for band, ks in found.items()}


def calibrated_table(models: dict, method: validate.Method, fits: int, seed: int) -> dict:
    """The multipliers table (validate.MULTIPLIERS' shape) calibrated over each key's models
    (key -> list of laws.Model)."""
    rng = np.random.default_rng(seed)
    per_key = {
        key: calibrated_multipliers(key, found, method, fits, rng) for key, found in models.items()
    }
    return {band: {key: ks[band] for key, ks in per_key.items()} for band in validate.BANDS}


def truth_levels(law: validate.Count, method: validate.Method, draws: int, rng) -> dict:
    """The misses' calibrated level per band at the truth itself (misses.calibrate)."""
    found = {}
    for band in validate.BANDS:
        g, _ = misses.calibrate(
            misses.N, law.mu, law.phi, validate.FITTING_SEEDS, draws, rng, method.share(band)
        )
        found[band] = float(g[0])
    return found


# The simulation ------------------------------------------------------------------------------


class Setup:
    """A truth with the method calibrated at it: multipliers and the misses' levels."""

    def __init__(self, truth: validate.Generating, method: validate.Method, fits: int, seed: int):
        rng = np.random.default_rng(seed)
        scales = {key: [law.model] for key, law in truth.laws.items() if key != "misses"}
        table = calibrated_table(scales, method, fits, seed)
        self.truth, self.method = truth, replace(method, multipliers=table)
        self.levels = {}
        if "misses" in truth.laws:
            self.levels = truth_levels(truth.laws["misses"], method, method.misses_draws, rng)


def decisions(record: dict) -> dict[str, bool]:
    """One validation's rejections: the bootstrap tests, the binomial readings, and each
    pair's union (the validation FAILs)."""
    new = {
        "pooled": record["pooled"]["rejects"],
        "per_side": any(r["rejects"] for r in record["per_side"]),
    }
    old = {
        "pooled": record["binomial"]["pooled_rejects"],
        "per_side": record["binomial"]["per_side_rejects"],
    }
    return {
        **{f"bootstrap_{k}": v for k, v in new.items()},
        "bootstrap_either": new["pooled"] or new["per_side"],
        **{f"binomial_{k}": v for k, v in old.items()},
        "binomial_either": old["pooled"] or old["per_side"],
    }


def simulate(setup: Setup, outer: int, replicates: int, seed: int, fault=None) -> pd.DataFrame:
    """`outer` validations from the truth, each judged with `replicates` bootstrap
    replicates; fault (key, SDs): the held-out seeds' key moved by that many of its SDs."""
    rng = np.random.default_rng(seed)
    heldout_truth = setup.truth if fault is None else setup.truth.moved(*fault)
    rows = []
    for _ in range(outer):
        fitting = {k: v[0] for k, v in setup.truth.draw(validate.FITTING_SEEDS, 1, rng).items()}
        heldout = {k: v[0] for k, v in heldout_truth.draw(validate.HELDOUT_SEEDS, 1, rng).items()}
        record = validate.judge(fitting, heldout, setup.method, setup.levels, replicates, rng)
        rows.append(decisions(record))
    return pd.DataFrame(rows)


def rates(table: pd.DataFrame) -> pd.DataFrame:
    """Each test's rejection rate with its exact (Clopper-Pearson) 95 % interval."""
    n, rows = len(table), {}
    for test, hits in table.sum().items():
        low, high = exact_binomial_interval(int(hits), n, 0.95)
        rows[test] = {"rate": hits / n, "mc_low": low, "mc_high": high}
    return pd.DataFrame(rows).T


def misses_null_check(setup: Setup, replicates: int, draws: int, seed: int) -> pd.DataFrame:
    """The misses' held-out counts beyond the family and per-side bands over `replicates`
    runs of the procedure from the truth's misses: the levels held (as the bootstrap holds
    them) against recalibrated on every replicate (misses.misses_bounds, `draws` draws)."""
    law, rng = setup.truth.laws["misses"], np.random.default_rng(seed)
    z = rng.standard_normal((replicates, validate.FITTING_SEEDS + validate.HELDOUT_SEEDS))
    x = law.quantile(z)
    fitting, heldout = x[:, : validate.FITTING_SEEDS], x[:, validate.FITTING_SEEDS :]
    tail, rows = validate.misses_tail(fitting), []
    for band in ("family", "per_side"):
        held = misses.plug_in_bound_each(tail, np.full(replicates, setup.levels[band]))
        share = setup.method.share(band)
        found = misses.misses_bounds(fitting.astype(int), misses.N, share, draws, seed).c
        for label, bound in (("held", held), ("recalibrated", found)):
            counts = (heldout > bound[:, None]).sum(axis=1)
            rows.append(
                {
                    "band": band,
                    "levels": label,
                    "mean": counts.mean(),
                    "sd": counts.std(ddof=1),
                    "q95": np.percentile(counts, 95),
                    "q99": np.percentile(counts, 99),
                }
            )
    return pd.DataFrame(rows)


# The report ----------------------------------------------------------------------------------


def report(outer: int, replicates: int, seed: int, command: str) -> str:
    """The markdown record: rejection rates under the truth and under the faults, the
    truth's calibration, the misses' check, the validation's own cost."""
    started = time.process_time()
    method = validate.Method()
    setup = Setup(validate.fit_generating(design_fitting(), method), method, CALIBRATION_FITS, seed)
    null = rates(simulate(setup, outer, replicates, seed + 1))
    fewer = max(outer // 10, 50)
    faults = []
    for i, (key, sds) in enumerate(FAULTS):
        found = rates(simulate(setup, fewer, replicates, seed + 2 + i, (key, sds)))
        title = f"## Under a fault: {key} moved up {sds:g} SD on its scale, held-out seeds"
        faults.append(f"{title}\n\n{table_of(found, fewer)}")
    check = misses_null_check(setup, *MISSES_CHECK, seed + 5)
    cost = validation_cost(setup, seed + 6)
    prov = records.provenance(command)
    sections = [
        "# Golden check v4: the held-out validation's tests under the null",
        f"Written by `{command}` (tools/golden/validation_null.py) at commit "
        f"{prov['commit']} (dirty {prov['dirty']}), {prov['date']}; "
        f"{time.process_time() - started:.0f} CPU s in all (process time, one core).",
        *__doc__.split("\n\n")[2:4],
        intro(outer, replicates),
        "## Rejection rates of a correct method\n\n" + table_of(null, outer),
        *faults,
        "## The truth\n\n" + truth_text(setup),
        "## The misses' null: levels held against recalibrated",
        check_text(check, *MISSES_CHECK),
        "## The validation's own cost\n\n" + cost,
    ]
    return "\n\n".join(sections) + "\n"


def intro(outer: int, replicates: int) -> str:
    return (
        f"{outer} outer simulations, each judged with {replicates} bootstrap replicates (the "
        f"validation itself uses {validate.REPLICATES}). The bootstrap tests: (i) pooled, "
        f"(ii) per side with Holm, each at {validate.PRIMARY_LEVEL:g}; either: the validation "
        f"FAILs. The binomial readings: each count against Binomial(seeds, share), each test "
        f"at {validate.BINOMIAL_LEVEL:g} (the design's first registration). Intervals: "
        "exact 95 % (Clopper-Pearson) over the outer simulations. With B bootstrap replicates "
        "a p-value is a multiple of 1 / (B + 1): Holm's first level over 9 sides at 2.5 % "
        "(0.0028) is reached only by a count that at most 1 replicate reaches at B = 999, "
        "at most 26 at 9,999."
    )


def table_of(found: pd.DataFrame, outer: int) -> str:
    level = {"bootstrap": validate.PRIMARY_LEVEL, "binomial": validate.BINOMIAL_LEVEL}
    frame = found.rename_axis("test").reset_index()
    frame.insert(1, "level each", frame["test"].str.split("_").str[0].map(level))
    frame["outer"] = outer
    return frame.to_markdown(index=False, floatfmt=".4f")


def truth_text(setup: Setup) -> str:
    laws = pd.DataFrame({k: law.describe() for k, law in setup.truth.laws.items()}).T
    corr = pd.DataFrame(
        setup.truth.correlation, index=list(setup.truth.laws), columns=list(setup.truth.laws)
    )
    ks = pd.DataFrame(
        {
            band: {k: f"{lo:.3f}, {hi:.3f}" for k, (lo, hi) in table.items()}
            for band, table in setup.method.multipliers.items()
        }
    )
    levels = ", ".join(
        f"{band} {g / setup.method.share(band):.3f}" for band, g in setup.levels.items()
    )
    return "\n\n".join(
        [
            "Fitted by validate.fit_generating on v3's 80 fitting seeds (on the keys' scales):",
            laws.to_markdown(floatfmt=".5g"),
            "Copula correlation (normal scores):",
            corr.to_markdown(floatfmt=".3f"),
            f"Multipliers calibrated at the truth (k_low, k_high; {CALIBRATION_FITS} fits):",
            ks.to_markdown(),
            f"The misses' levels at the truth, as a fraction of each share: {levels}.",
        ]
    )


def check_text(check: pd.DataFrame, runs: int, draws: int) -> str:
    return (
        f"{runs} runs of the misses' procedure from the truth; held-out counts beyond the band "
        f"with the levels held (the bootstrap's) and recalibrated on every run ({draws} draws "
        "per calibration).\n\n" + check.to_markdown(index=False, floatfmt=".3f")
    )


def validation_cost(setup: Setup, seed: int) -> str:
    """One validation as it will run: B = validate.REPLICATES, misses calibrated in full."""
    rng = np.random.default_rng(seed)
    fitting = {k: v[0] for k, v in setup.truth.draw(validate.FITTING_SEEDS, 1, rng).items()}
    heldout = {k: v[0] for k, v in setup.truth.draw(validate.HELDOUT_SEEDS, 1, rng).items()}
    started = time.process_time()
    x = fitting["misses"].astype(int)
    levels = validate.misses_levels(x, setup.method, seed)
    middle = time.process_time()
    validate.judge(fitting, heldout, setup.method, levels, validate.REPLICATES, rng)
    done = time.process_time()
    return (
        f"One validation on data drawn from the truth: the misses' levels calibrated "
        f"({setup.method.misses_draws} draws, 3 bands) {middle - started:.0f} CPU s, the "
        f"bootstrap of {validate.REPLICATES} replicates {done - middle:.0f} CPU s."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = records.command_parser("validation_null", __doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("report", help=f"the simulation, written to {REPORT.name}")
    run.add_argument("--outer", type=int, default=OUTER)
    run.add_argument("--replicates", type=int, default=REPLICATES)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    command = (
        f"python -m tools.golden validation_null report --outer {args.outer} "
        f"--replicates {args.replicates} --seed {args.seed}"
    )
    text = report(args.outer, args.replicates, args.seed, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
