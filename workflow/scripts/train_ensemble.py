"""Rule train_ensemble: one group of an ensemble's seeds, each seed's weights and losses.

A group of one seed trains exactly as the single run of that seed (and resumes from its
checkpoint after a kill); a larger group trains as one batched computation.
"""

import logging

from tcrformer.runner import run, torch_numerics


def main(smk):
    in_force = torch_numerics(smk)
    import pandas as pd

    from tcrformer.io import write_csv, write_json
    from tcrformer.reversal.batched import train_batched
    from tcrformer.reversal.ensemble import EnsembleSettings
    from tcrformer.reversal.model import save_models
    from tcrformer.reversal.train import discard_checkpoints, train
    from tcrformer.reversal.values import losses_frame

    settings = EnsembleSettings.from_config(smk.config)
    seeds = list(smk.params.seeds)
    recipes = [settings.recipe_for(smk.config["reversal"], seed) for seed in seeds]
    log = logging.getLogger("tcrformer")
    log.info("ensemble: %s recipe, seeds %s, %d steps", settings.recipe, seeds, recipes[0].steps)
    if len(seeds) == 1:
        trained = [train(recipes[0], checkpoint_dir=smk.params.checkpoints)]
    else:
        trained = train_batched(recipes[0], seeds)
    models = {seed: t.model for seed, t in zip(seeds, trained, strict=True)}
    save_models(smk.output.models, models, recipes[0].architecture())
    frames = [losses_frame(t.losses.numpy(), seed) for seed, t in zip(seeds, trained, strict=True)]
    write_csv(smk.output.losses, pd.concat(frames, ignore_index=True))
    write_json(smk.output.numerics, in_force)
    write_json(smk.output.timing, {**trained[0].timing, "seeds": seeds})
    if len(seeds) == 1:
        discard_checkpoints(smk.params.checkpoints, recipes[0])
    log.info("ensemble: seeds %s trained in %.1f s", seeds, trained[0].timing["train_seconds"])


run(main, snakemake)
