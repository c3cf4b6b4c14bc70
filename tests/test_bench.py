"""The benchmark script runs both implementations in one process and reports what it measured.

Times are never asserted: only that the run happens, alternates and writes its summary.
"""

from __future__ import annotations

import importlib.util

import pandas as pd

from conftest import ROOT, default_config

SECTION = default_config()["reversal"]  # the receptor's CDR3 filled in, as the workflow does


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "bench_reversal", ROOT / "bench/bench_reversal.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_alternates_both_implementations_and_writes_its_summary(tmp_path):
    bench = load_bench()
    section = {**SECTION, "batch_size": 32}  # the paper model, a smaller batch
    argv = ["--out", str(tmp_path), "--steps", "2", "--blocks", "2", "--warmup", "1"]
    # Small peak matmuls: a 2048-wide bf16 product takes seconds on a CPU without bf16 units.
    bench.main([*argv, "--threads", "1", "--profile", "--peak-size", "256"], section=section)
    frame = pd.read_csv(tmp_path / "bench.csv")
    assert frame.impl.tolist() == ["reference", "fast"] * 2  # alternating blocks
    assert (frame.steps == 2).all() and (frame.steps_per_s > 0).all()
    summary = (tmp_path / "bench.md").read_text()
    for line_start in ("| fast |", "| reference |", "Matmul peak measured in this run"):
        assert line_start in summary
    assert "Matrix products" in summary and "aten::" in summary  # the profile of the fast step
    rows = [line.split("|") for line in summary.splitlines() if line.startswith("| fast |")]
    executed_fast = float(rows[0][4])
    rows = [line.split("|") for line in summary.splitlines() if line.startswith("| reference |")]
    executed_reference = float(rows[0][4])
    assert 0 < executed_fast < executed_reference  # the fast step skips the padding rows


def test_numerics_bench_alternates_its_variants_and_writes_the_ratios(tmp_path):
    import subprocess
    import sys

    argv = ["--out", str(tmp_path), "--steps", "2", "--warmup", "2", "--blocks", "2"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/bench_numerics.py"), *argv],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    frame = pd.read_csv(tmp_path / "numerics.csv")
    numerics = frame[frame.part == "numerics"]
    assert (
        numerics.variant.tolist() == ["portable", "native, same threads", "native, 2 threads"] * 2
    )
    assert set(numerics[numerics.variant == "portable"].capability) == {"AVX2"}
    assert set(frame.part) == {"numerics"}
    summary = (tmp_path / "numerics.md").read_text()
    assert "| portable |" in summary and "| native, 2 threads |" in summary
