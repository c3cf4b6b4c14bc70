"""The `claims:` config section (workflow/claims/config/claims.yaml), typed; bad values name
their key.

An arm is the paper's recipe (the `reversal:` keys) with the arm's keys changed, then
`claims.overrides` laid over every arm; each claim names its arms in its `test`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tcrclaims.kinds import (
    BENCHMARKS,
    DIRECTIONS,
    KINDS,
    PRECONDITIONS,
    TESTS,
    VERDICTS,
)
from tcrclaims.metrics import METRICS, extras_for
from tcrformer.core.config import ConfigError, section_error
from tcrformer.training.recipe import Recipe, recipe_from_config, with_overrides

JOB_FOLDER = "arms/{arm}/seed{seed}"  # one arm's seed, under results/<run>/claims/
# The seeds each claim needs (tools/claims_power.py), from the repository's root.
POWER_PLAN = "workflow/claims/config/claims_power.yaml"
TRAINED = ("experiment", "check")  # the kinds of claim whose arms are trained
# The speed benchmark trains no arm and times native kernels: portable mode would run the
# GRU on MKL's slower COMPATIBLE branch against the Transformer's own kernels.
BENCHMARK_NUMERICS = {"mode": "native"}
ARM_KEYS = ("arm", "reference")  # test keys that name arms (a name or a list of names)


@dataclass(frozen=True)
class Claim:
    id: str
    kind: str  # experiment | analytic | check | benchmark
    claim: str
    source: str
    experiment: str
    metric: str
    criterion: str
    test: dict[str, Any]
    revision: str = ""  # what this version changed, and why
    predicted: str = ""  # the verdict expected before the run (kinds.VERDICTS), registered
    precondition: tuple[dict[str, Any], ...] = ()  # manipulation checks (kinds.PRECONDITIONS)

    def arms(self) -> list[str]:
        """The training arms this claim's test and its manipulation checks read."""
        names: list[str] = []
        for key in ARM_KEYS:
            value = self.test.get(key)
            names += [value] if isinstance(value, str) else list(value or [])
        for check in self.precondition:
            names += [check["arm"]] if "arm" in check else list(check.get("arms", []))
        return list(dict.fromkeys(names))

    def metrics(self) -> list[str]:
        """The per-arm metrics the claim tests, reports beside its test, or checks its
        situation with."""
        named = (self.test.get("metric"),
                 *(end.get("metric") for end in self.test.get("co_primary", ())),
                 *self.test.get("report", ()),
                 *(check.get("metric") for check in self.precondition))  # fmt: skip
        return list(dict.fromkeys(m for m in named if m))

    def digest(self, recipes: Mapping[str, Recipe], context: Mapping[str, Any] | None = None):
        """What a pre-registration fixes: the claim (all but its revision note), the recipes
        of the arms it reads (what trains them, but the seed and where it runs), and the
        run's settings that decide it (`context`, Settings.decision_context)."""
        fixed = {k: v for k, v in asdict(self).items() if k != "revision"}
        fixed["arms"] = {arm: _experiment(recipes[arm]) for arm in self.arms()}
        if context:
            fixed["context"] = dict(context)
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()


def _clamped(claim: Claim, arms: Mapping[str, Recipe], reduced: bool) -> Claim:
    """A reduced run's claim, its snapshot steps clamped to the shortest of its arms' steps
    (the shortened arms stop before the registered steps); any other claim as written."""
    steps = claim.test.get("snapshots")
    if not reduced or not isinstance(steps, list) or not claim.arms():
        return claim
    last = min(arms[a].steps for a in claim.arms() if a in arms)
    test = {**claim.test, "snapshots": sorted({min(s, last) for s in steps})}
    return Claim(**{**asdict(claim), "test": test})


# What a registration leaves out of an arm's recipe: its seed and name (each job's own), and
# where and how the same recipe runs: the device, the logging, and the chunks a batch is
# split into for the workers (each job's training_time.json records the recipe it ran).
NOT_THE_EXPERIMENT = ("seed", "name", "device", "checkpoint_every", "log_every", "chunks")


