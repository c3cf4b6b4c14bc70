"""The run's benchmark files (Snakemake's `benchmark:` directive) as one table.

Each file is one tab-separated row per repetition: s (wall seconds), max_rss (MB), cpu_time
(seconds) and more. Times vary from run to run: they are shown, never compared.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

COLUMNS = {"s": "wall_seconds", "max_rss": "max_rss_mb", "cpu_time": "cpu_seconds"}


def read_benchmarks(folder: str | Path) -> pd.DataFrame:
    """One row per benchmark file: the job (the file's name), wall time, max RSS, CPU time."""
    rows = []
    for path in sorted(Path(folder).glob("*.tsv")):
        frame = pd.read_csv(path, sep="\t")
        if frame.empty:
            continue
        row = frame.iloc[-1]
        rows.append({"job": path.stem, **{new: float(row[old]) for old, new in COLUMNS.items()}})
    return pd.DataFrame(rows, columns=["job", *COLUMNS.values()])
