"""The recurrent baselines: a GRU encoder-decoder without attention (Sutskever et al., 2014),
and its control with attention (Luong et al., 2015).

The encoder reads the source one token at a time and hands the decoder a single summary,
its final hidden state; the decoder starts from that state and writes the output one token
at a time. Per layer and step (Cho et al., 2014), with x_t the input and h_t the state:

    r_t = sigmoid(W_r x_t + U_r h_{t-1} + b_r)                       reset gate
    z_t = sigmoid(W_z x_t + U_z h_{t-1} + b_z)                       update gate
    n_t = tanh(W_n x_t + b_n + r_t * (U_n h_{t-1} + b'_n))           candidate
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}

Every step waits for the one before (no parallelism over positions), and the whole source
must pass through the fixed-size h: the two weaknesses attention removes. Each GRU layer of
width H holds 3H(H + H) weights and 2 x 3H biases, so with N layers in each of the two GRUs

    parameters = 2 N (6 H^2 + 6 H) + (V_src + V_tgt) H + V_tgt (H + 1)

(embeddings, then the output projection). The methods match tcrformer.models.transformer's
EncoderDecoder, so greedy_decode and tcrformer.models.decoding.beam_search run it as is;
the memory is the encoder state (N, B, H) rather than (B, Ls, d), with its batch on dim 1.

The control, GruAttentionEncoderDecoder: the same two GRUs, but the decoder also reads every
encoder position, Luong et al.'s (2015) global attention with the "general" score and no
input feeding. With hbar_s the top encoder layer's output at source position s and h_t the
top decoder layer's output at target position t:

    score(t, s) = h_t^T W_a hbar_s              (-inf at the source's padding)
    a_t = softmax_s score(t, s)
    c_t = sum_s a_t(s) hbar_s                   context
    htilde_t = tanh(W_c [c_t; h_t])             the attentional hidden state
    logits_t = W_g htilde_t + b_g               (the generator, as above)

W_a (H x H) and W_c (H x 2H) have no biases, so the control holds 3 H^2 more:

    parameters = 2 N (6 H^2 + 6 H) + 3 H^2 + (V_src + V_tgt) H + V_tgt (H + 1)

Only the bottleneck differs: with attention the decoder is no longer limited to what the
final state holds. Its memory is an AttentionMemory (state, per-position outputs, mask).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

PAD = 0  # source rows are padded with id 0 at the end
ATTENTION_SQUARES = 3  # H^2 weights the attention adds: W_a (H x H) and W_c (H x 2H)


class GruEncoderDecoder(nn.Module):
    """Embed -> encoder GRU -> final state -> decoder GRU -> generator. No attention."""

    def __init__(
        self, src_vocab: int, tgt_vocab: int, hidden: int, num_layers: int = 2, dropout: float = 0.1
    ):
        super().__init__()
        between_layers = dropout if num_layers > 1 else 0.0  # nn.GRU warns otherwise
        self.src_embed = nn.Embedding(src_vocab, hidden)
        self.tgt_embed = nn.Embedding(tgt_vocab, hidden)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.GRU(hidden, hidden, num_layers, batch_first=True, dropout=between_layers)
        self.decoder = nn.GRU(hidden, hidden, num_layers, batch_first=True, dropout=between_layers)
        self.generator = nn.Linear(hidden, tgt_vocab)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """src (B, Ls) -> the encoder's last state (N, B, H), read at each row's true length.

        Lengths count the non-padding ids (at least 1); src_mask is accepted and ignored.
        """
        lengths = (src != PAD).sum(dim=1).clamp(min=1).cpu()  # (B,)
        embedded = self.dropout(self.src_embed(src))  # (B, Ls, H)
        packed = nn.utils.rnn.pack_padded_sequence(
            embedded, lengths, batch_first=True, enforce_sorted=False
        )
        _, state = self.encoder(packed)  # (N, B, H), in the rows' original order
        return state

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:  # -> logits (B, Lt, tgt_vocab)
        """Run the decoder from state `memory` (N, B, H) over tgt_in (B, Lt).

        The masks are accepted for interface compatibility and ignored: the recurrence is
        causal by construction, and the source is seen only through `memory`.
        """
        outputs, _ = self.decoder(self.dropout(self.tgt_embed(tgt_in)), memory)  # (B, Lt, H)
        return self.generator(outputs)

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:  # -> logits (B, Lt, tgt_vocab)
        return self.decode(tgt_in, self.encode(src, src_mask))

    @staticmethod
    def repeat_memory(memory: Tensor, times: int) -> Tensor:
        """(N, B, H) -> (N, B times, H): each row's state `times` times in a row (beam search)."""
        return memory.repeat_interleave(times, dim=1)


class AttentionMemory(NamedTuple):
    """What GruAttentionEncoderDecoder's encoder hands its decoder."""

    state: Tensor  # (N, B, H) the encoder's last state, the decoder's first
    outputs: Tensor  # (B, Ls, H) the top layer's output at every position; 0 at padding
    keep: Tensor  # (B, Ls) bool: True on the positions read (the row's true length)


