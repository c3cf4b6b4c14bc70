# Helpers of the claims (kept apart from their rules, as snakemake --lint asks).

# The claims' package (lib/tcrclaims) beside these rules, ahead of any installed copy, as
# common.smk puts the library: the rule files parse in a bare clone, and the jobs import it.
_CLAIMS_LIB = str(Path(workflow.current_basedir).resolve() / "lib")
sys.path.insert(0, _CLAIMS_LIB)
share_library(_CLAIMS_LIB)

from tcrclaims.figures import FIGURES as CLAIMS_FIGURES
from tcrclaims.figures import SECTION as CLAIMS_SECTION
from tcrclaims.settings import JOB_FOLDER, POWER_PLAN
from tcrclaims.settings import Settings as ClaimsSettings

# The claims' own config check, after the library's (it reads the reversal section).
CLAIMS = checked_config(ClaimsSettings.from_config)
CLAIM_ARMS = CLAIMS.used_arms()
# The power plan (the seeds each claim needs), reported beside the seeds run. (The claims
# file, CLAIMS_FILE, is the Snakefile's: it reads it before the config check.)
CLAIMS_PLAN = Path(workflow.current_basedir).parents[1] / POWER_PLAN


def claim_recipe(wc):
    """What trains an arm's seed: a change retrains it."""
    return CLAIMS.recipe(wc.arm, int(wc.seed)).training_params()


def claim_jobs(arms=None):
    """(arm, seed) of every training job, each arm at the seeds its claims ask (of `arms`,
    default every arm the summary reads)."""
    return [
        (arm, seed) for arm in (arms or CLAIM_ARMS) for seed in CLAIMS.seeds_of(arm)
    ]


def claim_files(name, arms=None):
    return [
        result("claims", f"{JOB_FOLDER.format(arm=arm, seed=seed)}/{name}")
        for arm, seed in claim_jobs(arms)
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


def claims_figure_files():
    """The PNG and SVG of every figure of the claims."""
    return [path for figure in CLAIMS_FIGURES for path in figure_files(figure.id)]
