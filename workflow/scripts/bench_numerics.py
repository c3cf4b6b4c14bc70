"""Rule bench_numerics: bench/bench_numerics.py, run by the interpreter Snakemake chose for
the rule (the conda environment's under --sdm conda, else the one running Snakemake): a
shell `python` would be whatever comes first on PATH. Its workers pin their own numerics."""

import subprocess
import sys
from pathlib import Path

smk = snakemake  # noqa: F821 (set by the script: directive)
bench = Path(smk.scriptdir).resolve().parents[1] / "bench" / "bench_numerics.py"
with open(smk.log[0], "w") as log:
    command = [sys.executable, str(bench), "--out", str(Path(smk.output.csv).parent)]
    subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
