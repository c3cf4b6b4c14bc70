"""Rule train_reversal: train one recipe; a killed run resumes from its last checkpoint."""

import logging

from tcrformer.runner import run, torch_numerics


def main(smk):
    in_force = torch_numerics(smk)
    from tcrformer.io import write_csv, write_json
    from tcrformer.reversal.model import save_model
    from tcrformer.reversal.recipe import recipe_from_config
    from tcrformer.reversal.train import discard_checkpoints, train
    from tcrformer.reversal.values import losses_frame

    recipe = recipe_from_config(smk.config["reversal"], smk.params.recipe)
    log = logging.getLogger("tcrformer")
    log.info(
        "reversal: %s recipe, seed %d, %d steps, impl %s, checkpoints in %s",
        recipe.name,
        recipe.seed,
        recipe.steps,
        recipe.impl,
        smk.params.checkpoints,
    )
    trained = train(recipe, checkpoint_dir=smk.params.checkpoints)
    save_model(smk.output.model, trained.model, recipe.architecture())
    write_csv(smk.output.losses, losses_frame(trained.losses.numpy()))
    write_json(smk.output.numerics, in_force)
    write_json(
        smk.output.timing,
        {
            **trained.timing,
            "recipe": recipe.name,
            "fingerprint": recipe.fingerprint(),
        },
    )
    discard_checkpoints(smk.params.checkpoints, recipe)
    log.info("reversal: trained in %.1f s", trained.timing["train_seconds"])


run(main, snakemake)
