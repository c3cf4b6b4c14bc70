"""The `claims:` config section (config/claims.yaml), typed; bad values name their key.

An arm is the paper's recipe (the `reversal:` keys) with the arm's keys changed, then
`claims.overrides` laid over every arm; each claim names its arms in its `test`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcrformer.core.config import ConfigError, section_error
from tcrformer.training.recipe import Recipe, recipe_from_config

KINDS = (
    "diverges", "pre_ln", "smoothing", "higher", "clipping", "init", "beam", "positions",
    "sqrt_dk", "relative", "distance", "importance", "quadratic", "rnn",
)  # fmt: skip
VERDICTS = ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE")
_ARM_KEYS = ("arm", "reference", "post", "post_no_warmup", "pre", "pre_no_warmup")


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str
    source: str
    experiment: str
    metric: str
    criterion: str
    test: dict[str, Any]

    def arms(self) -> list[str]:
        """The training arms this claim's test reads."""
        names = [self.test[k] for k in _ARM_KEYS if k in self.test]
        return names + list(self.test.get("arms", []))


@dataclass(frozen=True)
class Settings:
    seeds: tuple[int, ...]
    reduced: bool
    eval_n: int
    beam_width: int
    cost_lengths: tuple[int, ...]
    arms: dict[str, Recipe]  # name -> the arm's recipe (seed: the paper's; each job sets its own)
    claims: tuple[Claim, ...]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        section = config["claims"]
        overrides = dict(section.get("overrides") or {})
        arms = {}
        for name, changes in section["arms"].items():
            reversal = {**config["reversal"], **(changes or {}), **overrides}
            reversal["eval_n"] = section["eval_n"]
            error = section_error("reversal", reversal, f"claims.arms.{name}")
            if error is not None:
                raise error
            try:
                arms[name] = recipe_from_config(reversal)
            except ConfigError as err:
                raise ConfigError(f"claims.arms.{name}", changes, err.problem) from None
        claims = tuple(Claim(**raw) for raw in section["list"])
        settings = cls(
            seeds=tuple(section["seeds"]),
            reduced=bool(section["reduced"]),
            eval_n=section["eval_n"],
            beam_width=section["beam_width"],
            cost_lengths=tuple(section["cost_lengths"]),
            arms=arms,
            claims=claims,
        )
        settings.check()
        return settings

    def check(self) -> None:
        ids = [claim.id for claim in self.claims]
        if len(set(ids)) != len(ids):
            raise ConfigError("claims.list", ids, "a claim id is used twice")
        for i, claim in enumerate(self.claims):
            if claim.test.get("kind") not in KINDS:
                raise ConfigError(
                    f"claims.list[{i}].test.kind", claim.test.get("kind"),
                    f"must be one of {', '.join(KINDS)}",
                )  # fmt: skip
            for arm in claim.arms():
                if arm not in self.arms:
                    raise ConfigError(
                        f"claims.list[{i}].test", arm, f"names no arm of claims.arms ({claim.id})"
                    )
        if "baseline" not in self.arms:
            raise ConfigError("claims.arms", sorted(self.arms), "needs a baseline arm")

    def recipe(self, arm: str, seed: int) -> Recipe:
        """The arm's recipe for one seed, named after the arm (its folder)."""
        from tcrformer.training.recipe import with_overrides

        return with_overrides(self.arms[arm], seed=seed)

    def used_arms(self) -> list[str]:
        """The arms some claim reads, in the order of claims.arms."""
        used = {arm for claim in self.claims for arm in claim.arms()} | {"baseline"}
        return [arm for arm in self.arms if arm in used]

    def arms_needing(self, kind: str) -> list[str]:
        """The arms whose evaluation a claim of this kind extends (beam, ablation, init)."""
        return sorted({a for c in self.claims if c.test["kind"] == kind for a in c.arms()})
