# Helpers of the reversal chapter (kept apart from its rules, as snakemake --lint asks).
from tcrformer.training.recipe import RECIPES

REVERSAL = settings(
    "reversal"
).recipes  # {recipe name: Recipe}: its folder and key prefix

# The curve monitor's reference (golden check v2's bands file, named by the golden file's
# bands_v2:), or None when golden.monitor is false; the training reads it for its log only.
_reference = (
    bands_v2_file(config["golden"]["file"]) if config["golden"]["monitor"] else None
)
MONITOR_REFERENCE = str(_reference) if _reference else None
