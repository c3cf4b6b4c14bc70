"""The data of Fig. 12, without torch: teacher forcing and the decoder's masks for one CDR3.

The decoder input is the target shifted one step right behind <bos>; the target ends with
<eos>. The causal mask lets position i see positions 0..i; the padding mask hides the
<pad> tokens that would fill the sequence up to the width of a batch. Both masks use the
seed's convention: True (1) = may attend.
"""

from __future__ import annotations

BOS, EOS, PAD = "<bos>", "<eos>", "<pad>"


def shifted_right(sequence: str) -> tuple[list[str], list[str]]:
    """(decoder input, target): <bos> + residues, and residues + <eos>."""
    residues = list(sequence)
    return [BOS, *residues], [*residues, EOS]


def causal_mask(size: int) -> list[list[bool]]:
    """Lower triangle: row i may attend to columns 0..i."""
    return [[col <= row for col in range(size)] for row in range(size)]


def padding_mask(tokens: list[str]) -> list[list[bool]]:
    """Every row may attend to every key that is not <pad>."""
    keep = [token != PAD for token in tokens]
    return [list(keep) for _ in tokens]


def combined_mask(causal: list[list[bool]], padding: list[list[bool]]) -> list[list[bool]]:
    return [
        [c and p for c, p in zip(cr, pr, strict=True)]
        for cr, pr in zip(causal, padding, strict=True)
    ]


def masks_for(sequence: str, pad_tokens: int) -> dict:
    """Everything Fig. 12 draws, as plain JSON-able data."""
    decoder_input, target = shifted_right(sequence)
    padded = decoder_input + [PAD] * pad_tokens
    causal = causal_mask(len(padded))
    padding = padding_mask(padded)
    return {
        "sequence": sequence,
        "decoder_input": decoder_input,
        "target": target,
        "padded_decoder_input": padded,
        "causal": causal,
        "padding": padding,
        "combined": combined_mask(causal, padding),
    }
