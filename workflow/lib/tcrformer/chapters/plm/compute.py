"""The chapter's experiments, one function per rule, each returning its outputs by name:

plm_esm2     ESM-2's guesses at the configured positions, or why it is unavailable
plm_sceptr   SCEPTR's guesses at the configured positions
plm_scan     every CDR3 position with every available model: table and summary
plm_values   the flat values.json the golden check reads
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from tcrformer.chapters.plm import esm2, scan, sceptr_mlm
from tcrformer.chapters.plm.guess import guesses_of
from tcrformer.chapters.plm.segments import check_germline, segments
from tcrformer.chapters.plm.settings import Settings
from tcrformer.chapters.plm.values import chapter_values
from tcrformer.core.config import ConfigError

log = logging.getLogger("tcrformer")


def _esm2_model(settings: Settings):
    """(model, alphabet, weights) or raise Esm2Unavailable (ConfigError if required)."""
    try:
        return esm2.load(settings.esm2)
    except esm2.Esm2Unavailable as err:
        if settings.esm2.required:
            raise ConfigError(
                "plm.esm2.required", True, f"ESM-2 weights are unavailable: {err}"
            ) from None
        raise


def esm2_result(settings: Settings, positions: tuple[int, ...] | None = None) -> dict:
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


def sceptr_result(settings: Settings, positions: tuple[int, ...] | None = None) -> dict:
    model = sceptr_mlm.load_variant(settings.sceptr_variant)
    found = sceptr_mlm.guesses(model, settings.receptor, positions or settings.positions)
    return {"variant": settings.sceptr_variant, "guesses": [g.as_dict() for g in found]}


def scan_result(settings: Settings, esm2_available: bool) -> tuple[pd.DataFrame, dict]:
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
    return table, scan.scan_summary(table)


# The rules ------------------------------------------------------------------------------------


def plm_esm2(settings: Settings) -> dict:
    return {"esm2": esm2_result(settings)}


def plm_sceptr(settings: Settings) -> dict:
    return {"sceptr": sceptr_result(settings)}


def plm_scan(settings: Settings, esm2: Mapping) -> dict:
    table, summary = scan_result(settings, esm2_available=esm2["available"])
    return {"table": table, "summary": summary}


def plm_values(esm2: Mapping, sceptr: Mapping, summary: Mapping) -> dict:

    return {"values": chapter_values(esm2, sceptr, summary)}
