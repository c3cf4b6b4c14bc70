"""The power plan of the claims: how many seeds each experiment needs, from a pilot's spread.

For a continuous experiment the protocol tests the seeds' paired values d_s against the
margin m with an exact sign-flip test at its Holm level. Planned at the worst Holm step,
alpha / k for the k experiments of the Holm family (an experiment that cannot be tested
here by design, a `by_design` precondition, is out of the family: neither counted nor
planned, and named under `by_design`), the plan asks two things of n seeds:

    feasible    2^-n <= alpha / k          (the test's smallest p-value can clear the level)
    powered     P(reject | true effect) >= 0.8, the sign-flip test taken as the one-sample
                t-test it approaches: noncentral t with n - 1 degrees of freedom and
                noncentrality sqrt(n) |delta - m| / sd

The true effect delta a claim is planned for is fixed here, before the run: twice the margin
for `greater` (a margin of 0.01 is planned at 0.02), zero for `less` and `equivalent`. The
spread sd is that of the same per-seed value in a pilot run, an archived claims run
(`--archive`: claims v2's, whose seeds 0..7 were paired the same way), computed with the
current definitions where the pilot kept what they need. Where the pilot measured nothing
like it (the eval-mode excess, top-1 agreement), the plan says so and asks only for
feasibility.

A paired-binary experiment (the divergence claims) is planned by the exact power of its own
test (binary_power, by enumeration), at the divergence rates BINARY_PLANNED: every seed
without the remedy diverging at 0.75, none with it.

    python -m tools.claims_power --archive results/archive/claims_v2.tar.gz \
        --claims workflow/claims/config/claims.yaml --out workflow/claims/config/claims_power.yaml

A pilot's spread (tools/claims_pilot.py) plans with more pieces, here so that one module
holds the plan's arithmetic:

    planned_effect   the true effect the v4 plan above takes: twice its margin where the
                     margin lies on the claim's side of zero, zero where it does not. A v5
                     plan names its effect (seeds_needed's `effect`: pre_ln_warmup at v4's
                     log2 ratio 0.378, not 0)
    sd_upper         a pilot's sd raised to its one-sided upper confidence bound (chi-square,
                     n - 1 degrees of freedom), so that a small pilot's luck does not
                     under-plan: at 8 seeds and 80 %, 1.35 times the sd
    seeds_needed     the fewest seeds at or above a floor (`at_least`) whose power reaches
                     POWER; None where no count up to MAX_SEEDS does (UNREACHABLE: never
                     capped). With `exact`, the power at n <= EXACT_UP_TO is that of the
                     exact sign-flip test itself, simulated (below), not the t-test's
    verdicts_by_simulation
                     the chance of each verdict for n seeds of endpoints drawn from a normal
                     distribution (their means, sds and correlation), joined as the protocol
                     joins co-primary endpoints (SUPPORTED: every one shown on its side; NOT
                     SUPPORTED: any one shown on the other, at level / k); with one endpoint,
                     the single test. Each endpoint takes the t-test the sign-flip test
                     approaches where n > EXACT_UP_TO; up to that, the decision code's own
                     exact test (tcrformer.stats.sign_flip, the null the claims' protocol
                     builds), on d_s drawn as counts out of GRID (a fraction's strings are
                     counts out of 1,000 held-out strings) or an endpoint's own `grid` (a
                     log2 ratio rounded to 1/200, far below its spread). With `prior` (a
                     centre and an sd per endpoint), each draw first takes its true effects
                     from that normal prior: the chance of each verdict over the prior
                     (assurance), what a registered `forecast` is
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import math
import re
import sys
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy import stats

from tcrclaims.kinds import DIVERGED_BELOW, INCONCLUSIVE, REFUTED, SUPPORTED
from tcrformer.stats.sides import support_and_refute
from tcrformer.stats.sign_flip import ENUMERATE_UP_TO, sign_flip_null

POWER = 0.8
MAX_SEEDS = 256  # the largest count a plan looks at: a count above it is UNREACHABLE
UNREACHABLE = "unreachable"  # how a report says that no count up to MAX_SEEDS is powered
# A claim (workflow/claims/config/claims.yaml) -> how the pilot's archived arms give the same
# per-seed value (arm, reference, metric); several arms average per seed, as the protocol
# does. A claim not named here: the pilot measured nothing like it.
FROM_PILOT: dict[str, Any] = {
    "smoothing_generalisation": ("fixed", "fixed_no_smoothing", "heldout_fraction"),
    "dropout": ("fixed", "fixed_no_dropout", "heldout_fraction"),
    "beam_search": ("baseline", None, "beam_net_wins"),  # the pilot: a 500-step model, room to win
}  # fmt: skip
BINARY_PLANNED = (0.75, 0.0)  # (p10, p01) a paired-binary claim is planned for
MAX_BINARY_SEEDS = 64


def pilot_metrics(archive: str | Path) -> dict[str, dict[int, dict[str, Any]]]:
    """{arm: {seed: metrics}} from the archived pilot run (no extraction)."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    pattern = re.compile(r"claims/arms/([a-z0-9_]+)/seed(\d+)/metrics\.json$")
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            match = pattern.search(member.name)
            if match:
                metrics = json.load(io.TextIOWrapper(tar.extractfile(member)))
                found.setdefault(match[1], {})[int(match[2])] = metrics
    return found


