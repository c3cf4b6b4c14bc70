"""Where the weights of the encoder-decoder sit: closed-form counts and module counts.

Every linear layer d_in -> d_out holds d_in d_out weights and d_out biases; a LayerNorm
holds a scale and a shift per feature. From that (explainer section 10.8):

    attention sub-layer   4 d^2 + 4 d              (W_Q, W_K, W_V, W_O, each d x d + bias)
    feed-forward layer    2 d d_ff + d_ff + d      (d -> d_ff -> d)
    LayerNorm             2 d
    encoder layer         attention + FFN + 2 LayerNorms
    decoder layer         2 attentions + FFN + 3 LayerNorms
    embeddings + output   (V_src + V_tgt) d + V_tgt (d + 1)

`formula_counts` evaluates these; `module_counts` sums the parameters of a built
EncoderDecoder part by part, under the same names, so the two can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:  # the closed forms need no torch; the module counts take torch modules
    from torch import nn


@dataclass(frozen=True)
class ModelDims:
    """The sizes that fix the parameter count (heads and dropout do not change it)."""

    d_model: int
    d_ff: int
    num_layers: int
    src_vocab: int
    tgt_vocab: int


# Closed forms ------------------------------------------------------------------------------


def attention_params(d: int) -> int:
    return 4 * d * d + 4 * d


def ffn_params(d: int, d_ff: int) -> int:
    return 2 * d * d_ff + d_ff + d


def layer_norm_params(d: int) -> int:
    return 2 * d


def encoder_layer_params(d: int, d_ff: int) -> int:
    return attention_params(d) + ffn_params(d, d_ff) + 2 * layer_norm_params(d)


def decoder_layer_params(d: int, d_ff: int) -> int:
    return 2 * attention_params(d) + ffn_params(d, d_ff) + 3 * layer_norm_params(d)


def stacks_params(d: int, d_ff: int, num_layers: int) -> int:
    return num_layers * (encoder_layer_params(d, d_ff) + decoder_layer_params(d, d_ff))


def embeddings_and_output_params(d: int, src_vocab: int, tgt_vocab: int) -> int:
    return (src_vocab + tgt_vocab) * d + tgt_vocab * (d + 1)


def formula_counts(dims: ModelDims) -> dict[str, int]:
    d, d_ff = dims.d_model, dims.d_ff
    counts = {
        "attention_sublayer": attention_params(d),
        "ffn_layer": ffn_params(d, d_ff),
        "layer_norm": layer_norm_params(d),
        "encoder_layer": encoder_layer_params(d, d_ff),
        "decoder_layer": decoder_layer_params(d, d_ff),
        "all_layers": stacks_params(d, d_ff, dims.num_layers),
        "embeddings_and_output": embeddings_and_output_params(d, dims.src_vocab, dims.tgt_vocab),
    }
    counts["total"] = counts["all_layers"] + counts["embeddings_and_output"]
    return counts


# Counts from modules -----------------------------------------------------------------------


def count_parameters(*modules: nn.Module) -> int:
    return sum(p.numel() for module in modules for p in module.parameters())


def count_weights(*modules: nn.Module) -> int:
    """Matrix entries only: parameters with more than one dimension (no biases, no norms)."""
    return sum(p.numel() for module in modules for p in module.parameters() if p.dim() > 1)


def module_counts(model: nn.Module) -> dict[str, int]:
    """The parts of `formula_counts`, summed from a tcrformer.transformer.EncoderDecoder."""
    encoder_layer, decoder_layer = model.encoder.layers[0], model.decoder.layers[0]
    return {
        "attention_sublayer": count_parameters(encoder_layer.self_attn),
        "ffn_layer": count_parameters(encoder_layer.ffn),
        "layer_norm": count_parameters(encoder_layer.norm1),
        "encoder_layer": count_parameters(encoder_layer),
        "decoder_layer": count_parameters(decoder_layer),
        "all_layers": count_parameters(model.encoder, model.decoder),
        "embeddings_and_output": count_parameters(
            model.src_embed, model.tgt_embed, model.generator
        ),
        "total": count_parameters(model),
    }


def check_counts_agree(formulas: dict[str, int], modules: dict[str, int]) -> None:
    """Raise if any part counted from the modules differs from its closed form."""
    wrong = {k: (formulas[k], modules[k]) for k in formulas if formulas[k] != modules.get(k)}
    if wrong:
        detail = ", ".join(f"{k}: formula {f:,} vs modules {m:,}" for k, (f, m) in wrong.items())
        raise AssertionError(f"parameter formulas disagree with the modules: {detail}")


# The breakdown table -----------------------------------------------------------------------


def breakdown_table(dims: ModelDims) -> pd.DataFrame:
    """Seed section 10.8's table: key (the count's name in formula_counts: what readers of
    the table look rows up by), part, formula, count, and the share of the total."""
    counts = formula_counts(dims)
    n = dims.num_layers
    rows = [
        ("attention_sublayer", "Attention, per sub-layer", "4d^2 + 4d"),
        ("ffn_layer", "Feed-forward, per layer", "2 d d_ff + d_ff + d"),
        ("layer_norm", "LayerNorm", "2d"),
        ("encoder_layer", "Encoder layer", "1 attention + 1 FFN + 2 LayerNorms"),
        ("decoder_layer", "Decoder layer", "2 attentions + 1 FFN + 3 LayerNorms"),
        ("all_layers", f"{n} + {n} layers", f"{n} (encoder layer + decoder layer)"),
        (
            "embeddings_and_output",
            "Embeddings and output projection",
            f"({dims.src_vocab} + {dims.tgt_vocab}) d + {dims.tgt_vocab} (d + 1)",
        ),
        ("total", "Total", "layers + embeddings and output"),
    ]
    table = pd.DataFrame(rows, columns=["key", "part", "formula"])
    table["count"] = [counts[key] for key in table["key"]]
    table["share"] = table["count"] / counts["total"]
    return table


def breakdown_markdown(table: pd.DataFrame) -> str:
    """The breakdown as a Markdown table, counts with thousands separators."""
    lines = ["| Part | Weights | Count | Share |", "|---|---|---:|---:|"]
    for row in table.itertuples(index=False):
        lines.append(f"| {row.part} | {row.formula} | {row.count:,} | {row.share:.1%} |")
    return "\n".join(lines) + "\n"


# The myth: "most of the weights are in attention" ------------------------------------------


def block_weights(d: int, d_ff: int) -> dict[str, int]:
    """Weight-matrix entries of one block, biases and norms left out (the 4d^2 vs 8d^2 view)."""
    return {"attention": 4 * d * d, "ffn": 2 * d * d_ff}


def as_multiple_of_d_squared(weights: int, d: int) -> str:
    """4 * d * d -> '4d^2'."""
    return f"{weights / (d * d):g}d^2"


def myth_values(d: int, d_ff: int) -> dict[str, object]:
    weights = block_weights(d, d_ff)
    return {
        "attention_weights_per_block": as_multiple_of_d_squared(weights["attention"], d),
        "ffn_weights_per_block": as_multiple_of_d_squared(weights["ffn"], d),
        "ffn_share_of_block": weights["ffn"] / (weights["attention"] + weights["ffn"]),
    }
