"""The `ensemble:` config section, typed. The schema has checked every key and filled in its
defaults; what is left is the check that involves two keys, a ConfigError naming its key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.config import ConfigError
from tcrformer.training.recipe import Recipe, recipe_from_config, with_overrides


@dataclass(frozen=True)
class Settings:
    """The `ensemble:` config section: one training job per seed, one worker each."""

    recipe: str
    seeds: tuple[int, ...]
    max_seeds: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        section = config["ensemble"]
        settings = cls(section["recipe"], tuple(section["seeds"]), section["max_seeds"])
        recipe_from_config(config["reversal"], settings.recipe)
        if len(settings.seeds) > settings.max_seeds:
            raise ConfigError(
                "ensemble.seeds",
                f"{len(settings.seeds)} seeds",
                f"more than ensemble.max_seeds = {settings.max_seeds}",
            )
        return settings

    def recipe_for(self, reversal: Mapping[str, Any], seed: int) -> Recipe:
        """The recipe as the reversal keys define it, with this seed."""
        return with_overrides(recipe_from_config(reversal, self.recipe), seed=seed)
