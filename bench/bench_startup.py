"""Benchmark: what Snakemake start-up costs this workflow, against an empty workflow.

    python bench/bench_startup.py --workdir . [--config run=paper] [--configfile F] [--pairs 7]

A no-op rerun of a finished run (`snakemake --cores 2` with every output there) against a
one-rule workflow whose output is there too, in pairs that alternate, each a fresh process;
the summary is the median of the pairs' ratios (a machine that gets busier slows both of a
pair alike). A third workflow, the same one rule with one `params` entry and its output made
by Snakemake (so its params are compared on a rerun), is timed in the same rounds: it is
Snakemake's own floor for any workflow whose rules have params, and the difference to the
empty one is what Snakemake itself adds for them (with pandas installed it imports pandas
to compare params, `persistence._serialize_param_pandas`). Run it in a clone whose run has
finished (README command 1). Also the time from `snakemake` start to the end of a one-step
training of the paper recipe (parse, the config check, the job's imports, the data, one
step), in a scratch copy of the workflow.
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
WITH_PARAMS = EMPTY.replace("    shell:", "    params:\n        setting=1,\n    shell:")


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
    parser.add_argument("--configfile", nargs="*", default=[])
    parser.add_argument("--pairs", type=int, default=7)
    args = parser.parse_args(argv)
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "2"]
    ours = [*snakemake, *(["--config", *args.config] if args.config else [])]
    ours += ["--configfile", *args.configfile] if args.configfile else []
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty"
        empty.mkdir()
        (empty / "Snakefile").write_text(EMPTY)
        (empty / "done.txt").touch()
        seconds(snakemake, empty)  # warm the file cache, every side
        params = Path(folder) / "params"
        params.mkdir()
        (params / "Snakefile").write_text(WITH_PARAMS)
        seconds(snakemake, params)  # makes done.txt and its record of the params
        check = subprocess.run([*ours, "-n"], cwd=args.workdir, capture_output=True, text=True)
        if "Nothing to be done" not in check.stdout + check.stderr:
            raise SystemExit(f"{args.workdir}: the run is not finished; run it first")
        rounds = []  # (ours, empty, one rule with params), one fresh process each
        for _ in range(args.pairs):
            rounds.append(
                (seconds(ours, args.workdir), seconds(snakemake, empty), seconds(snakemake, params))
            )
        scratch = Path(folder) / "wf"
        scratch.mkdir()
        for part in ("Snakefile", "config", "workflow", "bench", "profiles", "envs"):
            source = args.workdir / part
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, scratch / part)
        first_step = seconds(
            [*snakemake, "results/startup/reversal/losses.csv", "--config", "run=startup",
             "reversal={'steps': 1}"], scratch,
        )  # fmt: skip
    median = statistics.median
    print("| | seconds (median) |\n|---|---|")
    print(f"| no-op rerun of the run | {median(a for a, _, _ in rounds):.2f} |")
    print(f"| empty one-rule workflow | {median(b for _, b, _ in rounds):.2f} |")
    print(f"| one-rule workflow with params | {median(c for _, _, c in rounds):.2f} |")
    print(f"| ratio to empty (median of {len(rounds)} pairs) "
          f"| {median(a / b for a, b, _ in rounds):.2f}x |")  # fmt: skip
    print(f"| ratio to the params floor | {median(a / c for a, _, c in rounds):.2f}x |")
    print(f"| snakemake start to one trained step | {first_step:.2f} |")


if __name__ == "__main__":
    main()