def _experiment(recipe: Recipe) -> dict[str, Any]:
    return {k: v for k, v in recipe.training_params().items() if k not in NOT_THE_EXPERIMENT}


@dataclass(frozen=True)
class Settings:
    seeds: tuple[int, ...]
    check_seeds: tuple[int, ...]
    reduced: bool
    alpha: float
    eval_n: int
    beam_width: int
    eval_seed_per_seed: int | None  # seed s evaluated on eval_seed this + s (None: the arm's)
    draws: int
    cost_lengths: tuple[int, ...]
    speed: dict[str, int]  # the recurrent speed benchmark: length, threads, steps, blocks
    arms: dict[str, Recipe]  # name -> the arm's recipe (seed: the paper's; each job sets its own)
    claims: tuple[Claim, ...]
    version: int = 4  # the claims protocol (docs/claims.md)
    reviews: tuple[str, ...] = ()  # the reviews of the design, recorded by the registration

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        section = config["claims"]
        overrides = dict(section.get("overrides") or {})
        arms = {}
        for name, changes in section["arms"].items():
            changed = {**(changes or {}), **overrides, "eval_n": section["eval_n"]}
            reversal = {**config["reversal"], **changed}
            # The schema checks each reversal key on its own (no required keys, no key that
            # depends on another), and the section itself is valid: the changes are enough.
            error = section_error("reversal", changed, f"claims.arms.{name}")
            if error is not None:
                raise error
            try:
                arms[name] = recipe_from_config(reversal)
            except ConfigError as err:
                raise ConfigError(f"claims.arms.{name}", changes, err.problem) from None
        settings = cls(
            seeds=tuple(section["seeds"]),
            check_seeds=tuple(section.get("check_seeds") or section["seeds"]),
            reduced=bool(section["reduced"]),
            alpha=float(section.get("alpha", 0.05)),
            eval_n=section["eval_n"],
            beam_width=section["beam_width"],
            eval_seed_per_seed=section.get("eval_seed_per_seed"),
            draws=int(section.get("draws", 200)),
            cost_lengths=tuple(section["cost_lengths"]),
            speed=dict(section["speed"]),
            arms=arms,
            version=int(section.get("version", 4)),
            reviews=tuple(section.get("reviews") or ()),
            claims=tuple(
                _clamped(
                    Claim(**{**raw, "precondition": tuple(raw.get("precondition") or ())}),
                    arms,
                    bool(section["reduced"]),
                )  # fmt: skip
                for raw in section["list"]
            ),
        )
        settings.check()
        return settings

    def check(self) -> None:
        ids = [claim.id for claim in self.claims]
        if len(set(ids)) != len(ids):
            raise ConfigError("claims.list", ids, "a claim id is used twice")
        for i, claim in enumerate(self.claims):
            where = f"claims.list[{i}]"
            if claim.kind not in KINDS:
                raise ConfigError(f"{where}.kind", claim.kind, f"must be one of {', '.join(KINDS)}")
            effect = claim.test.get("effect")
            if effect not in TESTS[claim.kind]:
                allowed = ", ".join(TESTS[claim.kind])
                raise ConfigError(
                    f"{where}.test.effect", effect, f"a {claim.kind} tests one of {allowed}"
                )
            if claim.predicted and claim.predicted not in VERDICTS[claim.kind]:
                raise ConfigError(f"{where}.predicted", claim.predicted,
                                  f"must be one of {', '.join(VERDICTS[claim.kind])}")  # fmt: skip
            if claim.kind == "experiment" and claim.test.get("direction") not in DIRECTIONS:
                raise ConfigError(
                    f"{where}.test.direction", claim.test.get("direction"),
                    f"must be one of {', '.join(DIRECTIONS)}",
                )  # fmt: skip
            self._check_endpoints(claim, where)
            self._check_seeds_and_steps(claim, where)
            for arm in claim.arms():
                if arm not in self.arms:
                    raise ConfigError(
                        f"{where}.test", arm, f"names no arm of claims.arms ({claim.id})"
                    )
            for j, check in enumerate(claim.precondition):
                if check.get("check") not in PRECONDITIONS:
                    raise ConfigError(
                        f"{where}.precondition[{j}].check", check.get("check"),
                        f"must be one of {', '.join(PRECONDITIONS)}",
                    )  # fmt: skip
        if not set(self.check_seeds) <= set(self.seeds):
            problem = "must be among claims.seeds (a check pairs its arms by seed)"
            raise ConfigError("claims.check_seeds", list(self.check_seeds), problem)
        if "baseline" not in self.arms:
            raise ConfigError("claims.arms", sorted(self.arms), "needs a baseline arm")
        for arm in self.arms:
            self.excess_strings_of(arm)  # one count of strings an arm

    def _check_seeds_and_steps(self, claim: Claim, where: str) -> None:
        """A test's seed count is at least 2; a by-step metric needs the test's snapshots."""
        count = claim.test.get("seeds")
        if count is not None and (not isinstance(count, int) or count < 2):
            raise ConfigError(f"{where}.test.seeds", count, "a count of seeds, at least 2")
        stepped = [m for m in claim.metrics() if m in METRICS and METRICS[m].at_steps]
        steps = claim.test.get("snapshots")
        if stepped and not steps:
            problem = f"{stepped[0]} is measured at weight snapshots: name their steps"
            raise ConfigError(f"{where}.test.snapshots", steps, problem)
        if steps is not None and (
            not isinstance(steps, list) or not all(isinstance(x, int) and x > 0 for x in steps)
        ):
            raise ConfigError(f"{where}.test.snapshots", steps, "a list of training steps")

    def _check_endpoints(self, claim: Claim, where: str) -> None:
        """A co-primary endpoint is a metric with a margin and a one-sided direction, on an
        experiment's continuous test; `excess_strings`, a count of strings."""
        ends = claim.test.get("co_primary")
        if ends is not None:
            problem = "a list of {metric, margin, direction (greater or less)}"
            if claim.kind != "experiment" or claim.test.get("effect") == "paired_binary":
                problem = "an experiment's continuous test only (not paired_binary)"
                raise ConfigError(f"{where}.test.co_primary", ends, problem)
            if not isinstance(ends, list) or not ends:
                raise ConfigError(f"{where}.test.co_primary", ends, problem)
            for end in ends:
                if (not isinstance(end, dict) or set(end) != {"metric", "margin", "direction"}
                        or end["direction"] not in ("greater", "less")
                        or not isinstance(end["margin"], int | float)
                        or isinstance(end["margin"], bool)):  # fmt: skip
                    raise ConfigError(f"{where}.test.co_primary", end, problem)
        strings = claim.test.get("excess_strings")
        if strings is not None and (not isinstance(strings, int) or isinstance(strings, bool)
                                    or strings < 1):  # fmt: skip
            raise ConfigError(f"{where}.test.excess_strings", strings, "a count of strings")

    def recipe(self, arm: str, seed: int) -> Recipe:
        """The arm's recipe for one seed, named after the arm (its folder); with
        eval_seed_per_seed, evaluated on that seed's own held-out strings."""
        changes: dict[str, Any] = {"seed": seed}
        if self.eval_seed_per_seed is not None:
            changes["eval_seed"] = self.eval_seed_per_seed + seed
        snapshots = self.snapshots_of(arm)
        if snapshots:  # absent otherwise: the arm's params stay as they were
            changes["snapshot_steps"] = snapshots
        return with_overrides(self.arms[arm], **changes)

    def snapshots_of(self, arm: str) -> tuple[int, ...]:
        """The steps whose weights the arm's training keeps: those the test of any claim
        reading it names (`snapshots`), in order."""
        steps = {s for c in self.claims if arm in c.arms() for s in c.test.get("snapshots", ())}
        return tuple(sorted(steps))

    def used_arms(self) -> list[str]:
        """The arms some claim trains (a benchmark times its arms' recipes, and trains none),
        and the baseline, in the order of claims.arms."""
        used = {*self.tested_arms(), "baseline"}
        return [arm for arm in self.arms if arm in used]

    def tested_arms(self) -> list[str]:
        """The arms some claim trains and reads (the baseline only if one does), in the
        order of claims.arms: what a pilot trains (target claims_arms)."""
        read = {arm for c in self.claims if c.kind in TRAINED for arm in c.arms()}
        return [arm for arm in self.arms if arm in read]

    def excess_strings_of(self, arm: str) -> int | None:
        """The held-out strings the arm's excess is measured on: the `excess_strings` its
        claims' tests name (one count an arm), or None (training.measures.EXCESS_STRINGS)."""
        named = {c.test["excess_strings"] for c in self.claims
                 if arm in c.arms() and "excess_strings" in c.test}  # fmt: skip
        if len(named) > 1:
            problem = f"the claims reading arm {arm} name different counts"
            raise ConfigError("claims.list[].test.excess_strings", sorted(named), problem)
        return named.pop() if named else None

    def seeds_of(self, arm: str) -> tuple[int, ...]:
        """An arm that only checks read runs the check seeds; every other arm the leading
        claims.seeds, as many as the claims reading it ask (their test's `seeds`; default
        all)."""
        readers = [c for c in self.claims if arm in c.arms() and c.kind in TRAINED]
        if readers and all(c.kind == "check" for c in readers):
            return self.check_seeds
        counts = [c.test.get("seeds", len(self.seeds)) for c in readers if c.kind != "check"]
        return self.seeds[: max(counts, default=len(self.seeds))]

    def claim(self, claim_id: str) -> Claim:
        """The claim of this id."""
        for claim in self.claims:
            if claim.id == claim_id:
                return claim
        raise ConfigError("claims.list", claim_id, "no claim has this id")

    def arms_reading(self, metric: str) -> list[str]:
        """The arms of the claims that test this metric or report it beside their own."""
        return sorted({a for c in self.claims if metric in c.metrics() for a in c.arms()})

    def extras_of(self, arm: str) -> dict[str, tuple[int, ...]]:
        """What this arm's evaluation adds (metrics.EXTRAS), each at the snapshot steps named
        by the claims reading the arm whose metrics need it."""
        return extras_for(
            (m, c.test.get("snapshots", ())) for c in self.claims if arm in c.arms()
            for m in c.metrics()
        )  # fmt: skip

    def benchmarked_by(self, rule: str) -> list[str]:
        """The claims whose test reads a job of this benchmark rule of their own
        (kinds.BENCHMARKS), by id."""
        return [c.id for c in self.claims if BENCHMARKS.get(c.test.get("effect")) == rule]

    def decision_context(self, claim: Claim) -> dict[str, Any]:
        """The settings outside the claim that decide its verdict: the family's alpha, the
        evaluation (strings, their seeds, the beam's width) and the seeds each arm trains."""
        context = {
            "alpha": self.alpha, "eval_n": self.eval_n, "beam_width": self.beam_width,
            "eval_seed_per_seed": self.eval_seed_per_seed,
            "seeds": {arm: list(self.seeds_of(arm)) for arm in claim.arms()},
        }  # fmt: skip
        effect = claim.test.get("effect")
        context.update({"draws": self.draws} if effect == "draws_share" else {})
        context.update({"cost_lengths": list(self.cost_lengths)} if effect == "quadratic" else {})
        if effect == "speed":
            context.update(speed=self.speed, numerics=BENCHMARK_NUMERICS)
        return context

    def benchmark_numerics(self, numerics: Mapping[str, Any]) -> dict[str, Any]:
        """The run's numerics as the speed benchmark times in them (BENCHMARK_NUMERICS)."""
        return {**numerics, **BENCHMARK_NUMERICS}

    def registration(self) -> dict[str, str]:
        """{claim id: digest}: what a registration before training fixes."""
        return {c.id: c.digest(self.arms, self.decision_context(c)) for c in self.claims}
