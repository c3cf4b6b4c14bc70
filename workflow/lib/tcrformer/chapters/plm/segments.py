"""Which gene encodes each CDR3 position: the V gene, the junction, or the J gene.

A CDR3beta starts with residues written in the V gene (for TRBV19*01: CASSI, from the
conserved cysteine on) and ends with residues written in the J gene (for TRBJ2-7*01:
SYEQYF, up to the conserved phenylalanine). What lies between was made at random by V(D)J
recombination (N additions, D-gene remnants): the junction. A position counts as
germline-encoded when the CDR3 agrees with the germline there, reading from each end
inwards; for CASSIRSSYEQYF that leaves the arginine (6) and the serine after it (7) in
the junction.

The germline ends are config values. `check_germline` compares them with the IMGT
reference sequences that tidytcells ships (no network): a typo or an unknown gene is a
ConfigError naming the key.
"""

from __future__ import annotations

import re

from tcrformer.chapters.plm.settings import Germline
from tcrformer.core.config import ConfigError

V_GENE, JUNCTION, J_GENE = "V-gene", "junction", "J-gene"
GERMLINE_SEGMENTS = (V_GENE, J_GENE)
J_MOTIF = re.compile(r"^(.*?[FW])G.G")  # the CDR3 ends at the F/W of the J gene's F/W-G-x-G


def _common_prefix_length(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def segments(cdr3: str, v_cdr3: str, j_cdr3: str) -> list[str]:
    """The segment of each CDR3 position, in order (the V gene wins where the two overlap)."""
    n_v = _common_prefix_length(cdr3, v_cdr3)
    n_j = min(_common_prefix_length(cdr3[::-1], j_cdr3[::-1]), len(cdr3) - n_v)
    return [V_GENE] * n_v + [JUNCTION] * (len(cdr3) - n_v - n_j) + [J_GENE] * n_j


def is_germline(segment: str) -> bool:
    return segment in GERMLINE_SEGMENTS


def _imgt_sequences(key: str, gene: str) -> dict:
    import tidytcells

    try:
        return tidytcells.tr.get_aa_sequence(gene, species="homosapiens")
    except ValueError:
        raise ConfigError(key, gene, "not a human TR gene allele known to IMGT") from None


def imgt_v_cdr3(gene: str, key: str = "plm.germline.v_gene") -> str:
    """The CDR3 residues the V gene encodes: its V-REGION from the conserved cysteine on."""
    parts = _imgt_sequences(key, gene)
    framework = "".join(
        parts.get(p, "") for p in ("FR1-IMGT", "CDR1-IMGT", "FR2-IMGT", "CDR2-IMGT", "FR3-IMGT")
    )
    region = parts.get("V-REGION", "")
    if not framework.endswith("C") or not region.startswith(framework):
        raise ConfigError(key, gene, "not a V gene with a conserved cysteine in IMGT")
    return "C" + region[len(framework) :]


def imgt_j_cdr3(gene: str, key: str = "plm.germline.j_gene") -> str:
    """The CDR3 residues the J gene encodes: its J-REGION up to the conserved F/W."""
    match = J_MOTIF.match(_imgt_sequences(key, gene).get("J-REGION", ""))
    if match is None:
        raise ConfigError(key, gene, "not a J gene with the F/W-G-x-G motif in IMGT")
    return match.group(1)


def check_germline(germline: Germline) -> None:
    """The configured ends must be (possibly trimmed) germline ends of the configured genes."""
    v_imgt, j_imgt = imgt_v_cdr3(germline.v_gene), imgt_j_cdr3(germline.j_gene)
    if not v_imgt.startswith(germline.v_cdr3):
        raise ConfigError(
            "plm.germline.v_cdr3",
            germline.v_cdr3,
            f"not the start of the CDR3 part of {germline.v_gene} in IMGT ({v_imgt})",
        )
    if not j_imgt.endswith(germline.j_cdr3):
        raise ConfigError(
            "plm.germline.j_cdr3",
            germline.j_cdr3,
            f"not the end of the CDR3 part of {germline.j_gene} in IMGT ({j_imgt})",
        )
