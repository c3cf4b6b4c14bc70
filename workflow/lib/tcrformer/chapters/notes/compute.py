"""Chapter notes (explainer sections 10.1-10.8 and page 2's 'In code'): every number of it.

Each function takes the chapter's settings and returns a flat dict whose keys are the
golden keys (pe.*, parity.*, params.*, shapes.*, myth.*, page2.*); `notes_values`, the
rule, gathers them all with the table and breakdown the figures draw. Nothing is typed in:
every number is computed here, and the parameter formulas are checked against the modules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from tcrformer.chapters.notes.settings import Settings
from tcrformer.models import counting
from tcrformer.models.positional import period, sinusoidal_table
from tcrformer.models.transformer import (
    EncoderDecoder,
    LayerNorm,
    MultiHeadAttention,
    causal_mask,
    make_masks,
    padding_mask,
    positional_table,
)

PAD = 0
"""Padding id of the shape check's random batch (its tokens are drawn from 1..vocab-1)."""


def dims_of(notes: Settings) -> counting.ModelDims:
    return counting.ModelDims(
        d_model=notes.d_model,
        d_ff=notes.d_ff,
        num_layers=notes.num_layers,
        src_vocab=notes.src_vocab,
        tgt_vocab=notes.tgt_vocab,
    )


def base_model(notes: Settings) -> EncoderDecoder:
    """The paper's base model at the config's sizes, initialised from `notes.seed`."""
    torch.manual_seed(notes.seed)
    return EncoderDecoder(
        notes.src_vocab,
        notes.tgt_vocab,
        d_model=notes.d_model,
        num_heads=notes.num_heads,
        d_ff=notes.d_ff,
        num_layers=notes.num_layers,
        dropout=notes.dropout,
        max_len=notes.max_len,
    )


# 10.2 Positional encoding -----------------------------------------------------------------


def pe_table(notes: Settings) -> np.ndarray:
    """The sinusoidal table for the figure: (pe.table_positions, d_model), float64."""
    return sinusoidal_table(notes.pe.table_positions, notes.d_model)


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def pe_values(notes: Settings) -> dict[str, Any]:
    d, pe = notes.d_model, notes.pe
    probe, n_dims = pe.probe_position, pe.probe_dims
    furthest = max([probe, *(p for pair in pe.cosine_pairs for p in pair)])
    table = sinusoidal_table(furthest + 1, d)  # (P, d)
    values: dict[str, Any] = {
        "pe.d_model": d,
        f"pe.pos{probe}_dims0_{n_dims - 1}": table[probe, :n_dims].tolist(),
    }
    for a, b in pe.cosine_pairs:
        values[f"pe.cos_pos{a}_pos{b}"] = cosine(table[a], table[b])
    for dim in pe.period_dims:
        values[f"pe.period_dim{dim}"] = round(period(dim, d), 1)  # printed to 0.1 position
    return values


# 10.8 Parity with PyTorch's own modules ---------------------------------------------------


def layernorm_parity(notes: Settings) -> float:
    """max |our LayerNorm - nn.LayerNorm|, same weights copied in, on a random batch.

    The weights are the modules' own start (scale 1, shift 0), as in the explainer: random scales
    would grow the outputs and with them the float32 rounding gap, not test anything new.
    """
    d, parity = notes.d_model, notes.parity
    ours = LayerNorm(d)
    theirs = nn.LayerNorm(d, eps=ours.eps)
    theirs.load_state_dict(ours.state_dict())  # same names: weight, bias
    generator = torch.Generator().manual_seed(parity.seed)
    x = torch.randn(parity.batch, parity.length, d, generator=generator)
    with torch.no_grad():
        return (ours(x) - theirs(x)).abs().max().item()


