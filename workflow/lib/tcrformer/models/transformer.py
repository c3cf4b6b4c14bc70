"""The original encoder-decoder Transformer (Vaswani et al., 2017), module by module.

This is the reference implementation of the study notes (explainer section 10): Post-LN, ReLU
feed-forward, sinusoidal positions, written so that each class reads like the sentence of
the paper it implements. Shapes use B = batch, L = length, h = heads, d = d_model.

Masks are boolean with True = "may attend", False = "blocked", and broadcast against the
attention scores (B, h, Lq, Lk) once a head axis is added:
padding masks are (B, 1, Lk), causal masks (1, L, L), their combination (B, L, L).

State-dict contract (a fast implementation elsewhere loads the same keys):
    src_embed.weight, tgt_embed.weight,
    encoder.layers.{i}.{self_attn.{w_q,w_k,w_v,w_o}, ffn.{w_1,w_2}, norm1, norm2}.{weight,bias}
    decoder.layers.{i}.{self_attn.*, cross_attn.*, ffn.*, norm1, norm2, norm3}
    generator.{weight,bias}
The positional table is a non-persistent buffer, so it is not in the state dict.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tcrformer.models.positional import PE_BASE, sinusoidal_table

MASKED_SCORE = -1e9
"""Score given to blocked positions: finite, so a row with every key blocked stays finite
(its softmax is uniform) instead of turning into NaN as with -inf."""


# 1. Positional encoding ------------------------------------------------------------------


def positional_table(
    num_positions: int, d_model: int, dtype: torch.dtype = torch.float32
) -> Tensor:
    """The sinusoidal table (tcrformer.models.positional, float64) as a tensor of `dtype`:
    (num_positions, d_model), PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos."""
    return torch.from_numpy(sinusoidal_table(num_positions, d_model, PE_BASE)).to(dtype)


class PositionalEncoding(nn.Module):
    """x + PE[:L], then dropout. The table is fixed: a buffer, not a parameter."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000, add=True):
        super().__init__()
        self.dropout, self.add = nn.Dropout(dropout), add  # add=False: no positions (an arm)
        # Non-persistent: rebuilt from the formula, so never stored in a checkpoint.
        self.register_buffer("pe", positional_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor) -> Tensor:  # x: (B, L, d)
        return self.dropout(x + self.pe[: x.size(1)] if self.add else x)


# 2. Scaled dot-product attention ---------------------------------------------------------


