"""The recurrent baseline: a GRU encoder-decoder without attention (Sutskever et al., 2014).

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
"""

from __future__ import annotations

import math

from torch import Tensor, nn

PAD = 0  # source rows are padded with id 0 at the end


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


def gru_parameter_count(hidden: int, src_vocab: int, tgt_vocab: int, num_layers: int = 2) -> int:
    """The closed form of the module docstring: parameters of a GruEncoderDecoder."""
    gru_layer = 6 * hidden * hidden + 6 * hidden  # 3H (H + H) weights, 2 x 3H biases
    embeddings = (src_vocab + tgt_vocab) * hidden
    return 2 * num_layers * gru_layer + embeddings + tgt_vocab * (hidden + 1)


def gru_hidden_for(
    parameter_count: int, src_vocab: int, tgt_vocab: int, num_layers: int = 2
) -> int:
    """The hidden size whose GruEncoderDecoder has the count closest to `parameter_count`.

    The count a H^2 + b H + c grows with H; solve it for H, then take the closer of the
    integers either side (the smaller on a tie), at least 1.
    """
    a = 12 * num_layers
    b = 12 * num_layers + src_vocab + 2 * tgt_vocab
    c = tgt_vocab - parameter_count
    root = (-b + math.sqrt(max(b * b - 4 * a * c, 0))) / (2 * a)
    candidates = {max(1, math.floor(root)), max(1, math.ceil(root))}
    return min(
        sorted(candidates),
        key=lambda h: abs(
            gru_parameter_count(h, src_vocab, tgt_vocab, num_layers) - parameter_count
        ),
    )
