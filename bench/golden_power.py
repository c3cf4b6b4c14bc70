"""Power of the golden check: how often it FAILs a run whose training code is broken.

    snakemake --cores 2 power --config run=power     # results/power/power/
    python -m tools.golden power results/power/power  # config/golden/v3/power.csv

A band wide enough never to fail a correct run could also never catch a broken one. Each
fault of the plan (config/golden/v3/faults.yaml: its name, what it breaks, the seeds) is a
change to the code, made here alone by patching the library in the one process that trains
and evaluates (never a config option, so a user cannot switch it on). The rule
`golden_power` (workflow/rules/bench.smk) trains the paper recipe with one fault for one
seed through the chapter's own compute functions, writing the reversal chapter's
values.json. Offline, once every run of the plan is done, `tools.golden power` judges each
run with the committed bands and counts how often each fault FAILs, with an exact interval.
"""

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

CONTROL = "none"  # run_one without a fault: the library as it is


@contextlib.contextmanager
def training_fault(fault: str) -> Iterator[None]:
    """The library with `fault` in its training code (and, where the fault is in the model,
    in its evaluation too), within the block."""
    import torch

    from tcrformer.models import backprop, decoding, fast, transformer
    from tcrformer.training import schedule

    patches = []
    if fault == "warmup_doubled":
        rate = schedule.NoamSchedule.__call__

        def doubled(self, index):
            return rate(dataclasses.replace(self, warmup=2 * self.warmup), index)

        patches = [mock.patch.object(schedule.NoamSchedule, "__call__", doubled)]
    elif fault == "dropout_off":
        made = fast.Dropout.__init__

        def init(self, p):  # every dropout, the model's and the hand-written step's
            made(self, 0.0)

        patches = [mock.patch.object(fast.Dropout, "__init__", init)]
    elif fault == "positions_sin_cos_swapped":
        table = transformer.positional_table

        def swapped(num_positions, d_model, dtype=torch.float32):
            pe = table(num_positions, d_model, dtype)
            return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).flatten(1)

        patches = [mock.patch.object(fast, "positional_table", swapped)]
    elif fault == "padding_scored":

        def packed_loss(self, src, tgt, label_smoothing, pad):  # fast's, two lines changed
            tgt_in, tgt_out = fast.decoder_io(tgt)
            src_mask, tgt_mask = fast.make_masks(src, tgt_in, pad)
            src_rows = fast.Packed(src != pad)
            tgt_rows = fast.Packed(torch.ones_like(tgt_out, dtype=torch.bool))  # the slip
            h, (B, Lt) = self.num_heads, tgt_in.shape
            source = fast.Scope(fast.score_bias(src_mask, h, *src.shape), src_rows, src_rows)
            causal = fast.Scope(fast.score_bias(tgt_mask, h, B, Lt), tgt_rows, tgt_rows)
            cross = fast.Scope(fast.score_bias(src_mask, h, B, Lt), tgt_rows, src_rows)
            x = self._embed(self.src_embed, src_rows.pack(src), self.pe[src_rows.position])
            memory = self.encoder(x, source)
            y = self._embed(self.tgt_embed, tgt_rows.pack(tgt_in), self.pe[tgt_rows.position])
            logits = self.generator(self.decoder(y, memory, causal, cross))
            return fast.token_loss(logits, tgt_rows.pack(tgt_out), label_smoothing, -100)

        def target_rows(tgt_out, pad):  # the hand-written step's: every position scored
            return fast.Packed(torch.ones_like(tgt_out, dtype=torch.bool))

        patches = [mock.patch.object(fast.EncoderDecoder, "packed_loss", packed_loss),
                   mock.patch.object(backprop, "target_rows", target_rows)]  # fmt: skip
    elif fault == "targets_shifted_twice":

        def decoder_io(tgt):
            return tgt[:, :-2], tgt[:, 2:]

        patches = [mock.patch.object(module, "decoder_io", decoder_io)
                   for module in (fast, backprop)]  # fmt: skip
    elif fault == "causal_mask_leaks":

        def causal_mask(size, device=None):
            ones = torch.ones(size, size, dtype=torch.bool, device=device)
            return torch.tril(ones, diagonal=1).unsqueeze(0)

        patches = [
            mock.patch.object(transformer, "causal_mask", causal_mask),
            mock.patch.object(decoding, "causal_mask", causal_mask),
        ]
    elif fault != CONTROL:
        raise ValueError(f"unknown fault {fault!r}; the plan's are in config/golden/v3/faults.yaml")
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


TRAINED = ("model", "losses", "numerics", "timing")  # what train_reversal writes


def run_one(fault: str, recipe, outputs, numerics: dict) -> dict:
    """Train and evaluate one seed with the fault, through the chapter's compute functions.
    `outputs` maps TRAINED's names to paths; the checkpoints go beside them."""
    from tcrformer.chapters.reversal.compute import evaluate_reversal, train_reversal
    from tcrformer.core.io import write_named

    checkpoints = Path(outputs["model"]).parent / "checkpoints"
    with training_fault(fault):
        write_named(outputs, train_reversal(recipe, checkpoints, numerics))
        results = evaluate_reversal(recipe, str(outputs["model"]), str(outputs["losses"]))
    return results["values"]


def main(smk) -> None:
    from tcrformer.core.io import write_json
    from tcrformer.core.power import FAULTS_FILE, read_power_plan
    from tcrformer.core.runner import torch_numerics

    numerics = torch_numerics(smk)
    from tcrformer.training.recipe import Recipe, with_overrides

    recipe = with_overrides(Recipe.from_params(smk.params.recipe), seed=int(smk.wildcards.seed))
    outputs = {name: smk.output[name] for name in TRAINED}
    values = run_one(smk.wildcards.fault, recipe, outputs, numerics)
    plan = read_power_plan(Path(smk.scriptdir).resolve().parent / "config" / FAULTS_FILE)
    fault = smk.wildcards.fault
    what = {"fault": fault, "breaks": plan.faults[fault], "seed": recipe.seed}
    write_json(smk.output.values, {**what, **values})


if "snakemake" in globals():
    from tcrformer.core.runner import run

    run(main, globals()["snakemake"])
