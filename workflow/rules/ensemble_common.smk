# Helpers of the ensemble chapter (kept apart from its rules, as snakemake --lint asks).
import importlib.util

ENSEMBLE = settings("ensemble")


def ensemble_recipe(seed):
    return ENSEMBLE.recipe_for(config["reversal"], seed)


def bench_module(name):
    """bench/<name>.py as a module (a harness's tables: what it runs, not how)."""
    path = Path(workflow.current_basedir).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    return harness


# The golden check's power: faults injected into the training code by bench/golden_power.py.
POWER = bench_module("golden_power")
