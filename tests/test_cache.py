"""Between runs: with Snakemake's output cache, a second run name with the same inputs reuses
the trained model and the language models' results instead of computing them again."""

from __future__ import annotations

import os

import pytest

from conftest import snakemake, write_config

pytestmark = pytest.mark.slow

SHORT = {"reversal": {"steps": 30, "eval_n": 20, "checkpoint_every": 10, "log_every": 10},
         "golden": {"strict": False}}  # fmt: skip


def test_a_second_run_name_reuses_the_cached_training(workflow_copy, tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()  # Snakemake wants the cache folder to exist
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(tmp_path / "cache"))
    config = str(write_config(workflow_copy / "short.yaml", SHORT))
    first = snakemake(workflow_copy, "reversal", "--cache", "--configfile", config,
                      "--config", "run=first")  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    assert any((tmp_path / "cache").iterdir())  # the training went into the cache
    second = snakemake(workflow_copy, "reversal", "--cache", "--configfile", config,
                       "--config", "run=second")  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    results = workflow_copy / "results"
    # The second run never trained (its training log stays empty; Snakemake says where the
    # outputs came from), and it has the same weights, bit for bit.
    assert "step 30/30" in (results / "first/logs/train_reversal_reversal.log").read_text()
    assert "step" not in (results / "second/logs/train_reversal_reversal.log").read_text()
    assert "results/second/reversal/model.safetensors from cache" in second.stderr
    for name in ("model.safetensors", "losses.csv"):
        first_bytes = (results / "first/reversal" / name).read_bytes()
        assert (results / "second/reversal" / name).read_bytes() == first_bytes, name
    # Evaluation is per run: it ran in both.
    assert (results / "second/reversal/values.json").exists()
    # Another recipe is another cache entry: it trains.
    changed = snakemake(workflow_copy, "reversal", "--cache", "--configfile", config,
                        "--config", "run=third", "reversal={'seed': 5}")  # fmt: skip
    assert changed.returncode == 0, changed.stderr[-3000:]
    assert "step 30/30" in (results / "third/logs/train_reversal_reversal.log").read_text()
    assert os.environ["SNAKEMAKE_OUTPUT_CACHE"].startswith(str(tmp_path))
