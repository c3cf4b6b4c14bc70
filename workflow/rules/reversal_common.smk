# Helpers of the reversal and ensemble chapters (kept apart from their rules, as
# snakemake --lint asks).

REVERSAL = settings(
    "reversal"
).recipes  # {recipe name: Recipe}: its folder and key prefix
ENSEMBLE = settings("ensemble")
ENSEMBLE_GROUPS = ENSEMBLE.groups()


def ensemble_recipe(seed):
    return ENSEMBLE.recipe_for(config["reversal"], seed)


def ensemble_group_file(name):
    """The file `name` of the group that trained a seed (input function of a seed's rule)."""
    return lambda wc: result(
        "ensemble", f"group{ENSEMBLE.group_of(int(wc.seed))}/{name}"
    )


def ensemble_training(wc):
    """What trains a group's seeds, one recipe each: a change retrains the group."""
    return [
        ensemble_recipe(seed).training_params()
        for seed in ENSEMBLE_GROUPS[int(wc.group)]
    ]