class GruAttentionEncoderDecoder(GruEncoderDecoder):
    """GruEncoderDecoder plus Luong attention over the encoder's outputs (module docstring).

    The modules of GruEncoderDecoder come first, built in its order, then W_a and W_c.
    """

    def __init__(
        self, src_vocab: int, tgt_vocab: int, hidden: int, num_layers: int = 2, dropout: float = 0.1
    ):
        super().__init__(src_vocab, tgt_vocab, hidden, num_layers, dropout)
        self.score = nn.Linear(hidden, hidden, bias=False)  # W_a^T, applied to h_t
        self.combine = nn.Linear(2 * hidden, hidden, bias=False)  # W_c over [c_t; h_t]

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> AttentionMemory:
        """src (B, Ls) -> the last state and every position's output, read at the true length.

        Lengths count the non-padding ids (at least 1); src_mask is accepted and ignored
        (padding is at the row ends, so `keep` is the same mask).
        """
        lengths = (src != PAD).sum(dim=1).clamp(min=1)  # (B,)
        embedded = self.dropout(self.src_embed(src))  # (B, Ls, H)
        packed = nn.utils.rnn.pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        packed_outputs, state = self.encoder(packed)  # state (N, B, H), original row order
        outputs, _ = nn.utils.rnn.pad_packed_sequence(
            packed_outputs, batch_first=True, total_length=src.size(1)
        )  # (B, Ls, H)
        keep = torch.arange(src.size(1), device=src.device) < lengths[:, None]  # (B, Ls)
        return AttentionMemory(state, outputs, keep)

    def decode(
        self,
        tgt_in: Tensor,
        memory: AttentionMemory,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:  # -> logits (B, Lt, tgt_vocab)
        """Run the decoder from memory.state over tgt_in (B, Lt), attending at every step.

        The masks are accepted and ignored: the recurrence is causal by construction, and
        the source's padding is memory.keep.
        """
        outputs, _ = self.decoder(self.dropout(self.tgt_embed(tgt_in)), memory.state)
        context = self.attention_weights(outputs, memory) @ memory.outputs  # c_t (B, Lt, H)
        attentional = torch.tanh(self.combine(torch.cat([context, outputs], dim=-1)))
        return self.generator(attentional)

    def attention_weights(self, queries: Tensor, memory: AttentionMemory) -> Tensor:
        """The attention a_t (B, Lt, Ls) of decoder outputs h_t (B, Lt, H) over the source."""
        scores = self.score(queries) @ memory.outputs.transpose(1, 2)  # (B, Lt, Ls)
        scores = scores.masked_fill(~memory.keep.unsqueeze(1), float("-inf"))
        return scores.softmax(dim=-1)

    @staticmethod
    def repeat_memory(memory: AttentionMemory, times: int) -> AttentionMemory:
        """Each row's memory `times` times in a row (beam search): state on dim 1, rest dim 0."""
        return AttentionMemory(
            memory.state.repeat_interleave(times, dim=1),
            memory.outputs.repeat_interleave(times, dim=0),
            memory.keep.repeat_interleave(times, dim=0),
        )


def gru_parameter_count(hidden: int, src_vocab: int, tgt_vocab: int, num_layers: int = 2) -> int:
    """The closed form of the module docstring: parameters of a GruEncoderDecoder."""
    gru_layer = 6 * hidden * hidden + 6 * hidden  # 3H (H + H) weights, 2 x 3H biases
    embeddings = (src_vocab + tgt_vocab) * hidden
    return 2 * num_layers * gru_layer + embeddings + tgt_vocab * (hidden + 1)


def gru_attention_parameter_count(
    hidden: int, src_vocab: int, tgt_vocab: int, num_layers: int = 2
) -> int:
    """The closed form of the module docstring: parameters of a GruAttentionEncoderDecoder."""
    attention = ATTENTION_SQUARES * hidden * hidden  # W_a (H x H) and W_c (H x 2H), no biases
    return gru_parameter_count(hidden, src_vocab, tgt_vocab, num_layers) + attention


def gru_hidden_for(
    parameter_count: int,
    src_vocab: int,
    tgt_vocab: int,
    num_layers: int = 2,
    attention: bool = False,
) -> int:
    """The hidden size whose GruEncoderDecoder (GruAttentionEncoderDecoder with `attention`)
    has the count closest to `parameter_count`.

    The count a H^2 + b H + c grows with H; solve it for H, then take the closer of the
    integers either side (the smaller on a tie), at least 1. Attention adds 3 to a.
    """
    count = gru_attention_parameter_count if attention else gru_parameter_count
    a = 12 * num_layers + (ATTENTION_SQUARES if attention else 0)
    b = 12 * num_layers + src_vocab + 2 * tgt_vocab
    c = tgt_vocab - parameter_count
    root = (-b + math.sqrt(max(b * b - 4 * a * c, 0))) / (2 * a)
    candidates = {max(1, math.floor(root)), max(1, math.ceil(root))}
    return min(
        sorted(candidates),
        key=lambda h: abs(count(h, src_vocab, tgt_vocab, num_layers) - parameter_count),
    )
