"""The benchmark script runs both implementations in one process and reports what it measured.

Times are never asserted: only that the run happens, alternates and writes its summary.
"""

from __future__ import annotations

import pandas as pd
import yaml

from conftest import ROOT, default_config

SECTION = default_config()["reversal"]  # the receptor's CDR3 filled in, as the workflow does


def test_bench_alternates_whole_processes_and_writes_its_summary(tmp_path):
    """Each repetition runs every variant in a fresh process, the order reversed on odd
    repetitions; the summary rates each against the explainer's code and the kernels' peak."""
    import subprocess
    import sys

    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({**default_config(), "reversal": {**SECTION, "batch_size": 16}})
    )
    argv = ["--out", str(tmp_path / "out"), "--steps", "3", "--reps", "2", "--config", str(config),
            "--variants", "explainer_1thread,ours"]  # fmt: skip
    done = subprocess.run([sys.executable, str(ROOT / "bench/bench_reversal.py"), *argv],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    frame = pd.read_csv(tmp_path / "out/bench.csv")
    assert frame.variant.tolist() == ["explainer_1thread", "ours", "ours", "explainer_1thread"]
    assert set(frame[frame.variant == "ours"].step) == {"hand-written"}
    assert set(frame[frame.variant == "ours"].workers) == {2}
    assert (frame.process_s > 0).all()
    summary = (tmp_path / "out/bench.md").read_text()
    assert "| ours, the default (portable, 2 workers) |" in summary
    assert "GFLOP/s for a 2048-square product" in summary


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
    assert numerics.variant.tolist() == ["portable", "native, 1 worker", "native, 2 workers"] * 2
    assert set(numerics[numerics.variant == "portable"].capability) == {"AVX2"}
    assert set(frame.part) == {"numerics"}
    summary = (tmp_path / "numerics.md").read_text()
    assert "| portable |" in summary and "| native, 2 workers |" in summary
    assert numerics[numerics.variant == "native, 2 workers"].workers.tolist() == [2, 2]