def _value(metrics: Mapping[str, Any], metric: str) -> float:
    if metric == "diverged":
        exact = metrics.get("heldout_fraction")
        final = metrics.get("final_loss")
        return float(exact is None or exact < DIVERGED_BELOW or final is None)
    value = metrics.get(metric)
    return math.nan if value is None else float(value)


def pilot_per_seed(pilot, arms, reference, metric: str, relative: bool = False) -> np.ndarray:
    """The pilot's d_s for one claim, over the seeds every arm ran."""
    arms = (arms,) if isinstance(arms, str) else tuple(arms)
    refs = () if reference is None else ((reference,) if isinstance(reference, str) else reference)
    seeds = sorted(set.intersection(*(set(pilot[a]) for a in (*arms, *refs))))

    def mean_of(names):
        return np.array([np.mean([_value(pilot[a][s], metric) for a in names]) for s in seeds])

    x = mean_of(arms)
    if not refs:
        return x
    y = mean_of(refs)
    return x / y - 1 if relative else x - y


def feasible_seeds(level: float) -> int:
    """The fewest seeds whose smallest sign-flip p-value, 2^-n, is at most `level`."""
    return math.ceil(math.log2(1 / level))


def t_power(n: int, shift: float, sd: float, level: float, two_sided: bool = False) -> float:
    """Power of the one-sided t-test (both one-sided tests, for equivalence) at `level`."""
    if sd == 0:
        return 1.0 if shift > 0 else 0.0
    df, nc = n - 1, math.sqrt(n) * shift / sd
    critical = stats.t.ppf(1 - level, df)
    one = float(stats.nct.sf(critical, df, nc))
    return max(0.0, 2 * one - 1) if two_sided else one


