"""SCEPTR's masked-residue head on the full receptor, offline (weights ship in the wheel).

SCEPTR (Nagano et al., 2024) is a small BERT-style TCR model. It reads a paired receptor as
its six CDR loops: CDR1 and CDR2 looked up from the V genes (IMGT, via tidytcells), CDR3
as given. It was pre-trained with masked-residue modelling, and every variant keeps the
head that scores the 20 amino acids at a masked token (`Bert.get_mlm_token_predictions_for`).
The public `sceptr` API only exposes representations, so this module loads a variant the
way `sceptr._model_saves.load_variant` does (config.json + state_dict.pt, through
libtcrlm's ConfigReader; tensors only, `weights_only=True`) and calls that head itself.

Which variant: `SCEPTR_MLM_only` by default, the paired-chain model trained with the
masked-residue objective alone (no autocontrastive term), so its head is exactly the
"hide a residue and guess it" game of the explainer. The default `SCEPTR` trained the same head
jointly with a contrastive loss; `SCEPTR_finetuned`'s head was not trained further when its
encoder was fine-tuned. SCEPTR was trained with label smoothing 0.1, so even a certain
guess stays near p = 0.9.

A token is masked the way SCEPTR's training masked it: its amino-acid index becomes
MASK, while its position, loop length and loop index stay.
"""

from __future__ import annotations

import json
import logging
import warnings
from importlib import resources

from tcrformer import AMINO_ACIDS
from tcrformer.chapters.plm.guess import Guess, renormalized
from tcrformer.chapters.plm.settings import Receptor
from tcrformer.core.config import ConfigError

MODEL_SAVES = "sceptr._model_saves"
MODEL_NAME = "sceptr"
"""Prefix of the values keys and the `model` column of the scan."""


class SceptrMlm:
    """One SCEPTR variant: its tokeniser and its BERT with the masked-residue head."""

    def __init__(self, variant: str, tokeniser, bert):
        self.variant, self.tokeniser, self.bert = variant, tokeniser, bert.eval()


def variant_names() -> list[str]:
    """The variants shipped in the installed sceptr wheel."""
    saves = resources.files(MODEL_SAVES)
    return sorted(p.name for p in saves.iterdir() if (p / "config.json").is_file())


def load_variant(variant: str) -> SceptrMlm:
    import torch
    from libtcrlm.config_reader import ConfigReader

    if variant not in variant_names():
        raise ConfigError(
            "plm.sceptr.variant",
            variant,
            f"not a variant shipped with sceptr (available: {', '.join(variant_names())})",
        )
    folder = resources.files(MODEL_SAVES) / variant
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    with (folder / "state_dict.pt").open("rb") as handle:
        state_dict = torch.load(handle, map_location="cpu", weights_only=True)
    reader = ConfigReader(config)
    bert = reader.get_bert()
    bert.load_state_dict(state_dict)
    return SceptrMlm(variant, reader.get_tokeniser(), bert)


def _tcr(receptor: Receptor):
    """libtcrlm's Tcr for the receptor; a bad gene or CDR3 is a ConfigError naming its key."""
    from libtcrlm import schema
    from libtcrlm.schema import exception

    logging.getLogger("tidytcells").setLevel(logging.WARNING)  # one INFO line per junction
    keys = {"A": ("plm.tcr.trav", "plm.tcr.cdr3a"), "B": ("plm.tcr.trbv", "plm.chain.cdr3")}
    values = {"A": (receptor.trav, receptor.cdr3a), "B": (receptor.trbv, receptor.cdr3b)}
    try:
        tcr = schema.make_tcr_from_components(
            receptor.trav, receptor.cdr3a, receptor.trbv, receptor.cdr3b
        )
    except exception.BadV as err:
        raise ConfigError(
            keys[err.chain][0], values[err.chain][0], "not a functional human V gene SCEPTR knows"
        ) from None
    except exception.BadJunction as err:
        raise ConfigError(
            keys[err.chain][1], values[err.chain][1], "not a CDR3 junction (C...F/W) SCEPTR accepts"
        ) from None
    for chain, loop in (("A", "cdr1a_sequence"), ("B", "cdr1b_sequence")):
        try:
            _ = getattr(tcr, loop)  # looks the allele up in IMGT
        except ValueError:
            raise ConfigError(
                keys[chain][0], values[chain][0], "allele not known to IMGT (tidytcells)"
            ) from None
    return tcr


def cdr3b_token_rows(tokens, cdr3b: str) -> list[int]:
    """Rows of the tokenised receptor that hold the CDR3beta: the last loop of every variant
    that reads the beta chain. Checked residue by residue and by in-loop position."""
    from libtcrlm.tokeniser.token_indices import AminoAcidTokenIndex

    rows = list(range(len(tokens) - len(cdr3b), len(tokens)))
    for position, (row, residue) in enumerate(zip(rows, cdr3b, strict=True), start=1):
        same = tokens[row, 0] == AminoAcidTokenIndex[residue] and tokens[row, 1] == position
        if row < 1 or not same:
            raise ValueError("this SCEPTR variant does not read the CDR3beta")
    return rows


def guesses(model: SceptrMlm, receptor: Receptor, positions: tuple[int, ...]) -> list[Guess]:
    """SCEPTR's guess at each hidden CDR3beta position (one forward pass in all)."""
    import torch
    from libtcrlm.tokeniser.token_indices import DefaultTokenIndex

    tokens = model.tokeniser.tokenise(_tcr(receptor))
    try:
        rows = cdr3b_token_rows(tokens, receptor.cdr3b)
    except ValueError as err:
        raise ConfigError("plm.sceptr.variant", model.variant, str(err)) from None
    batch = tokens.repeat(len(positions), 1, 1)
    for i, position in enumerate(positions):
        batch[i, rows[position - 1], 0] = DefaultTokenIndex.MASK
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
        logits = model.bert.get_mlm_token_predictions_for(batch)
    _check_head_order()
    return [
        Guess(
            MODEL_NAME,
            position,
            receptor.cdr3b[position - 1],
            renormalized(logits[i, rows[position - 1]].double().tolist()),
        )
        for i, position in enumerate(positions)
    ]


def _check_head_order() -> None:
    """The head's 20 outputs follow libtcrlm's AminoAcid enum, which must be A..Y."""
    from libtcrlm.schema import AminoAcid

    if "".join(aa.name for aa in sorted(AminoAcid, key=lambda a: a.value)) != AMINO_ACIDS:
        raise RuntimeError("libtcrlm's amino-acid order changed; the head cannot be read")
