"""The reversal task: random amino-acid strings in, the same strings reversed out.

Token ids: PAD 0, BOS 1, EOS 2, then the 20 residues in alphabetical order (3..22).
A batch is padded to `max_len` (source) and `max_len + 2` (target), so every batch has
the same shape; fixed shapes let the fast path compile once.
"""

from __future__ import annotations

import hashlib

import torch

from tcrformer import AMINO_ACIDS

PAD, BOS, EOS = 0, 1, 2
FIRST_RESIDUE = 3
VOCAB_SIZE = FIRST_RESIDUE + len(AMINO_ACIDS)
STOI = {aa: FIRST_RESIDUE + i for i, aa in enumerate(AMINO_ACIDS)}
ITOS = {i: aa for aa, i in STOI.items()}


def encode(sequence: str) -> torch.Tensor:
    """'CAS...' -> (1, L) token ids."""
    return torch.tensor([[STOI[aa] for aa in sequence]], dtype=torch.long)


def decode(tokens) -> str:
    """Token ids -> residues, stopping at the first EOS; BOS and PAD are skipped."""
    letters = []
    for token in tokens.tolist() if hasattr(tokens, "tolist") else tokens:
        if token == EOS:
            break
        if token in ITOS:
            letters.append(ITOS[token])
    return "".join(letters)


def derive_seed(seed: int, purpose: str) -> int:
    """An independent seed for one purpose ('batches', 'train_set', 'dropout chunk 0 step 1', ...),
    fixed by the recipe's seed."""
    digest = hashlib.sha256(f"{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def random_batch(
    n: int, min_len: int, max_len: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """n random strings of min_len..max_len residues and their reversals, with no Python loop.

    src: (n, max_len)      s_0 .. s_{L-1}, PAD ...
    tgt: (n, max_len + 2)  BOS, s_{L-1} .. s_0, EOS, PAD ...
    """
    lengths = torch.randint(min_len, max_len + 1, (n, 1), generator=generator)  # (n, 1)
    residues = torch.randint(FIRST_RESIDUE, VOCAB_SIZE, (n, max_len), generator=generator)
    pos = torch.arange(max_len)  # (max_len,)
    inside = pos < lengths  # (n, max_len)
    src = residues.masked_fill(~inside, PAD)
    mirror = (lengths - 1 - pos).clamp(min=0)  # position k reads source L-1-k
    reversed_ = residues.gather(1, mirror).masked_fill(~inside, PAD)
    tgt = torch.full((n, max_len + 2), PAD, dtype=torch.long)
    tgt[:, 0] = BOS
    tgt[:, 1:-1] = reversed_
    tgt.scatter_(1, lengths + 1, EOS)
    return src, tgt


class TrainingStrings:
    """Where a recipe's training batches come from.

    train_set None (the paper's): fresh random strings at every step, so no string is seen
    twice. train_set N: one fixed set of N strings, drawn once from its own seed, and each
    batch drawn from it with replacement; a model can then overfit, which is what the
    claims' generalisation arms need. Both are seeded from the recipe's seed; `generator`
    (saved in checkpoints) drives the batches.
    """

    def __init__(self, recipe):
        self.recipe = recipe
        self.generator = torch.Generator().manual_seed(derive_seed(recipe.seed, "batches"))
        self.fixed = None
        if recipe.train_set is not None:
            draw = torch.Generator().manual_seed(derive_seed(recipe.seed, "train_set"))
            self.fixed = random_batch(recipe.train_set, recipe.min_len, recipe.max_len, draw)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.recipe
        if self.fixed is None:
            return random_batch(r.batch_size, r.min_len, r.max_len, self.generator)
        rows = torch.randint(0, r.train_set, (r.batch_size,), generator=self.generator)
        src, tgt = self.fixed
        return src[rows], tgt[rows]


def heldout_set(n: int, min_len: int, max_len: int, seed: int):
    """The held-out test: n strings drawn from their own generator, never seen in training."""
    generator = torch.Generator().manual_seed(seed)
    return random_batch(n, min_len, max_len, generator)
