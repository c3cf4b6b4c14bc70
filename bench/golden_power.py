"""Power of the golden check: how often it FAILs a run whose training code is broken.

    snakemake --cores 2 power --config run=power     # results/power/power/
    python -m tools.golden power results/power/power

A band wide enough never to fail a correct run could also never catch a broken one. Each
fault of the plan (config/golden/v4/faults.yaml: its name, what it breaks, its predicted
shift, the seeds) is a change to the code, made here alone, in the one process that trains
and evaluates (never a config option, so a user cannot switch it on): a wrong constant of
the recipe (RECIPE_FAULTS) or a patch of the library (CODE_FAULTS). The plan's `none` is the
control, the library as it is, trained on the same seeds so that each fault's shift is
paired by seed. The rule `golden_power` (workflow/rules/bench.smk) trains the paper recipe
with one fault for one seed through the chapter's own compute functions, writing the
reversal chapter's values.json. Offline, once every run of the plan is done, `tools.golden
power` judges each run with the committed bands and counts how often each fault FAILs.
"""

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

CONTROL = "none"  # the library as it is

# Faults that are a wrong constant of the recipe: these fields of the run's recipe changed,
# for its training and its evaluation alike.
RECIPE_FAULTS = {
    "warmup_350": {"warmup": 350},
    "warmup_300": {"warmup": 300},
    "lr_x0_9": {"lr_scale": 0.9},
    "lr_x0_8": {"lr_scale": 0.8},
    "dropout_0_09": {"dropout": 0.09},
    "dropout_0_05": {"dropout": 0.05},
    "dropout_0_12": {"dropout": 0.12},
    "clip_0_5": {"grad_clip": 0.5},
    "smoothing_0_05": {"label_smoothing": 0.05},
    "beta2_0_999": {"beta2": 0.999},
}


def positions_base_1000() -> list:
    """The sinusoidal table built with base 1,000 instead of 10,000. positional_table reads
    transformer's PE_BASE whenever a model is built, so the reference model, the fast one
    (whose weights the hand-written step trains) and the model decoding is handed all see it."""
    from tcrformer.models import transformer

    return [mock.patch.object(transformer, "PE_BASE", 1000.0)]


def decay_exponent_0_55() -> list:
    """After warm-up the Noam rate decays as t^-0.55 instead of t^-0.5; the warm-up is the
    recipe's, and the two branches still meet at t = warmup:
        lr(t) = d_model^-0.5 * min(t^-0.55 * warmup^0.05, t * warmup^-1.5)
    (the paper's noam schedule only: the flat and warm-up-free variants are not patched)."""
    from tcrformer.training import schedule

    def rate(self, index: int) -> float:  # LambdaLR counts from 0; step t = index + 1
        t = index + 1
        decay, warm = t**-0.55 * self.warmup**0.05, t * self.warmup**-1.5
        return self.scale * (self.d_model**-0.5 * min(decay, warm))

    return [mock.patch.object(schedule.NoamSchedule, "__call__", rate)]


CODE_FAULTS = {  # fault -> the patches that put it into the library
    "positions_base_1000": positions_base_1000,
    "decay_exponent_0_55": decay_exponent_0_55,
}
FAULTS = (CONTROL, *RECIPE_FAULTS, *CODE_FAULTS)  # every fault the harness injects


@contextlib.contextmanager
def training_fault(fault: str) -> Iterator[Callable]:
    """The library with `fault` in it, within the block. Yields what a recipe becomes under
    the fault: a recipe fault's fields changed, any other recipe as it is."""
    from tcrformer.training.recipe import with_overrides

    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; the plan's are in config/golden/v4/faults.yaml")
    changes = RECIPE_FAULTS.get(fault, {})
    with contextlib.ExitStack() as stack:
        for patch in CODE_FAULTS[fault]() if fault in CODE_FAULTS else ():
            stack.enter_context(patch)
        yield lambda recipe: with_overrides(recipe, **changes) if changes else recipe


TRAINED = ("model", "losses", "numerics", "timing")  # what train_reversal writes


def run_one(fault: str, recipe, outputs, numerics: dict) -> dict:
    """Train and evaluate one seed with the fault, through the chapter's compute functions.
    `outputs` maps TRAINED's names to paths; the checkpoints go beside them."""
    from tcrformer.chapters.reversal.compute import evaluate_reversal, train_reversal
    from tcrformer.core.io import write_named

    checkpoints = Path(outputs["model"]).parent / "checkpoints"
    with training_fault(fault) as faulty:
        recipe = faulty(recipe)
        write_named(outputs, train_reversal(recipe, checkpoints, numerics))
        results = evaluate_reversal(recipe, str(outputs["model"]), str(outputs["losses"]))
    return results["values"]


def main(smk) -> None:
    from tcrformer.core.io import write_json
    from tcrformer.core.power import FAULTS_FILE, read_power_plan
    from tcrformer.core.runner import torch_numerics

    numerics = torch_numerics(smk)
    from tcrformer.training.recipe import Recipe, with_overrides

    recipe = with_overrides(Recipe.from_params(smk.params.recipe), seed=int(smk.wildcards.seed))
    outputs = {name: smk.output[name] for name in TRAINED}
    values = run_one(smk.wildcards.fault, recipe, outputs, numerics)
    plan = read_power_plan(Path(smk.scriptdir).resolve().parent / "config" / FAULTS_FILE)
    fault = smk.wildcards.fault
    what = {"fault": fault, "breaks": plan.faults[fault].breaks, "seed": recipe.seed}
    write_json(smk.output.values, {**what, **values})


if "snakemake" in globals():
    from tcrformer.core.runner import run

    run(main, globals()["snakemake"])
