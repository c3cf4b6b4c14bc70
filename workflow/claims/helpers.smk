# Helpers of the claims chapter (kept apart from its rules, as snakemake --lint asks).

from tcrformer.chapters.claims.settings import JOB_FOLDER, POWER_PLAN

CLAIMS = settings("claims")
CLAIM_ARMS = CLAIMS.used_arms()
# The power plan (the seeds each claim needs), reported beside the seeds run.
CLAIMS_PLAN = Path(workflow.current_basedir).parents[1] / POWER_PLAN


def claim_recipe(wc):
    """What trains an arm's seed: a change retrains it."""
    return CLAIMS.recipe(wc.arm, int(wc.seed)).training_params()


def claim_jobs():
    """(arm, seed) of every training job, each arm at the seeds its claims ask."""
    return [(arm, seed) for arm in CLAIM_ARMS for seed in CLAIMS.seeds_of(arm)]


def claim_files(name):
    return [
        result("claims", f"{JOB_FOLDER.format(arm=arm, seed=seed)}/{name}")
        for arm, seed in claim_jobs()
    ]


def benchmark_recipe(role):
    """The recipe (at the first seed) of the arm that a benchmarked claim's test names as
    `role` (arm or reference)."""
    return lambda wc: CLAIMS.recipe(
        CLAIMS.claim(wc.claim).test[role], CLAIMS.seeds[0]
    ).params()


def one_of(names):
    """A wildcard constraint: exactly one of these names."""
    return "|".join(names) or "none"
