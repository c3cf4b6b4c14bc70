"""The `plm` config section as typed values; every bad value is a ConfigError naming its key.

The schema (workflow/schemas/config.schema.yaml) rejects the values of the wrong type or
shape before a rule runs; these are the chapter's own checks (a CDR3 from C to F or W,
positions inside it), run by the config check too, so a bad value is one line at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tcrformer import AMINO_ACIDS
from tcrformer.core.config import ConfigError

TOP_K = 4
"""How many best guesses are reported (the explainer prints four)."""


@dataclass(frozen=True)
class Chain:
    """The TCRbeta chain ESM-2 reads: V-gene part, then the CDR3, then the rest of the J gene."""

    v_gene_part: str
    cdr3: str
    j_end: str

    @property
    def sequence(self) -> str:
        return self.v_gene_part + self.cdr3 + self.j_end

    @property
    def length(self) -> int:
        return len(self.sequence)

    def index_of(self, position: int) -> int:
        """0-based index in `sequence` of the 1-based CDR3 position."""
        return len(self.v_gene_part) + position - 1


@dataclass(frozen=True)
class Receptor:
    """The paired receptor SCEPTR reads; the CDR3beta is the chain's CDR3 (one source)."""

    trav: str
    cdr3a: str
    trbv: str
    cdr3b: str


@dataclass(frozen=True)
class Germline:
    """The CDR3 residues the germline genes encode: the V gene's start, the J gene's end."""

    v_gene: str
    v_cdr3: str
    j_gene: str
    j_cdr3: str


@dataclass(frozen=True)
class Esm2Options:
    model: str
    checkpoint: str | None
    required: bool
    download: bool = True


@dataclass(frozen=True)
class Settings:
    chain: Chain
    positions: tuple[int, ...]
    receptor: Receptor
    germline: Germline
    esm2: Esm2Options
    sceptr_variant: str

    @classmethod
    def from_config(cls, config: Mapping) -> Settings:
        """Typed settings from the config's `plm` section (defaults already filled in)."""
        plm = config["plm"]
        chain = _chain(plm["chain"])
        return cls(
            chain=chain,
            positions=check_positions("plm.positions", plm["positions"], chain.cdr3),
            receptor=_receptor(plm["tcr"], chain.cdr3),
            germline=_germline(plm["germline"], chain.cdr3),
            esm2=_esm2(plm["esm2"]),
            sceptr_variant=plm["sceptr"]["variant"],
        )


def check_amino_acids(key: str, sequence: object) -> str:
    """`sequence` if it is a non-empty string of the 20 standard amino acids."""
    if not isinstance(sequence, str) or not sequence:
        raise ConfigError(key, sequence, "must be a non-empty amino-acid sequence")
    for i, letter in enumerate(sequence, start=1):
        if letter not in AMINO_ACIDS:
            raise ConfigError(
                key,
                sequence,
                f"letter {letter!r} at position {i} is not one of the 20 standard amino acids",
            )
    return sequence


def check_junction(key: str, cdr3: object) -> str:
    """A CDR3 as IMGT writes it: from the conserved cysteine to the conserved F or W."""
    check_amino_acids(key, cdr3)
    if cdr3[0] != "C" or cdr3[-1] not in "FW":
        raise ConfigError(key, cdr3, "must run from the conserved C to the conserved F or W")
    return cdr3


def check_positions(key: str, positions: Sequence[object], cdr3: str) -> tuple[int, ...]:
    """1-based CDR3 positions, each inside the CDR3."""
    if isinstance(positions, str | bytes) or not isinstance(positions, Sequence) or not positions:
        raise ConfigError(key, positions, "must be a non-empty list of 1-based CDR3 positions")
    for i, position in enumerate(positions):
        if isinstance(position, bool) or not isinstance(position, int):
            raise ConfigError(f"{key}[{i}]", position, "must be an integer")
        if not 1 <= position <= len(cdr3):
            raise ConfigError(
                f"{key}[{i}]", position, f"outside plm.chain.cdr3 (length {len(cdr3)}, 1-based)"
            )
    return tuple(positions)


def _chain(section: Mapping) -> Chain:
    return Chain(
        v_gene_part=check_amino_acids("plm.chain.v_gene_part", section["v_gene_part"]),
        cdr3=check_junction("plm.chain.cdr3", section["cdr3"]),
        j_end=check_amino_acids("plm.chain.j_end", section["j_end"]),
    )


def _receptor(section: Mapping, cdr3b: str) -> Receptor:
    return Receptor(
        trav=section["trav"],
        cdr3a=check_junction("plm.tcr.cdr3a", section["cdr3a"]),
        trbv=section["trbv"],
        cdr3b=cdr3b,
    )


def _germline(section: Mapping, cdr3: str) -> Germline:
    """The germline-encoded ends of `cdr3`: v_cdr3 must begin it and j_cdr3 end it, and
    they may not overlap (else the scan would call germline residues junctional)."""
    germline = Germline(
        v_gene=section["v_gene"],
        v_cdr3=check_amino_acids("plm.germline.v_cdr3", section["v_cdr3"]),
        j_gene=section["j_gene"],
        j_cdr3=check_amino_acids("plm.germline.j_cdr3", section["j_cdr3"]),
    )
    if not cdr3.startswith(germline.v_cdr3):
        raise ConfigError("plm.germline.v_cdr3", germline.v_cdr3, f"does not begin the CDR3 {cdr3}")
    if not cdr3.endswith(germline.j_cdr3):
        raise ConfigError("plm.germline.j_cdr3", germline.j_cdr3, f"does not end the CDR3 {cdr3}")
    if len(germline.v_cdr3) + len(germline.j_cdr3) > len(cdr3):
        overlap = f"overlaps plm.germline.v_cdr3 = {germline.v_cdr3} in the CDR3 {cdr3}"
        raise ConfigError("plm.germline.j_cdr3", germline.j_cdr3, overlap)
    return germline


def regression_path(checkpoint: Path) -> Path:
    """Where fair-esm looks for the contact-regression weights of `checkpoint`."""
    return checkpoint.with_name(f"{checkpoint.stem}-contact-regression.pt")


def check_checkpoint(checkpoint: str) -> None:
    """A configured checkpoint must be there, with its contact-regression file beside it,
    before any rule runs: one line naming the key and the path."""
    key, path = "plm.esm2.checkpoint", Path(checkpoint)
    if not path.is_file():
        raise ConfigError(key, checkpoint, f"file not found ({path})")
    if not path.stem.startswith("esm2"):
        raise ConfigError(
            key, checkpoint, "file name must start with 'esm2' (fair-esm picks the model by name)"
        )
    regression = regression_path(path)
    if not regression.is_file():
        raise ConfigError(
            key, checkpoint, f"its contact-regression file {regression} is not there beside it"
        )


def _esm2(section: Mapping) -> Esm2Options:
    checkpoint = section.get("checkpoint")
    if checkpoint:
        check_checkpoint(str(checkpoint))
    return Esm2Options(
        model=section["model"],
        checkpoint=str(checkpoint) if checkpoint else None,
        required=bool(section.get("required", False)),
        download=bool(section.get("download", True)),
    )
