"""The reversal chapter's section: its two recipes (training.recipe), checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.training.recipe import RECIPES, Recipe, recipe_from_config


@dataclass(frozen=True)
class Settings:
    """Both recipes of the chapter, checked."""

    recipes: dict[str, Recipe]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        section = config["reversal"]
        return cls({name: recipe_from_config(section, name) for name in RECIPES})
