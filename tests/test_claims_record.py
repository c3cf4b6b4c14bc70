"""What a claim job records beside its metrics, so that a pilot never has to run again: which
strings were exactly right (held-out, and training on a fixed set), the excess string by
string at each snapshot, and what the job cost the machine and how busy it was."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from tcrclaims import compute, metrics
from tcrclaims.compute import train_claim_arm
from tcrformer.core import usage
from tcrformer.core.io import dumps_json
from tcrformer.training import measures
from tcrformer.training.data import PAD, heldout_set
from tcrformer.training.loop import train
from tcrformer.training.recipe import recipe_from_config, with_overrides

from conftest import ROOT, default_config

torch.set_num_threads(1)
SNAPSHOTS = (220, 240)
EXCESS_STRINGS = 300  # more than the 64 evaluated: a held-out set of its own
# A 1-layer model on short strings that gets some of each set right and some wrong, so that
# the bits' order shows (2 s on one core); its training set is fixed.
LEARNS = dict(d_model=32, num_heads=2, d_ff=64, num_layers=1, cross_attention_layer=1,
              min_len=3, max_len=6, cdr3="CASS", steps=240, batch_size=32, schedule="linear",
              peak_lr=5e-3, warmup=10, dropout=0.0, checkpoint_every=240, log_every=240,
              report_every=240, eval_n=64, device="cpu", train_set=3000,
              snapshot_steps=SNAPSHOTS)  # fmt: skip
TINY = dict(cross_attention_layer=1, d_model=16, num_heads=2, d_ff=32, num_layers=1, steps=12,
            batch_size=8, warmup=4, checkpoint_every=12, log_every=12, report_every=12,
            eval_n=20, device="cpu")  # fmt: skip


def recipe_of(**changes):
    return with_overrides(recipe_from_config(default_config()["reversal"]), **changes)


def as_written(record: dict) -> dict:
    """A job's record as its JSON file reads back."""
    return json.loads(dumps_json(record))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(recipe, the job's results, its record as read back, the trained model)."""
    recipe = recipe_of(**LEARNS)
    results = train_claim_arm(recipe, recipe, tmp_path_factory.mktemp("job"), {},
                              extras={"snapshots": SNAPSHOTS},
                              excess_strings=EXCESS_STRINGS)  # fmt: skip
    trained = train(recipe)  # the same bits: keeping snapshots changes none
    assert torch.equal(torch.from_numpy(results["history"]["loss"].to_numpy()).float(),
                       trained.losses)  # fmt: skip
    return recipe, results, as_written(results["metrics"]), trained.model


# Which strings were right ---------------------------------------------------------------------


def test_bits_are_string_k_at_bit_k_mod_8_of_byte_k_div_8_and_read_back():
    right = [True, False, False, False, False, False, False, False, False, True]
    assert metrics.pack_bits(right) == base64.b64encode(bytes([0b1, 0b10])).decode()
    assert metrics.unpack_bits(metrics.pack_bits(right), 10).tolist() == right
    assert metrics.pack_bits(torch.tensor(right)) == metrics.pack_bits(np.array(right))
    with pytest.raises(ValueError, match="not 1 for 8 strings"):
        metrics.unpack_bits(metrics.pack_bits(right), 8)
    with pytest.raises(ValueError, match="past the 9 strings"):
        metrics.unpack_bits(metrics.pack_bits(right), 9)


def test_the_bits_are_the_exact_strings_of_a_real_evaluation_and_count_its_exact(job):
    recipe, _, record, model = job
    for strings, (src, tgt) in (("heldout", measures.heldout(recipe)),
                                ("train", measures.training_strings(recipe))):  # fmt: skip
        bits = metrics.exact_bits(record, strings)
        right = measures.exact_rows(model, src, tgt).numpy()
        assert 0 < right.sum() < len(right), strings  # some of each: the order shows
        assert bits.dtype == bool and bits.tolist() == right.tolist(), strings
        assert int(bits.sum()) == record[f"{strings}_exact"], strings
        assert len(bits) == record[f"{strings}_total"] == recipe.eval_n, strings
    wrong = {**record, "heldout_exact": record["heldout_exact"] + 1}
    with pytest.raises(ValueError, match="heldout_bits"):
        metrics.exact_bits(wrong)


def test_training_bits_are_kept_only_for_an_arm_with_a_fixed_training_set(job, tmp_path):
    fixed = job[2]
    assert {"train_bits", "train_exact", "train_total"} <= set(fixed)
    recipe = recipe_of(**TINY)  # fresh strings every step: no training set to count
    record = as_written(train_claim_arm(recipe, recipe, tmp_path, {})["metrics"])
    assert "train_exact" not in record and "train_bits" not in record
    assert metrics.exact_bits(record, "train") is None
    assert len(metrics.exact_bits(record)) == record["heldout_total"] == recipe.eval_n


def test_a_record_written_before_the_bits_and_statistics_reads_as_none():
    old = {"heldout_exact": 983, "heldout_total": 1000, "heldout_fraction": 0.983,
           "train_exact": 990, "train_total": 1000, "excess_by_step": {"1000": 0.01}}  # fmt: skip
    assert metrics.exact_bits(old) is None and metrics.exact_bits(old, "train") is None
    assert metrics.exact_bits({}) is None


# The excess, string by string -----------------------------------------------------------------


def test_the_excess_per_string_gives_the_metrics_excess_at_every_step(job):
    recipe, results, record, _ = job
    numbers = results["metrics"]
    assert sorted(numbers["excess_per_string"]) == sorted(numbers["excess_by_step"])
    assert sorted(numbers["excess_by_step"]) == list(SNAPSHOTS)
    _, tgt = heldout_set(EXCESS_STRINGS, recipe.min_len, recipe.max_len, recipe.eval_seed)
    tokens = (tgt[:, 1:] != PAD).sum(1).double()  # letters and <eos>
    for step, stats in record["excess_per_string"].items():
        excess = record["excess_by_step"][step]
        assert stats["n"] == EXCESS_STRINGS and stats["capped"] is False
        assert stats["mean_num"] / stats["mean_den"] == pytest.approx(excess, abs=1e-5)
        assert stats["mean_den"] == pytest.approx(float(tokens.mean()), rel=1e-12)
        assert stats["var_den"] == pytest.approx(float(tokens.var()), rel=1e-9)
        bound = math.sqrt(stats["var_num"] * stats["var_den"])  # Cauchy-Schwarz
        assert stats["var_num"] > 0 and abs(stats["cov"]) <= bound
        assert 0 < metrics.ratio_standard_error(stats) < excess


def test_a_capped_excess_says_so(job):
    recipe, _, _, model = job
    src, tgt = measures.heldout(recipe)
    ls = recipe.label_smoothing
    plain = metrics.excess_statistics(
        model, src, tgt, ls, measures.eval_excess(model, src, tgt, ls)
    )
    assert plain["capped"] is False
    broken = train(recipe_of(**TINY)).model
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    value = measures.eval_excess(broken, src, tgt, ls)
    stats = compute.finite_or_none(metrics.excess_statistics(broken, src, tgt, ls, value))
    assert stats["capped"] is True and stats["mean_num"] is None  # not a number: None


def test_the_delta_method_error_of_a_ratio_of_sums():
    rng = np.random.default_rng(0)
    num = rng.normal(3.0, 1.0, 400)
    alone = metrics.ratio_statistics(num, np.ones(400))  # a plain mean: sd / sqrt(n)
    assert metrics.ratio_standard_error(alone) == pytest.approx(num.std(ddof=1) / 20, rel=1e-12)
    den = rng.integers(4, 12, 400).astype(float)
    num = 0.3 * den + rng.normal(0.0, 0.5, 400)
    stats = metrics.ratio_statistics(num, den)
    ratios = []  # the bootstrap's spread of sum(num) / sum(den)
    for _ in range(2000):
        pick = rng.integers(0, 400, 400)
        ratios.append(num[pick].sum() / den[pick].sum())
    assert metrics.ratio_standard_error(stats) == pytest.approx(np.std(ratios), rel=0.1)
    four_times = metrics.ratio_standard_error(stats, 1600)  # four times the strings
    assert four_times == pytest.approx(metrics.ratio_standard_error(stats) / 2)
    assert math.isnan(metrics.ratio_statistics([1.0], [2.0])["var_num"])  # one string


# What the job cost ----------------------------------------------------------------------------


def test_the_training_time_records_cpu_and_wall_seconds_and_the_load(job):
    timing = as_written(job[1]["timing"])
    assert timing["wall_seconds"] >= timing["train_seconds"] > 0  # training, then evaluation
    assert 0 < timing["cpu_seconds"] <= timing["wall_seconds"] * (torch.get_num_threads() + 1)
    for end in ("start", "end"):
        load = timing["load_average"][end]
        assert len(load) == 3 and all(isinstance(x, float) and x >= 0 for x in load), end


def test_the_job_counts_from_its_scripts_start(monkeypatch, tmp_path):
    started = usage.reading()
    busy = time.process_time() + 0.3
    while time.process_time() < busy:  # CPU the script used before the training
        pass
    monkeypatch.setattr(compute, "job_started", lambda: started)
    recipe = recipe_of(**TINY)
    timing = train_claim_arm(recipe, recipe, tmp_path, {})["timing"]
    assert timing["cpu_seconds"] >= 0.3 and timing["wall_seconds"] >= 0.3
    assert timing["load_average"]["start"] == list(started.load_average)


def test_a_rule_script_has_its_start_while_main_runs_and_none_after():
    script = """
from types import SimpleNamespace
from tcrformer.core import runner
seen = []
smk = SimpleNamespace(log=[], config={"numerics": {"mode": "native"}})
assert runner.job_started() is None
runner.run(lambda _: seen.append(runner.job_started()), smk)
assert seen[0].cpu_seconds > 0 and len(seen[0].load_average) == 3, seen
assert runner.job_started() is None
"""
    path = [str(ROOT / "workflow/lib"), *filter(None, os.environ.get("PYTHONPATH", "").split(
        os.pathsep))]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
