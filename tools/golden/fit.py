"""The bands fitted: the fitting ensemble's statistics -> the bands file the golden file names,
with a report.

    python -m tools.golden fit FITTING [--out FOLDER]

FITTING: the fitting ensemble's folder (results/<run>/ensemble: curves.csv and
seed<s>/values.json) or a statistics table with a row per seed (seed, judged.KEYS; cdr3_correct
and loss_step<s> for the reference). Writes into FOLDER (config/golden/v4/):

    fitting.csv   the fitting seeds' statistics (and curves/fit.csv, their loss curves, when
                  FITTING is a folder): the committed data the bands are recomputed from
    bands.yaml    the committed bands in tcrformer.core.golden_file's format: `version:`,
                  `method:` (the budget and how the bands were made), `bands:` (each judged
                  key's low and/or high, its n, what made it), `reference:` (the fitting
                  seeds' values of the explainer's printed training values), `provenance:`
    fit.md        per window lam-hat and its 95 % profile interval from the same untruncated
                  likelihood, the shape c and the excess kurtosis at lam-hat (report only);
                  the anti-diagonal's skewness and multipliers; the misses' fit; every band

The golden file keeps naming the bands file it names: switching the pipeline to these bands
is raising golden_file.METHOD_VERSION to method.VERSION and pointing explainer_values.yaml's
`bands:` at them, on purpose, in a commit of its own.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tcrformer.training import judged

from tools.golden import method, records, scale

HEADER = "# Golden check v4's bands: written by `python -m tools.golden fit`; never typed.\n"


def bounds_text() -> str:
    k = method.WINDOW_K["committed"]
    return (
        f"loss windows: m -+ {k} s sqrt(1 + 1/n) on BoxCox(loss - floor; lambda-hat), lambda-hat "
        "by the untruncated Box-Cox normal likelihood sought as lambda sd(log x) on a fixed grid; "
        "anti-diagonal: the same on logit(a), Student's t above, below the larger of t and a "
        "sinh-arcsinh calibration at the data's skewness; misses: a beta-binomial by maximum "
        "likelihood, its bound calibrated at the fit and at the overdispersion's heavy end "
        "(tools/golden/method.py)"
    )


def bands_record(fitting: pd.DataFrame, source: str) -> tuple[dict, dict]:
    """(the bands file's record but its provenance, every band of method.BANDS)."""
    budget, floor, eval_n = records.recipe_inputs()
    found = method.fit_bands(fitting, floor, budget)
    committed = {}
    for key in judged.KEYS:
        band = dict(found["committed"][key])
        if band.get("high", 0) is None:
            del band["high"]  # an open side
        committed[records.band_key(key)] = band
    record = {
        "version": method.VERSION,
        "method": {
            "version": method.VERSION,
            "budget": budget,
            "tests": method.TESTS,
            "per_test": budget / method.TESTS,
            "bounds": bounds_text(),
            "margin": method.MARGIN,
            "window_k": dict(method.WINDOW_K),
            "windows": {k: list(w) for k, w in judged.WINDOWS.items()},
            "floor": floor,
            "eval_n": eval_n,
            "fitting": source,
        },
        "bands": committed,
        "reference": records.reference(fitting),
    }
    return record, found


def fit_command(source: Path, folder: Path = records.FOLDER) -> Path:
    """fitting.csv, bands.yaml and fit.md from the fitting ensemble (folder or table)."""
    source = Path(source)
    fitting = records.read_statistics(source)
    folder.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        (folder / "curves").mkdir(exist_ok=True)
        shutil.copyfile(source / "curves.csv", folder / "curves/fit.csv")
    if source.resolve() != (folder / "fitting.csv").resolve():
        fitting.to_csv(folder / "fitting.csv", index=False)
    named = f"{folder.relative_to(records.ROOT)}" if folder.is_relative_to(records.ROOT) else folder
    record, found = bands_record(fitting, f"{named}/fitting.csv ({len(fitting)} seeds)")
    out = "" if folder == records.FOLDER else f" --out {folder}"
    record["provenance"] = records.provenance(f"python -m tools.golden fit {source}{out}")
    path = records.write_yaml(folder / "bands.yaml", record, HEADER)
    (folder / "fit.md").write_text(report(found, record))
    return path


def fmt(x, digits: int = 6) -> str:
    if x is None:
        return "open"
    return f"{x:.{digits}g}" if math.isfinite(x) else ("-inf" if x < 0 else "inf")


def report(found: dict, record: dict) -> str:
    """fit.md: the windows' fits, the anti-diagonal's and the misses' parts, every band."""
    committed, n_fit = found["committed"], method.N_FIT
    windows = [
        {
            "key": key,
            "n": band["n"],
            "lambda-hat": fmt(band["lambda"], 4),
            "95 % profile interval": " .. ".join(fmt(v, 4) for v in band["lambda_interval"]),
            "shape c": fmt(band["shape_c"], 4),
            "excess kurtosis": fmt(band["excess_kurtosis"], 3),
        }
        for key, band in ((k, committed[k]) for k in judged.WINDOWS)
    ]
    anti = committed["antidiagonal"]
    miss = committed["misses"]
    rows = []
    for band in method.BANDS:
        for key in judged.KEYS:
            entry = found[band][key]
            k = (entry.get("k"),) * 2 if key in judged.WINDOWS else (
                entry.get("k_low"), entry.get("k_high"))  # fmt: skip
            rows.append(
                {
                    "band": band,
                    "share": f"{method.share(band, record['method']['budget']):.6g}",
                    "key": key,
                    "low": fmt(entry.get("low")) if key != "misses" else "",
                    "high": fmt(entry.get("high")),
                    "k_low, k_high": "" if key == "misses" else f"{k[0]:.4f}, {k[1]:.4f}",
                }
            )
    small = [f"{r['key']} ({r['n']})" for r in windows if r["n"] != n_fit]
    small += [] if anti["n"] == n_fit else [f"antidiagonal ({anti['n']})"]
    small += [] if miss["n"] == n_fit else [f"misses ({miss['n']})"]
    outside = [
        r["key"] for r in windows if not all(math.isfinite(v)
                                             for v in committed[r["key"]]["lambda_interval"])
    ]  # fmt: skip
    sections = [
        "# Golden check v4: the fit",
        f"Written by `{record.get('provenance', {}).get('command', 'python -m tools.golden fit')}`"
        " (tools/golden/fit.py); never typed. Fitting data: "
        f"{record['method']['fitting']}; floor {record['method']['floor']}, budget "
        f"{record['method']['budget']} over {method.TESTS} one-sided tests. The bands file holds "
        "the committed band; the 5 % bands are the held-out validation's.",
        "## Loss windows\n\nlam-hat and its profile interval: the untruncated Box-Cox normal "
        f"likelihood, lam sd(log x) on the relative grid ({scale.RELATIVE_GRID[0]:g}.."
        f"{scale.RELATIVE_GRID[-1]:g}); an interval end at the grid's edge is infinite. Shape "
        "c = lam s / (1 + lam m) on BoxCox(x / g; lam-hat); the multiplier covers every c. "
        "Excess kurtosis on that scale (report only: v3's data gave -0.74, -0.79, +0.11).\n\n"
        + pd.DataFrame(windows).to_markdown(index=False),
        "## The anti-diagonal\n\n"
        f"Skewness of logit(a) {anti['skew']:.4f}; per band, k_high is Student's t at "
        f"{method.MARGIN:g} x the share, k_low the larger of that and the sinh-arcsinh "
        "calibration at this skewness:\n\n"
        + pd.DataFrame(
            [
                {
                    "band": b,
                    "k_t": found[b]["antidiagonal"]["k_t"],
                    "k_skew": found[b]["antidiagonal"]["k_skew"],
                    "k_skew MC SD": found[b]["antidiagonal"]["k_skew_sd"],
                    "k_low": found[b]["antidiagonal"]["k_low"],
                    "k_high": found[b]["antidiagonal"]["k_high"],
                }
                for b in method.BANDS
            ]  # fmt: skip
        ).to_markdown(index=False, floatfmt=".4f"),
        "## The misses\n\n"
        f"Beta-binomial by maximum likelihood: mu {miss['mu']:.6g}, rho {miss['rho']:.6g} "
        f"(95 % profile interval {fmt(miss['rho_interval'][0])} .. "
        f"{fmt(miss['rho_interval'][1])}); committed bound: calibrated at the fit "
        f"{miss['c_fit']} (level {miss['g_fit'] / method.share('committed'):.3f} x the share), "
        f"at the heavy end {miss['c_heavy']} (level "
        f"{miss['g_heavy'] / method.share('committed'):.3f} x), used {miss['high']}; both "
        f"calibrations reached the share: {miss['attained']}.",
        "## The bands\n\n" + pd.DataFrame(rows).to_markdown(index=False),
    ]
    notes = []
    if small:
        notes.append(f"- fitted on other than {n_fit} seeds, where the multipliers are "
                     f"calibrated: {', '.join(small)}")  # fmt: skip
    if outside:
        notes.append(f"- lam's profile interval reaches the grid's edge: {', '.join(outside)}")
    if notes:
        sections.append("## Notes\n\n" + "\n".join(notes))
    return "\n\n".join(sections) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = records.command_parser("fit", __doc__)
    parser.add_argument("fitting", type=Path, help="the fitting ensemble folder or table")
    parser.add_argument("--out", type=Path, default=records.FOLDER)
    args = parser.parse_args(argv)
    print(fit_command(args.fitting, args.out))
    print((args.out / "fit.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
