"""The flat values.json of the chapter: the keys the golden check compares.

Keys are built from the configured positions and the true residue there, so the explainer's two
experiments read `esm2.p_C_at_cdr3_pos1` and `esm2.p_R_at_cdr3_pos6`. When ESM-2's weights
are unavailable, `esm2.unavailable` holds the reason and no ESM-2 probability is written;
the golden check then reports the missing `esm2.*` keys as SKIPPED with that reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tcrformer.chapters.plm.guess import Guess, guesses_of
from tcrformer.chapters.plm.settings import TOP_K


def guess_values(prefix: str, guesses: Iterable[Guess]) -> dict:
    values = {}
    for g in guesses:
        values[f"{prefix}.p_{g.true_residue}_at_cdr3_pos{g.position}"] = g.p_true
        values[f"{prefix}.top{TOP_K}_at_cdr3_pos{g.position}"] = g.top()
    return values


def esm2_values(result: Mapping) -> dict:
    values = {"esm2.model": result["model"], "esm2.chain_length": result["chain_length"]}
    if not result["available"]:
        return {**values, "esm2.unavailable": result["reason"]}
    return {**values, **guess_values("esm2", guesses_of(result))}


def sceptr_values(result: Mapping) -> dict:
    return {"sceptr.model_variant": result["variant"], **guess_values("sceptr", guesses_of(result))}


def scan_values(summary: Mapping[str, Mapping]) -> dict:
    return {
        f"{model}.scan.{name}": value
        for model, numbers in summary.items()
        for name, value in numbers.items()
    }


def chapter_values(esm2_result: Mapping, sceptr_result: Mapping, summary: Mapping) -> dict:
    return {**esm2_values(esm2_result), **sceptr_values(sceptr_result), **scan_values(summary)}
