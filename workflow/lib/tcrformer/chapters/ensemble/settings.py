"""The `ensemble:` config section, typed; every bad value is a ConfigError naming its key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.config import ConfigError
from tcrformer.training.recipe import RECIPES, Recipe, recipe_from_config, with_overrides


@dataclass(frozen=True)
class Settings:
    """The `ensemble:` config section."""

    recipe: str
    seeds: tuple[int, ...]
    max_seeds: int
    group_size: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        section = config.get("ensemble") or {}
        settings = cls(
            recipe=section.get("recipe", "reversal"),
            seeds=tuple(section.get("seeds") or ()),
            max_seeds=section.get("max_seeds", 256),
            group_size=section.get("group_size", 1),
        )
        if not settings.seeds:
            raise ConfigError("ensemble.seeds", list(settings.seeds), "must not be empty")
        if any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in settings.seeds):
            bad = next(s for s in settings.seeds if not isinstance(s, int) or s < 0)
            raise ConfigError("ensemble.seeds", bad, "seeds are integers >= 0")
        if len(set(settings.seeds)) != len(settings.seeds):
            raise ConfigError("ensemble.seeds", list(settings.seeds), "a seed is listed twice")
        if len(settings.seeds) > settings.max_seeds:
            raise ConfigError(
                "ensemble.seeds",
                f"{len(settings.seeds)} seeds",
                f"more than ensemble.max_seeds = {settings.max_seeds}",
            )
        if settings.recipe not in RECIPES:
            raise ConfigError(
                "ensemble.recipe", settings.recipe, f"must be one of {', '.join(RECIPES)}"
            )
        return settings

    def groups(self) -> list[tuple[int, ...]]:
        """The seeds in groups of group_size, in the order listed; one job trains a group."""
        k = self.group_size
        return [self.seeds[i : i + k] for i in range(0, len(self.seeds), k)]

    def group_of(self, seed: int) -> int:
        return next(i for i, group in enumerate(self.groups()) if seed in group)

    def recipe_for(self, reversal: Mapping[str, Any], seed: int) -> Recipe:
        """The recipe as the reversal keys define it, with this seed."""
        return with_overrides(recipe_from_config(reversal, self.recipe), seed=seed)