def scaled_dot_product_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    dropout: nn.Module | None = None,
    scaled: bool = True,
) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V over any leading dims. mask: True/1 = may attend.
    scaled=False leaves out the 1/sqrt(d_k) (a claims arm: what the scaling is for).

    queries (..., Lq, d_k), keys (..., Lk, d_k), values (..., Lk, d_v)
    -> output (..., Lq, d_v), weights (..., Lq, Lk)
    """
    d_k = queries.size(-1)
    scores = queries @ keys.transpose(-2, -1) / (math.sqrt(d_k) if scaled else 1.0)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, MASKED_SCORE)
    weights = F.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)  # drop whole attention links while training
    return weights @ values, weights


# 3. Multi-head attention -----------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Project, split into h heads of d_k = d/h, attend in parallel, concatenate, project.

    The heads are a reshape, not a loop. The last attention weights (B, h, Lq, Lk) are kept
    in `.attn` for inspection.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.1, scaled: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
        self.num_heads, self.d_k, self.scaled = num_heads, d_model // num_heads, scaled
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.attn: Tensor | None = None

    def split_heads(self, x: Tensor) -> Tensor:  # (B, L, d) -> (B, h, L, d_k)
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:  # (B, h, L, d_k) -> (B, L, d)
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).contiguous().view(batch, length, self.num_heads * self.d_k)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        queries = self.split_heads(self.w_q(query))  # (B, h, Lq, d_k)
        keys = self.split_heads(self.w_k(key))  # (B, h, Lk, d_k)
        values = self.split_heads(self.w_v(value))  # (B, h, Lk, d_k)
        if mask is not None:
            mask = mask.unsqueeze(1)  # (B, 1, Lq or 1, Lk): the same mask for every head
        heads, weights = scaled_dot_product_attention(
            queries, keys, values, mask, self.dropout, self.scaled
        )
        self.attn = weights.detach()
        return self.w_o(self.merge_heads(heads))  # (B, Lq, d)


# 4. Position-wise feed-forward -----------------------------------------------------------


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = W_2 dropout(ReLU(W_1 x + b_1)) + b_2, each position on its own."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:  # (B, L, d) -> (B, L, d_ff) -> (B, L, d)
        return self.w_2(self.dropout(F.relu(self.w_1(x))))


# 5. Add & Norm ---------------------------------------------------------------------------


class LayerNorm(nn.Module):
    """weight * (x - mean) / sqrt(var + eps) + bias, over the last (feature) dimension."""

    def __init__(self, features: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))  # gamma
        self.bias = nn.Parameter(torch.zeros(features))  # beta
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class AddNorm(LayerNorm):
    """The residual wrapper of a sub-layer.

    Post-LN, the paper's:  LayerNorm(x + dropout(sublayer(x)))
    Pre-LN (norm_first):   x + dropout(sublayer(LayerNorm(x)))   (each stack then ends
                           in one more LayerNorm)

    It *is* the LayerNorm of its sub-layer (same parameters, weight and bias), plus the
    residual shortcut and the dropout on the sub-layer output.
    """

    def __init__(
        self, features: int, dropout: float = 0.1, eps: float = 1e-5, norm_first: bool = False
    ):
        super().__init__(features, eps)
        self.dropout, self.norm_first = nn.Dropout(dropout), norm_first

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(super().forward(x)))
        return super().forward(x + self.dropout(sublayer(x)))


# 6. Encoder and decoder layers -----------------------------------------------------------


class EncoderLayer(nn.Module):
    """Self-attention -> Add & Norm -> FFN -> Add & Norm."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, **options
    ):  # options: scaled (attention), norm_first (Add & Norm)
        super().__init__()
        scaled, norm_first = options.get("scaled", True), options.get("norm_first", False)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, scaled)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = AddNorm(d_model, dropout, norm_first=norm_first)
        self.norm2 = AddNorm(d_model, dropout, norm_first=norm_first)

    def forward(self, x: Tensor, src_mask: Tensor | None = None) -> Tensor:  # (B, Ls, d)
        x = self.norm1(x, lambda x: self.self_attn(x, x, x, src_mask))  # Q = K = V = x
        return self.norm2(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention -> Add & Norm -> cross-attention -> Add & Norm -> FFN -> Add & Norm."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, **options
    ):  # options: scaled (attention), norm_first (Add & Norm)
        super().__init__()
        scaled, norm_first = options.get("scaled", True), options.get("norm_first", False)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, scaled)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout, scaled)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = AddNorm(d_model, dropout, norm_first=norm_first)
        self.norm2 = AddNorm(d_model, dropout, norm_first=norm_first)
        self.norm3 = AddNorm(d_model, dropout, norm_first=norm_first)

    def forward(
        self,
        x: Tensor,  # (B, Lt, d)
        memory: Tensor,  # (B, Ls, d): the encoder output
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        x = self.norm1(x, lambda x: self.self_attn(x, x, x, tgt_mask))  # look back only
        x = self.norm2(x, lambda x: self.cross_attn(x, memory, memory, src_mask))  # Q dec, K/V enc
        return self.norm3(x, self.ffn)


# 7. Stacks -------------------------------------------------------------------------------


class Encoder(nn.Module):
    """N identical encoder layers (Post-LN: each layer already ends in a LayerNorm; Pre-LN:
    one more LayerNorm after the last layer, key `norm`)."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, num_layers: int, dropout: float = 0.1,
        **options,
    ):  # fmt: skip
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, **options) for _ in range(num_layers)
        )
        self.norm = LayerNorm(d_model) if options.get("norm_first") else None

    def forward(self, x: Tensor, src_mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    """N identical decoder layers, each reading the same encoder memory (Pre-LN: then one
    more LayerNorm, key `norm`)."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, num_layers: int, dropout: float = 0.1,
        **options,
    ):  # fmt: skip
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, **options) for _ in range(num_layers)
        )
        self.norm = LayerNorm(d_model) if options.get("norm_first") else None

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x) if self.norm is not None else x


# 8. The full model -----------------------------------------------------------------------


