# Helpers of the reversal chapter (kept apart from its rules, as snakemake --lint asks).
from tcrformer.training.recipe import RECIPES

REVERSAL = settings(
    "reversal"
).recipes  # {recipe name: Recipe}: its folder and key prefix
