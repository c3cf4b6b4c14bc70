"""Benchmark: what Snakemake start-up costs this workflow, against an empty workflow.

    python bench/bench_startup.py --workdir . --config run=paper [--pairs 7]

A no-op rerun of a finished run (`snakemake --cores 2` with every output there) against a
one-rule workflow whose output is there too, in pairs that alternate, each a fresh process;
the summary is the median of the pairs' ratios (a machine that gets busier slows both of a
pair alike). Run it in a clone whose run has finished (README command 1). Also the time from
`snakemake` start to the end of a one-step training of the paper recipe (parse, the config
check, the job's imports, the data, one step), in a scratch copy of the workflow.
Times are for reading, never for tests.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EMPTY = (
    'rule all:\n    input: "done.txt"\n\n\n'
    'rule make:\n    output: "done.txt"\n    shell: "touch {output}"\n'
)


def seconds(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {cwd}:\n{done.stderr[-2000:]}")
    return elapsed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("."))
    parser.add_argument("--config", nargs="*", default=[])
    parser.add_argument("--pairs", type=int, default=7)
    args = parser.parse_args(argv)
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "2"]
    ours = [*snakemake, *(["--config", *args.config] if args.config else [])]
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty"
        empty.mkdir()
        (empty / "Snakefile").write_text(EMPTY)
        (empty / "done.txt").touch()
        seconds(snakemake, empty)  # warm the file cache, both sides
        check = subprocess.run([*ours, "-n"], cwd=args.workdir, capture_output=True, text=True)
        if "Nothing to be done" not in check.stdout + check.stderr:
            raise SystemExit(f"{args.workdir}: the run is not finished; run it first")
        pairs = []
        for _ in range(args.pairs):
            ratio_ours, ratio_empty = seconds(ours, args.workdir), seconds(snakemake, empty)
            pairs.append((ratio_ours, ratio_empty))
        scratch = Path(folder) / "wf"
        scratch.mkdir()
        for part in ("Snakefile", "config", "workflow", "bench", "profiles", "envs"):
            source = args.workdir / part
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, scratch / part)
        first_step = seconds(
            [*snakemake, "results/startup/reversal/losses.csv", "--config", "run=startup",
             "reversal={'steps': 1}"], scratch,
        )  # fmt: skip
    ratios = [a / b for a, b in pairs]
    print("| | seconds (median) |\n|---|---|")
    print(f"| no-op rerun of the run | {statistics.median(a for a, _ in pairs):.2f} |")
    print(f"| empty one-rule workflow | {statistics.median(b for _, b in pairs):.2f} |")
    print(f"| ratio (median of {len(pairs)} pairs) | {statistics.median(ratios):.2f}x |")
    print(f"| snakemake start to one trained step | {first_step:.2f} |")


if __name__ == "__main__":
    main()
