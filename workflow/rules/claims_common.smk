# Helpers of the claims chapter (kept apart from its rules, as snakemake --lint asks).

import json
from pathlib import Path

from tcrformer.chapters.claims.settings import JOB_FOLDER, POWER_PLAN

CLAIMS = settings("claims")
CLAIM_ARMS = CLAIMS.used_arms()
# The power plan (seeds each claim needs), reported beside the seeds run, where there is one.
CLAIMS_PLAN = [POWER_PLAN] if Path(POWER_PLAN).exists() else []


def claim_recipe(wc):
    """What trains an arm's seed: a change retrains it."""
    return CLAIMS.recipe(wc.arm, int(wc.seed)).training_params()


def claim_jobs():
    """(arm, seed) of every training job: a sweep's candidates run the sweep's seeds."""
    return [(arm, seed) for arm in CLAIM_ARMS for seed in CLAIMS.seeds_of(arm)]


def claim_files(name):
    return [
        result("claims", f"{JOB_FOLDER.format(arm=arm, seed=seed)}/{name}")
        for arm, seed in claim_jobs()
    ]


def sweep_choice(wc):
    """The choice file of the sweep that sets a key of this arm, or nothing."""
    sweep = CLAIMS.sweep_of(wc.arm)
    return [result("claims", f"sweeps/{sweep.name}.json")] if sweep else []


def _metrics_of(arms, seeds):
    return [
        result("claims", f"{JOB_FOLDER.format(arm=arm, seed=seed)}/metrics.json")
        for arm in arms
        for seed in seeds
    ]


def sweep_metrics(wc):
    """The registered grid's candidates, each over the sweep's seeds."""
    sweep = CLAIMS.sweeps[wc.sweep]
    return _metrics_of(sweep.candidates, sweep.seeds)


def sweep_final_metrics(wc):
    """The grid's candidates and the extension its choice asked for (after the checkpoint)."""
    sweep = CLAIMS.sweeps[wc.sweep]
    grid = checkpoints.claims_sweep_grid.get(sweep=wc.sweep).output.grid
    extend = json.loads(Path(grid).read_text())["extend"]
    return _metrics_of(sweep.candidates, sweep.seeds) + _metrics_of(extend, sweep.seeds)


def sweep_values(wc):
    """{candidate arm: its value of the swept key}, extensions included."""
    sweep = CLAIMS.sweeps[wc.sweep]
    return {arm: getattr(CLAIMS.arms[arm], sweep.key) for arm in sweep.every_candidate}


def benchmark_recipe(role):
    """The recipe (at the first seed) of the arm that a benchmarked claim's test names as
    `role` (arm or reference)."""
    return lambda wc: CLAIMS.recipe(
        CLAIMS.claim(wc.claim).test[role], CLAIMS.seeds[0]
    ).params()


def one_of(names):
    """A wildcard constraint: exactly one of these names."""
    return "|".join(names) or "none"
