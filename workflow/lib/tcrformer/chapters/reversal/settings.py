"""The reversal chapter's section: its two recipes (training.recipe), checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.numerics import Numerics, check_ranks_fit, visible_gpus
from tcrformer.training.recipe import RECIPES, Recipe, recipe_from_config


@dataclass(frozen=True)
class Settings:
    """Both recipes of the chapter, checked."""

    recipes: dict[str, Recipe]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        section = config["reversal"]
        recipes = {name: recipe_from_config(section, name) for name in RECIPES}
        ranks = Numerics.from_config(config.get("numerics")).ranks
        for recipe in recipes.values():
            check_ranks_fit(ranks, recipe.device, visible_gpus(), f"{recipe.config_path}.device")
        return cls(recipes)
