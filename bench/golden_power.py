"""Power of the golden check: how often it FAILs a run whose training code is broken.

    snakemake --cores 2 power       # results/<run>/power/: power.csv, power.md, power.yaml

A band wide enough never to fail a correct run could also never catch a broken one. Each
fault below is a change to the code, made in this harness alone by patching the library in
the one process that trains and evaluates (never a config option, so a user cannot switch
it on). The rule `golden_power` trains the paper recipe with one fault for one seed through
the chapter's own compute functions, writing the reversal chapter's values.json; the rule
`golden_power_summary` (golden_power_summary.py) judges every run with the committed
golden file and bands, and counts how often each fault FAILs.
"""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

FAULTS = {
    "smoothing_dropped": "the loss drops its label smoothing (the recipe still says 0.1)",
    "lr_doubled": "the learning-rate schedule returns twice the Noam rate",
    "cross_residual_dropped": "the decoder's cross-attention sub-layer loses its residual add",
    "dropout_at_eval": "evaluation leaves the model in training mode, dropout on",
    # Added for golden check v2 (issue 35), written down before any run of them:
    "scores_unscaled": "attention scores lose their 1/sqrt(d_k), in training and evaluation",
    "source_padding_seen": "the padding mask is all true: attention reads the source's padding",
}
SEEDS = (0, 1, 2, 3)  # each fault is trained for these seeds of the paper recipe
CONTROL = "none"  # run_one without a fault: the library as it is


@contextlib.contextmanager
def training_fault(fault: str) -> Iterator[None]:
    """The library with `fault` in its training code, within the block."""
    from tcrformer.models import decoding, fast, transformer
    from tcrformer.training import schedule

    if fault == "smoothing_dropped":
        original = fast.EncoderDecoder.packed_loss

        def packed_loss(self, src, tgt, label_smoothing, pad):
            return original(self, src, tgt, 0.0, pad)

        with mock.patch.object(fast.EncoderDecoder, "packed_loss", packed_loss):
            yield
    elif fault == "lr_doubled":
        rate = schedule.NoamSchedule.__call__
        with mock.patch.object(schedule.NoamSchedule, "__call__", lambda s, i: 2 * rate(s, i)):
            yield
    elif fault == "cross_residual_dropped":

        def forward(self, x, memory, causal, cross):
            sub = (self.dropout, self.norm_first)
            x = self.norm1.add(x, lambda y: self.self_attn(y, None, causal), *sub)
            x = self.norm2(self.dropout(self.cross_attn(x, memory, cross), self.training))
            return self.norm3.add(x, self.ffn, *sub)

        with mock.patch.object(fast.DecoderLayer, "forward", forward):
            yield
    elif fault == "scores_unscaled":
        built = fast.Attention.__init__

        def init(self, *args, **kwargs):
            built(self, *args, **kwargs)
            self.scale = 1.0

        with mock.patch.object(fast.Attention, "__init__", init):
            yield
    elif fault == "source_padding_seen":
        import torch

        seen = transformer.padding_mask

        def padding_mask(tokens, pad_idx=0):
            return torch.ones_like(seen(tokens, pad_idx))

        with (
            mock.patch.object(transformer, "padding_mask", padding_mask),
            mock.patch.object(decoding, "padding_mask", padding_mask),
        ):
            yield
    else:
        yield


@contextlib.contextmanager
def evaluation_fault(fault: str, seed: int) -> Iterator[None]:
    """The library with `fault` in its evaluation code, within the block."""
    if fault != "dropout_at_eval":
        yield
        return
    import torch
    from torch import nn

    torch.manual_seed(seed)  # the dropout draws of a model left in training mode
    with mock.patch.object(nn.Module, "eval", lambda self: self.train(True)):
        yield


TRAINED = ("model", "losses", "numerics", "timing")  # what train_reversal writes


def run_one(fault: str, recipe, outputs, numerics: dict) -> dict:
    """Train and evaluate one seed with the fault, through the chapter's compute functions.
    `outputs` maps TRAINED's names to paths; the checkpoints go beside them."""
    from tcrformer.chapters.reversal.compute import evaluate_reversal, train_reversal
    from tcrformer.core.io import write_named

    if fault not in (*FAULTS, CONTROL):
        raise ValueError(f"unknown fault {fault!r}; expected one of {', '.join(FAULTS)}")
    checkpoints = Path(outputs["model"]).parent / "checkpoints"
    with training_fault(fault):
        write_named(outputs, train_reversal(recipe, checkpoints, numerics))
        with evaluation_fault(fault, recipe.seed):
            results = evaluate_reversal(recipe, str(outputs["model"]), str(outputs["losses"]))
    return results["values"]


def main(smk) -> None:
    from tcrformer.core.io import write_json
    from tcrformer.core.runner import torch_numerics

    numerics = torch_numerics(smk)
    from tcrformer.training.recipe import Recipe, with_overrides

    recipe = with_overrides(Recipe.from_params(smk.params.recipe), seed=int(smk.wildcards.seed))
    outputs = {name: smk.output[name] for name in TRAINED}
    values = run_one(smk.wildcards.fault, recipe, outputs, numerics)
    fault = smk.wildcards.fault
    write_json(
        smk.output.values, {"fault": fault, "breaks": FAULTS[fault], "seed": recipe.seed, **values}
    )


if "snakemake" in globals():
    from tcrformer.core.runner import run

    run(main, globals()["snakemake"])