def seeds_needed(margin: float, direction: str, sd: float, level: float,
                 effect: float | None = None, at_least: int = 2, exact: bool = False,
                 grid: int | None = None) -> int | None:  # fmt: skip
    """The fewest seeds, at least `at_least` and feasible, whose power at the true `effect`
    (default planned_effect: v4's plan) reaches POWER; None where none up to MAX_SEEDS does
    (UNREACHABLE). The power is the t-test's, or with `exact`, up to EXACT_UP_TO seeds, the
    exact sign-flip test's, simulated (verdicts_by_simulation; `grid`: its d_s are counts
    out of it, default GRID)."""
    grid = grid or GRID
    if effect is None:
        effect = planned_effect(margin, direction)
    if direction == "equivalent":
        shift = abs(margin) - abs(effect)
    else:
        shift = (effect - margin) * (1.0 if direction == "greater" else -1.0)
    if shift <= 0:
        return None  # a true effect on the margin or beyond it: no count shows it
    one = [{"margin": margin, "direction": direction, "mean": effect, "sd": sd, "grid": grid}]
    low = max(2, feasible_seeds(level), at_least)
    if exact:  # the exact test's power, seed by seed: not monotone in n everywhere
        for n in range(low, min(EXACT_UP_TO, MAX_SEEDS) + 1):
            if verdicts_by_simulation(n, one, 0.0, level)[SUPPORTED] >= POWER:
                return n
        low = max(low, EXACT_UP_TO + 1)

    def powered(n: int) -> bool:
        return t_power(n, shift, sd, level, two_sided=direction == "equivalent") >= POWER

    if low > MAX_SEEDS or not powered(MAX_SEEDS):
        return None
    high = MAX_SEEDS  # the t-test's power grows with n: bisection finds the fewest
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if powered(middle) else (middle + 1, high)
    return low


def binary_power(n: int, p10: float, p01: float, margin: float, level: float) -> float:
    """Power of the claims' exact paired-binary test (tcrformer.stats.binary) at `level`
    when each seed is +1, -1 or 0 with p10, p01 and the rest: by enumeration of every
    outcome, no simulation."""
    from tcrformer.stats.binary import paired_binary_p

    power = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if paired_binary_p(b, c, n, margin, "greater") <= level:
                power += stats.multinomial.pmf([b, c, n - b - c], n, [p10, p01, 1 - p10 - p01])
    return float(power)


def binary_seeds_needed(margin: float, level: float) -> int:
    """The fewest seeds whose exact paired-binary test reaches POWER at BINARY_PLANNED."""
    for n in range(2, MAX_BINARY_SEEDS + 1):
        if binary_power(n, *BINARY_PLANNED, margin, level) >= POWER:
            return n
    return MAX_BINARY_SEEDS


def planned_effect(margin: float, direction: str) -> float:
    """The true effect an endpoint is planned for (the module's table)."""
    side = 1.0 if direction == "greater" else -1.0
    return 2 * margin if margin * side > 0 else 0.0


def sd_upper(sd: float, n: int, confidence: float = 0.8) -> float:
    """The one-sided upper confidence bound of a standard deviation estimated from n values
    (normal data: (n - 1) s^2 / sigma^2 is chi-square with n - 1 degrees of freedom)."""
    return sd * math.sqrt((n - 1) / stats.chi2.ppf(1 - confidence, n - 1))


SIMULATIONS = 20_000  # draws of a verdict simulation by the t-test
EXACT_SIMULATIONS = 2_000  # draws of one by the exact test (milliseconds each)
EXACT_UP_TO = ENUMERATE_UP_TO  # seeds up to which a simulation runs the exact test
GRID = 1000  # simulated d_s for the exact test are counts out of this
SIMULATION_SEED = 4501  # its generator


def _t_sides(d: np.ndarray, margin: float, direction: str) -> tuple[np.ndarray, np.ndarray]:
    """(support, refute) p-values of the one-sided t-test of each row of d (draws, n)."""
    n = d.shape[1]
    t = (d.mean(1) - margin) / (d.std(1, ddof=1) / math.sqrt(n))
    upper, lower = stats.t.sf(t, n - 1), stats.t.cdf(t, n - 1)  # p(greater), p(less)
    return (upper, lower) if direction == "greater" else (lower, upper)


