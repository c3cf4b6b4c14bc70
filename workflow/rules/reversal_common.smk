# Helpers of the reversal chapter (kept apart from its rules, as snakemake --lint asks).

from tcrformer.reversal.recipe import recipe_from_config

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
