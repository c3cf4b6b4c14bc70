"""The chapter's experiments as plain JSON-ready results, one function per rule:

esm2_result     ESM-2's guesses at the configured positions, or why it is unavailable
sceptr_result   SCEPTR's guesses at the configured positions
scan_result     every CDR3 position with every available model: table and summary
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from ..config import ConfigError
from . import esm2, scan, sceptr_mlm
from .guess import Guess
from .segments import check_germline, segments
from .settings import PlmSettings

log = logging.getLogger("tcrformer")


def _esm2_model(settings: PlmSettings):
    """(model, alphabet, weights) or raise Esm2Unavailable (ConfigError if required)."""
    try:
        return esm2.load(settings.esm2)
    except esm2.Esm2Unavailable as err:
        if settings.esm2.required:
            raise ConfigError(
                "plm.esm2.required", True, f"ESM-2 weights are unavailable: {err}"
            ) from None
        raise


def esm2_result(settings: PlmSettings, positions: tuple[int, ...] | None = None) -> dict:
    """ESM-2's guesses; {'available': False, 'reason': ...} when the weights cannot be had."""
    result = {"model": settings.esm2.model, "chain_length": settings.chain.length}
    try:
        model, alphabet, weights = _esm2_model(settings)
    except esm2.Esm2Unavailable as err:
        log.warning("ESM-2 unavailable: %s", err)
        return {**result, "available": False, "reason": str(err)}
    log.info("ESM-2 %s loaded from %s", settings.esm2.model, weights)
    found = esm2.guesses(model, alphabet, settings.chain, positions or settings.positions, "esm2")
    return {
        **result,
        "available": True,
        "weights": weights,
        "n_parameters": esm2.parameter_count(model),
        "guesses": [g.as_dict() for g in found],
    }


def sceptr_result(settings: PlmSettings, positions: tuple[int, ...] | None = None) -> dict:
    model = sceptr_mlm.load_variant(settings.sceptr_variant)
    found = sceptr_mlm.guesses(model, settings.receptor, positions or settings.positions)
    return {"variant": settings.sceptr_variant, "guesses": [g.as_dict() for g in found]}


def guesses_of(result: Mapping) -> list[Guess]:
    return [Guess.from_dict(g) for g in result.get("guesses", [])]


def scan_result(settings: PlmSettings, esm2_available: bool) -> tuple[pd.DataFrame, dict]:
    """Every CDR3 position hidden in turn with SCEPTR, and with ESM-2 when its weights exist."""
    check_germline(settings.germline)
    positions = scan.all_positions(settings.chain.cdr3)
    found = guesses_of(sceptr_result(settings, positions))
    if esm2_available:
        esm2_scan = esm2_result(settings, positions)
        if esm2_scan["available"]:
            found = guesses_of(esm2_scan) + found
    germline = settings.germline
    table = scan.table(found, segments(settings.chain.cdr3, germline.v_cdr3, germline.j_cdr3))
    return table, scan.summary(table)