class EncoderDecoder(nn.Module):
    """Embed (x sqrt(d)) + positions -> encoder; embed + positions -> decoder -> generator."""

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        num_heads: int = 8,
        d_ff: int = 2048,
        num_layers: int = 6,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
        positions: bool = True,
        score_scale: bool = True,
        init: str = "xavier",
    ):
        """The paper's model by default. The switches, each one change (the claims' arms):
        norm_first (Pre-LN), positions=False (no positional encoding), score_scale=False
        (no 1/sqrt(d_k)), init (see `initialise`)."""
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.positions = PositionalEncoding(d_model, dropout, max_len, add=positions)
        options = {"scaled": score_scale, "norm_first": norm_first}
        self.encoder = Encoder(d_model, num_heads, d_ff, num_layers, dropout, **options)
        self.decoder = Decoder(d_model, num_heads, d_ff, num_layers, dropout, **options)
        self.generator = nn.Linear(d_model, tgt_vocab)  # scores over the target vocabulary
        initialise(self, init)

    def embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:  # (B, L) -> (B, L, d)
        return self.positions(embedding(tokens) * math.sqrt(self.d_model))

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:  # -> (B, Ls, d)
        return self.encoder(self.embed(self.src_embed, src), src_mask)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:  # -> logits (B, Lt, tgt_vocab)
        hidden = self.decoder(self.embed(self.tgt_embed, tgt_in), memory, src_mask, tgt_mask)
        return self.generator(hidden)

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:  # -> logits (B, Lt, tgt_vocab)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)


def initialise(model: nn.Module, init: str) -> None:
    """The weights' initial values, drawn from torch's global generator in parameter order:

    xavier          Xavier-uniform for every weight matrix (the paper's)
    linear_default  Xavier-uniform for the embeddings only; each linear layer keeps PyTorch's
                    own initialisation (Kaiming-uniform), so only the layers' scale changes
    default         PyTorch's own everywhere (the embeddings then N(0, 1))
    """
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; expected one of {', '.join(INITS)}")
    if init == "default":
        return
    for name, param in model.named_parameters():
        if param.dim() > 1 and (init == "xavier" or name.endswith("embed.weight")):
            nn.init.xavier_uniform_(param)


INITS = ("xavier", "linear_default", "default")


# 9. Masks, teacher forcing and greedy decoding -------------------------------------------


def padding_mask(seq: Tensor, pad_idx: int = 0) -> Tensor:
    """(B, L) token ids -> (B, 1, L) bool: False on padding keys."""
    return (seq != pad_idx).unsqueeze(1)


def causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """(1, size, size) bool lower triangle: row i may see positions 0..i only."""
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device)).unsqueeze(0)


def make_masks(src: Tensor, tgt_in: Tensor, pad_idx: int = 0) -> tuple[Tensor, Tensor]:
    """src_mask (B, 1, Ls) hides source padding; tgt_mask (B, Lt, Lt) adds the causal mask."""
    src_mask = padding_mask(src, pad_idx)
    tgt_mask = padding_mask(tgt_in, pad_idx) & causal_mask(tgt_in.size(1), tgt_in.device)
    return src_mask, tgt_mask


def decoder_io(tgt: Tensor) -> tuple[Tensor, Tensor]:
    """A target row <bos> y_1 .. y_L <eos> <pad>.. as the decoder's input (all but the last
    token) and what it must predict at each position (all but the first): (B, Lt) each."""
    return tgt[:, :-1], tgt[:, 1:]


def token_loss(logits: Tensor, targets: Tensor, label_smoothing: float, pad_idx: int) -> Tensor:
    """The training objective: the mean label-smoothed cross-entropy over the target tokens,
    padding ignored. logits (N, V), targets (N,); computed in float32 whatever the model's."""
    return F.cross_entropy(
        logits.float(), targets, ignore_index=pad_idx, label_smoothing=label_smoothing
    )


def shift_right(tgt: Tensor, bos: int) -> Tensor:
    """Teacher forcing input: <bos> followed by the target without its last token.

    (B, L) -> (B, L); the decoder reads tgt[:, :k] to predict tgt[:, k].
    """
    start = torch.full_like(tgt[:, :1], bos)
    return torch.cat([start, tgt[:, :-1]], dim=1)


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder, src: Tensor, max_len: int, bos: int, eos: int, pad_idx: int = 0
) -> Tensor:
    """Start from <bos>, append the most likely next token, stop when every row wrote <eos>.

    src (B, Ls) -> ys (B, 1 + n) with n <= max_len generated tokens; ys[:, 0] is <bos>.
    Rows that finished early keep generating until all have finished (trim at <eos>).
    """
    model.eval()
    src_mask = padding_mask(src, pad_idx)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), 1, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1), src.device))
        next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        ys = torch.cat([ys, next_token], dim=1)
        finished |= next_token == eos
        if finished.all():
            break
    return ys
