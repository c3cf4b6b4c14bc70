"""The GPU path in one call: its bits, its speed and its golden check, as one table.

    bash bench/gpu_check.sh                                  on CUDA: about 5 minutes at most
    bash bench/gpu_check.sh --device cpu --steps 5 --seeds 2   the same table on the CPU

prints one Markdown table (the trainings' own output goes to results/<run>/gpu_check.log):

    fingerprint  the fingerprint CLI (tcrformer.training.fingerprint) run twice on the
                 device, FINGERPRINT_STEPS steps: identical bytes expected
    reversal     the default reversal training, as `snakemake --workflow-profile
                 profiles/gpu reversal` runs it: its steps/s, then its golden rows
    ensemble     `--seeds` seeds of the ensemble at once on the one device (the profile's
                 gpu_slots let that many share it), ENSEMBLE_STEPS steps each: steps/s each
                 and together, against the reversal's alone
    device       the GPU, driver, CUDA, cuDNN and torch, as the trainings recorded them

Everything trains under profiles/gpu in the run folder results/<run>/ (removed first).
`--device cpu` lays `reversal.device: cpu` over the profile's config and names the CPU,
so the same table is made where there is no GPU (the test of this script); `--steps`
shortens every training. Without CUDA and without `--device cpu` it stops at once with one
line and exit status 1. Exit status 1 too when the fingerprint's two runs differ.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FINGERPRINT_STEPS = 100
ENSEMBLE_STEPS = 1000  # enough to time the seeds side by side; their values are not judged


class CheckFailed(RuntimeError):
    """A step of the check could not run; the message says which and where its log is."""


@dataclass
class Row:
    check: str
    result: str
    detail: str = ""


def no_cuda() -> str:
    """Why this machine cannot run the check on CUDA, or '' when it can."""
    import torch

    if torch.version.cuda is None:
        return (
            f"torch {torch.__version__} is a CPU build: install a CUDA build "
            "(docs/cluster.md), or pass --device cpu"
        )
    if not torch.cuda.is_available():
        return (
            f"no CUDA GPU is visible here (torch {torch.__version__}, CUDA "
            f"{torch.version.cuda}): run it on a GPU machine, or pass --device cpu"
        )
    return ""


class Check:
    """One run of the check: its options, its run folder and log, and each part's rows."""

    def __init__(self, args: argparse.Namespace):
        self.device, self.steps, self.seeds = args.device, args.steps, args.seeds
        self.run = args.run
        self.folder = ROOT / "results" / self.run
        self.log = self.folder / "gpu_check.log"

    def call(self, what: str, command: list[str]) -> tuple[str, float]:
        """Run `command` in the repository; its stderr goes to the log. -> (stdout, seconds)."""
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"\n$ {' '.join(command)}\n")
            log.flush()
            start = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log,
                                  text=True, check=False)  # fmt: skip
            seconds = time.perf_counter() - start
            log.write(done.stdout)
        if done.returncode != 0:
            raise CheckFailed(f"{what} failed (exit {done.returncode}); see {self.log}")
        return done.stdout, seconds

    def snakemake(self, what: str, reversal: dict, *targets: str, config=()) -> float:
        """The workflow under profiles/gpu in this run's folder; `reversal` laid over the
        profile's reversal keys. -> the call's seconds."""
        if self.device == "cpu":
            reversal = {**reversal, "device": "cpu"}
        command = [sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/gpu",
                   "--cores", str(max(self.seeds, 2)), "--config", f"run={self.run}",
                   f"reversal={reversal}", *config, "--", *targets]  # fmt: skip
        return self.call(what, command)[1]

    def fingerprint(self) -> list[Row]:
        steps = self.steps or FINGERPRINT_STEPS
        cli = [sys.executable, "-m", "tcrformer.training.fingerprint"]
        command = [*cli, "--config", "config/config.yaml", "--steps", str(steps), "--device",
                   self.device]  # fmt: skip
        first, second = (self.call("the fingerprint", command)[0] for _ in range(2))
        found = json.loads(first)
        same = "identical bytes" if first == second else "DIFFERENT bytes"
        detail = (f"losses sha256 {found['losses_sha256'][:16]}, weights sha256 "
                  f"{found['weights_sha256'][:16]}, last loss {found['last_loss']:.6f}, "
                  f"step: {found['step']}")  # fmt: skip
        return [Row(f"fingerprint, {steps} steps, run twice", same, detail)]

    def reversal(self) -> tuple[list[Row], float]:
        """The chapter's training and its golden report (whose rules never fail)."""
        reversal = {"steps": self.steps} if self.steps else {}
        folder = f"results/{self.run}/reversal"
        self.snakemake("the reversal training", reversal, f"{folder}/golden_report.json")
        timing = json.loads((ROOT / folder / "training_time.json").read_text())
        rate = timing["steps_run"] / timing["train_seconds"]
        rows = [Row("reversal, the default training", f"{rate:.1f} steps/s",
                    f"{timing['steps_run']} steps in {timing['train_seconds']:.1f} s on "
                    f"{timing['device']} ({timing['step']})")]  # fmt: skip
        report = json.loads((ROOT / folder / "golden_report.json").read_text())
        counts = ", ".join(f"{n} {status}" for status, n in report["summary"].items() if n)
        rows.append(Row("reversal, golden check", counts))
        for row in report["rows"]:
            reason = f"; {row['reason']}" if row["reason"] else ""
            rows.append(Row(f"golden: {row['key']}", row["status"],
                            f"{shown(row['value'])} ({row['tolerance']}{reason})"))  # fmt: skip
        return rows, rate

    def ensemble(self, alone: float) -> list[Row]:
        """`seeds` seeds of the ensemble at once, one training process each."""
        seeds = list(range(self.seeds))
        targets = [f"results/{self.run}/ensemble/seed{s}/losses.csv" for s in seeds]
        steps = self.steps or ENSEMBLE_STEPS
        wall = self.snakemake(f"{len(seeds)} ensemble seeds", {"steps": steps}, *targets,
                              config=[f"ensemble={{'seeds': {seeds}}}"])  # fmt: skip
        timings = [self.read(f"ensemble/seed{s}/training_time.json") for s in seeds]
        rates = sorted(t["steps_run"] / t["train_seconds"] for t in timings)
        longest = max(t["train_seconds"] for t in timings)
        together = sum(t["steps_run"] for t in timings) / longest  # they train side by side
        devices = {json.dumps(self.read(f"ensemble/seed{s}/numerics.json")["gpu"]) for s in seeds}
        return [
            Row(f"ensemble, {len(seeds)} seeds at once, {steps} steps each",
                f"{together:.1f} steps/s together",
                f"each {rates[0]:.1f} to {rates[-1]:.1f} steps/s; together: every step over "
                f"the longest training, {longest:.1f} s ({wall:.0f} s for the whole call, "
                f"process starts included); {together / alone:.2f}x the reversal training "
                f"alone; {'one device' if len(devices) == 1 else 'SEVERAL devices'}"),
        ]  # fmt: skip

    def identity(self) -> list[Row]:
        numerics = self.read("reversal/numerics.json")
        gpu = numerics["gpu"]
        if gpu["gpu"] is None:
            return [Row("device", "cpu", f"{numerics['cpu']['model']}, torch {numerics['torch']}")]
        return [Row("device", gpu["gpu"], f"driver {gpu['driver']}, CUDA {gpu['cuda']}, "
                    f"cuDNN {gpu['cudnn']}, torch {numerics['torch']}")]  # fmt: skip

    def read(self, path: str) -> dict:
        return json.loads((self.folder / path).read_text(encoding="utf-8"))


def shown(value) -> str:
    """A golden row's value in a table cell: a number to 6 digits, a list by its length."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return f"{len(value)} values"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def table(rows: list[Row]) -> str:
    lines = ["| check | result | detail |", "|---|---|---|"]
    lines += [f"| {r.check} | {r.result} | {r.detail} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--steps", type=int, help="every training's steps (default: each's own)")
    parser.add_argument("--seeds", type=int, default=8, help="ensemble seeds at once")
    parser.add_argument("--run", default="gpu_check", help="the run folder, results/<run>/")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        why = no_cuda()
        if why:
            print(f"gpu_check: {why}", file=sys.stderr)
            return 1
    check = Check(args)
    shutil.rmtree(check.folder, ignore_errors=True)
    check.folder.mkdir(parents=True)
    try:
        rows = check.fingerprint()
        found, alone = check.reversal()
        rows += found + check.ensemble(alone) + check.identity()
    except CheckFailed as failed:
        print(f"gpu_check: {failed}", file=sys.stderr)
        return 1
    print(table(rows))
    return 0 if rows[0].result == "identical bytes" else 1


if __name__ == "__main__":
    sys.exit(main())
