# Helpers of the reversal chapter (kept apart from its rules, as snakemake --lint asks).

from tcrformer.reversal.ensemble import EnsembleSettings
from tcrformer.reversal.recipe import KEY_PREFIX, recipe_from_config

RECIPE_OF = {"reversal": config["reversal"]["recipe"], "speedrun": "speedrun"}


def _reversal_recipes():
    """Both recipes, checked now: a bad value is one line naming the key, exit 1."""
    try:
        return {
            d: recipe_from_config(config["reversal"], n) for d, n in RECIPE_OF.items()
        }
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        sys.exit(1)


REVERSAL_RECIPES = _reversal_recipes()


def _ensemble_settings():
    """The ensemble's seeds and groups, checked now: one line naming the key, exit 1."""
    try:
        return EnsembleSettings.from_config(config)
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        sys.exit(1)


ENSEMBLE = _ensemble_settings()
ENSEMBLE_GROUPS = ENSEMBLE.groups()
ENSEMBLE_PREFIX = KEY_PREFIX[ENSEMBLE.recipe]  # of its keys: reversal.* or speedrun.*


def ensemble_group_file(name):
    """The file `name` of the group that trained a seed (input function of a seed's rule)."""
    return lambda wc: result(
        "ensemble", f"group{ENSEMBLE.group_of(int(wc.seed))}/{name}"
    )


def ensemble_training(wc):
    """Everything that shapes a group's weights: a change retrains the group."""
    seeds = ENSEMBLE_GROUPS[int(wc.group)]
    return [ENSEMBLE.recipe_for(config["reversal"], s).training_params() for s in seeds]