def torch_attention_like(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding our weights: in_proj = [W_Q; W_K; W_V], out = W_O."""
    d_model = ours.num_heads * ours.d_k
    theirs = nn.MultiheadAttention(d_model, ours.num_heads, dropout=0.0, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)
    return theirs.eval()


def mha_causal_parity(notes: Settings) -> float:
    """max |our MultiHeadAttention - nn.MultiheadAttention|, causal self-attention."""
    d, parity = notes.d_model, notes.parity
    torch.manual_seed(parity.seed)
    ours = MultiHeadAttention(d, notes.num_heads, dropout=0.0).eval()
    theirs = torch_attention_like(ours)
    x = torch.randn(parity.batch, parity.length, d)  # (B, L, d)
    allowed = causal_mask(parity.length)  # (1, L, L), True = may attend
    with torch.no_grad():
        out_ours = ours(x, x, x, allowed)
        # PyTorch's boolean attn_mask means the opposite: True = blocked.
        out_theirs, _ = theirs(x, x, x, attn_mask=~allowed[0], need_weights=False)
    return (out_ours - out_theirs).abs().max().item()


def parity_values(notes: Settings) -> dict[str, float]:
    return {
        "parity.layernorm_max_abs_diff": layernorm_parity(notes),
        "parity.mha_causal_max_abs_diff": mha_causal_parity(notes),
    }


# 10.8 Parameter counts --------------------------------------------------------------------


def param_values(notes: Settings, model: EncoderDecoder) -> dict[str, int]:
    """The closed-form counts, after checking them part by part against the modules."""
    formulas = counting.formula_counts(dims_of(notes))
    counting.check_counts_agree(formulas, counting.module_counts(model))
    return {
        "params.total": formulas["total"],
        "params.encoder_layer": formulas["encoder_layer"],
        "params.decoder_layer": formulas["decoder_layer"],
        "params.attention_sublayer": formulas["attention_sublayer"],
        "params.ffn_layer": formulas["ffn_layer"],
        # The golden key names the paper's 6 + 6 layers; the count follows the config.
        "params.all_layers_6_plus_6": formulas["all_layers"],
        "params.embeddings_and_output": formulas["embeddings_and_output"],
    }


def myth_counts(notes: Settings, model: EncoderDecoder) -> dict[str, Any]:
    """Attention 4d^2 vs FFN 8d^2 weights per block, checked against one encoder layer."""
    d, d_ff = notes.d_model, notes.d_ff
    layer = model.encoder.layers[0]
    closed_form = counting.block_weights(d, d_ff)
    from_modules = {
        "attention": counting.count_weights(layer.self_attn),
        "ffn": counting.count_weights(layer.ffn),
    }
    counting.check_counts_agree(closed_form, from_modules)
    return {f"myth.{k}": v for k, v in counting.myth_values(d, d_ff).items()}


# 10.8 Shapes through the base model -------------------------------------------------------


def shape_values(notes: Settings, model: EncoderDecoder) -> dict[str, list[int]]:
    """Push one random batch through the model: mask and logit shapes."""
    shapes = notes.shapes
    generator = torch.Generator().manual_seed(notes.seed)
    src = torch.randint(1, notes.src_vocab, (shapes.batch, shapes.src_len), generator=generator)
    tgt_in = torch.randint(1, notes.tgt_vocab, (shapes.batch, shapes.tgt_len), generator=generator)
    src_mask, tgt_mask = make_masks(src, tgt_in, PAD)
    model.eval()
    with torch.no_grad():
        logits = model(src, tgt_in, src_mask, tgt_mask)
    return {
        "shapes.src_mask": list(src_mask.shape),
        "shapes.tgt_mask": list(tgt_mask.shape),
        "shapes.logits": list(logits.shape),
    }


# Page 2, 'In code': one nn.TransformerEncoderLayer -----------------------------------------


def page2_values(notes: Settings) -> dict[str, list[int] | int]:
    page2 = notes.page2
    seq_len, d = page2.seq_len, page2.d_model
    torch.manual_seed(page2.seed)
    pe = positional_table(seq_len, d)  # (L, d): the same sin/cos formula as page 2
    layer = nn.TransformerEncoderLayer(
        d_model=d,
        nhead=page2.nhead,
        dim_feedforward=page2.dim_feedforward,
        batch_first=True,
    )
    x = torch.randn(1, seq_len, d) + pe  # tokens + positions
    with torch.no_grad():
        out = layer(x)
    block_params = counting.count_parameters(layer)
    closed_form = counting.encoder_layer_params(d, page2.dim_feedforward)
    counting.check_counts_agree({"page2_block": closed_form}, {"page2_block": block_params})
    return {
        "page2.pe_shape": list(pe.shape),
        "page2.encoder_output_shape": list(out.shape),
        "page2.block_params": block_params,
    }


# Fig. 12: teacher forcing and the decoder's masks, for the receptor ---------------------------

BOS_TOKEN, EOS_TOKEN, PAD_TOKEN = "<bos>", "<eos>", "<pad>"


def teacher_forcing(sequence: str, pad_tokens: int) -> dict[str, Any]:
    """The decoder input (<bos> + residues, padded), the target (residues + <eos>) and the
    causal, padding and combined masks of the decoder input (True = may attend), made by
    the model's own mask functions."""
    decoder_input = [BOS_TOKEN, *sequence] + [PAD_TOKEN] * pad_tokens
    ids = torch.tensor([[PAD if token == PAD_TOKEN else 1 for token in decoder_input]])
    length = ids.size(1)
    causal = causal_mask(length)[0]  # (L, L)
    padding = padding_mask(ids, PAD)[0].expand(length, length)  # (L, L): the same every row
    return {
        "sequence": sequence,
        "decoder_input": [BOS_TOKEN, *sequence],
        "target": [*sequence, EOS_TOKEN],
        "padded_decoder_input": decoder_input,
        "causal": causal.tolist(),
        "padding": padding.tolist(),
        "combined": (causal & padding).tolist(),
    }


# The rule ------------------------------------------------------------------------------------


def notes_values(notes: Settings) -> dict[str, Any]:
    """Rule notes_values: every value of the chapter under its golden key, the positional
    table, the parameter breakdown and Fig. 12's masks, by output name."""
    model = base_model(notes)
    values = (
        pe_values(notes)
        | parity_values(notes)
        | param_values(notes, model)
        | shape_values(notes, model)
        | myth_counts(notes, model)
        | page2_values(notes)
    )
    breakdown = counting.breakdown_table(dims_of(notes))
    return {
        "values": values,
        "pe_table": pe_table(notes),
        "breakdown_csv": breakdown,
        "breakdown_md": counting.breakdown_markdown(breakdown),
        "figure_data": teacher_forcing(notes.masks_sequence, notes.pad_tokens),
    }