def _exact_sides(d: np.ndarray, margin: float, direction: str,
                 grid: int = GRID) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(support, refute) p-values of the exact sign-flip test (the protocol's null, by its
    lattice) of each row of d (draws, n), its values rounded to counts out of `grid`."""
    rows = np.round(d * grid) / grid
    found = np.array([support_and_refute(
        sign_flip_null(row, method="lattice", lattice=grid).p_value, margin, direction)
        for row in rows])  # fmt: skip
    return found[:, 0], found[:, 1]


def verdicts_by_simulation(
    n: int,
    endpoints: list[Mapping[str, float | str]],
    corr: float,
    level: float,
    draws: int | None = None,
    seed: int = SIMULATION_SEED,
    prior: list[tuple[float, float]] | None = None,
) -> dict[str, float]:
    """{SUPPORTED, NOT SUPPORTED, INCONCLUSIVE: chance} for n seeds. Each endpoint is
    {margin, direction, mean, sd}; with two, their d_s have correlation `corr`. Each is
    tested against its margin, by the exact sign-flip test up to EXACT_UP_TO seeds and by the
    t-test above; SUPPORTED when every endpoint's support p is at most `level` and the joint
    support p (their largest) is the smaller of the two sides, NOT SUPPORTED when the joint
    refute p (the smallest times k) is at most `level` and the smaller (protocol,
    "Co-primary endpoints"). An endpoint's `grid` (default GRID): the exact test's d_s are
    counts out of it. `prior`: (centre, sd) per endpoint, each draw's true effect drawn from
    that normal distribution in place of `mean` (assurance)."""
    k = len(endpoints)
    if k not in (1, 2):
        raise ValueError(f"{k} endpoints: one or two")
    exact = n <= EXACT_UP_TO
    draws = draws or (EXACT_SIMULATIONS if exact else SIMULATIONS)
    rng = np.random.default_rng(seed)
    cov = np.eye(k) if k == 1 else np.array([[1.0, corr], [corr, 1.0]])
    z = rng.multivariate_normal(np.zeros(k), cov, size=(draws, n))  # (draws, n, k)
    if prior is None:
        means = np.array([[float(end["mean"]) for end in endpoints]] * draws)
    else:
        if len(prior) != k:
            raise ValueError(f"a prior for {len(prior)} endpoints, not {k}")
        means = np.array([c for c, _ in prior]) + rng.standard_normal((draws, k)) * np.array(
            [s for _, s in prior])  # fmt: skip
    support = np.zeros((draws, k))
    refute = np.zeros((draws, k))
    for i, end in enumerate(endpoints):
        d = means[:, i : i + 1] + float(end["sd"]) * z[..., i]
        margin, direction = float(end["margin"]), str(end["direction"])
        support[:, i], refute[:, i] = (
            _exact_sides(d, margin, direction, int(end.get("grid", GRID))) if exact
            else _t_sides(d, margin, direction))  # fmt: skip
    p_support = support.max(1)
    p_refute = np.minimum(1.0, k * refute.min(1))
    supported = (p_support <= level) & (p_support <= p_refute)
    refuted = (p_refute <= level) & (p_refute < p_support)
    return {SUPPORTED: float(supported.mean()), REFUTED: float(refuted.mean()),
            INCONCLUSIVE: float(1 - supported.mean() - refuted.mean())}  # fmt: skip


def joint_seeds_needed(
    endpoints: list[Mapping[str, float | str]], corrs: list[float], level: float,
    at_least: int = 2,
) -> int | None:  # fmt: skip
    """The fewest seeds (at least `at_least`, and feasible) whose chance of SUPPORTED reaches
    POWER at every correlation in `corrs` (the pilot's, and independence: the plan takes the
    worse), each endpoint at its planned effect (`mean`); None when none up to MAX_SEEDS
    does (UNREACHABLE). Doubling, then bisection: the chance grows with the seeds."""

    def powered(n: int) -> bool:
        return all(verdicts_by_simulation(n, endpoints, c, level)[SUPPORTED] >= POWER
                   for c in corrs)  # fmt: skip

    low = max(2, feasible_seeds(level), at_least)
    if powered(low):
        return low
    high = low
    while not powered(high := min(2 * high, MAX_SEEDS)):
        if high == MAX_SEEDS:
            return None
        low = high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if powered(middle) else (middle, high)
    return high


def by_design(claim: Mapping[str, Any]) -> bool:
    """Whether the claim cannot be tested here by design (a `by_design` precondition): it
    is NOT TESTABLE HERE whatever the seeds say, and out of the Holm family."""
    return any(check.get("check") == "by_design" for check in claim.get("precondition") or ())


def plan(claims: list[Mapping[str, Any]], pilot, alpha: float) -> dict[str, Any]:
    """The seeds each experiment of the Holm family needs; those out of it by design are
    named apart (`by_design`) and neither counted for the level nor planned."""
    experiments = [c for c in claims if c["kind"] == "experiment"]
    out = [c["id"] for c in experiments if by_design(c)]
    experiments = [c for c in experiments if c["id"] not in out]
    level = alpha / len(experiments)  # the worst Holm step
    rows = {}
    for claim in experiments:
        test, source = claim["test"], FROM_PILOT.get(claim["id"])
        row: dict[str, Any] = {"margin": test["margin"], "direction": test["direction"],
                               "planned_effect": 2 * test["margin"]
                               if test["direction"] == "greater" else 0.0}  # fmt: skip
        if test["effect"] == "paired_binary":
            p10, p01 = BINARY_PLANNED
            basis = f"exact power of the paired-binary test at p10 {p10}, p01 {p01}"
            row.update(planned_effect=p10 - p01, sd=None, basis=basis,
                       seeds=binary_seeds_needed(test["margin"], level))  # fmt: skip
            rows[claim["id"]] = row
            continue
        d = None
        if source is not None:
            arms, reference, metric, *relative = source
            d = pilot_per_seed(pilot, arms, reference, metric, bool(relative))
            d = d[np.isfinite(d)]
        if d is None or d.size < 2 or float(np.std(d, ddof=1)) == 0:
            row.update(sd=None, seeds=feasible_seeds(level),
                       basis="no pilot spread (it measured nothing like it, or every seed agreed): "
                             "feasibility only")  # fmt: skip
        else:
            sd = float(np.std(d, ddof=1))
            needed = seeds_needed(test["margin"], test["direction"], sd, level)
            basis = f"pilot seeds {d.size}, {arms} vs {reference}: {metric}"
            if needed is None:
                basis += f"; {UNREACHABLE}: no count up to {MAX_SEEDS} reaches power {POWER}"
            row.update(sd=round(sd, 6), pilot_mean=round(float(d.mean()), 6), seeds=needed,
                       basis=basis)  # fmt: skip
        rows[claim["id"]] = row
    return {"level": level, "power": POWER, "experiments": len(experiments), "by_design": out,
            "claims": rows}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default="results/archive/claims_v2.tar.gz")
    parser.add_argument("--claims", default="workflow/claims/config/claims.yaml")
    parser.add_argument("--out", default="workflow/claims/config/claims_power.yaml")
    args = parser.parse_args(argv)
    section = yaml.safe_load(Path(args.claims).read_text())["claims"]
    result = plan(section["list"], pilot_metrics(args.archive), section.get("alpha", 0.05))
    archive_sha = hashlib.sha256(Path(args.archive).read_bytes()).hexdigest()
    result["provenance"] = {
        "command": "python -m tools.claims_power "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "archive": args.archive, "archive_sha256": archive_sha,
        "claims_file": args.claims,
        "date": datetime.date.today().isoformat(),
    }  # fmt: skip
    header = "# The claims' power plan: written by tools.claims_power; never typed.\n"
    Path(args.out).write_text(header + yaml.safe_dump(result, sort_keys=False))
    for claim_id, row in result["claims"].items():
        print(f"{claim_id}: {row['seeds']} seeds ({row['basis']})")


if __name__ == "__main__":
    main()
