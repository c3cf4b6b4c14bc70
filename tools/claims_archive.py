"""Carry a claims run's finished jobs across machines: a long run may span sessions.

    python -m tools.claims_archive save --run paper --to ARCHIVE
    python -m tools.claims_archive restore --from ARCHIVE
    python -m tools.claims_archive machines --run paper
    python -m tools.claims_archive changes --before ARCHIVE [--after ARCHIVE]

(ARCHIVE: results/archive/claims_v2.tar.gz for the v2 run)

`save` packs what the finished jobs wrote (every arm and seed whose evaluation is done: its
metrics, history, numerics and timing; the registration; the sweeps' choices; the jobs'
benchmark files), and, once the run has them, the chapter's other results (the analytic
claims, the cost and speed measurements, the table and the figures), with their
modification times. `restore` unpacks them into results/ of a fresh clone. Resume with the
run's command plus `--rerun-triggers mtime` (RESUME): a job keeps no weights (it evaluates
them and deletes them), so its files are all it leaves. In a fresh clone, whose scripts are
newer than the restored files, Snakemake 9.27 without that option (it takes a rule's script
newer than the rule's output for changed code) flags the restored registration as "Code has
changed since last execution" and plans that one job alone (a new registration, timed after
trainings it did not see); with modification times as the only trigger it finds the
restored jobs done and plans the rest (tests/test_claims.py checks both). `changes` sets an
archived run's verdicts beside this run's, claim by claim, with the revision note the
claims file gives for what changed and why.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import tarfile
from collections import Counter
from pathlib import Path

from tcrclaims.settings import JOB_FOLDER

JOB_FILES = ("metrics.json", "history.csv", "numerics.json", "training_time.json")
RESUME = "--rerun-triggers mtime"


def finished(results: Path) -> list[Path]:
    """The files of every evaluated job of results/<run>/, what they were registered by, and
    the run's own results once it has them (the table, the figures and what they read)."""
    claims = results / "claims"
    files = sorted(claims.glob("*"))  # the registration and, once there, the run's own results
    files += sorted((claims / "benchmarks").glob("*"))  # the cost and speed its table read
    files += sorted((claims / "sweeps").glob("*.json"))
    for metrics in sorted(claims.glob(JOB_FOLDER.format(arm="*", seed="*") + "/metrics.json")):
        files += [metrics.parent / name for name in JOB_FILES]
    files += sorted((results / "benchmarks").glob("train_claim_arm_*.tsv"))
    files += claims_figures(results)
    return [f for f in files if f.is_file()]


def claims_figures(results: Path) -> list[Path]:
    """The claims' figures (tcrclaims.figures), where their rules draw them."""
    from tcrclaims.figures import FIGURES
    from tcrformer.figures import figure_paths

    return [Path(path) for figure in FIGURES for path in figure_paths(results, figure.id)]


def save_finished(run: str, archive: Path, root: Path = Path(".")) -> int:
    files = finished(root / "results" / run)
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_suffix(".partial")
    with tarfile.open(tmp, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=str(path.relative_to(root)))
    tmp.replace(archive)
    return sum(1 for f in files if f.name == "metrics.json")


def restore_finished(archive: Path, root: Path = Path(".")) -> int:
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        if any(not m.name.startswith("results/") or ".." in m.name for m in members):
            raise ValueError(f"{archive}: holds files outside results/")
        tar.extractall(root, members=members, filter="data")  # keeps the modification times
    return sum(1 for m in members if m.name.endswith("/metrics.json"))


def machines(results: Path) -> dict[str, dict[str, int]]:
    """{arm: {CPU model (and GPU, if one trained it): finished jobs}} of results/<run>/."""
    claims, found = results / "claims", {}
    for metrics in sorted(claims.glob(JOB_FOLDER.format(arm="*", seed="*") + "/metrics.json")):
        numerics = json.loads((metrics.parent / "numerics.json").read_text(encoding="utf-8"))
        model = (numerics.get("cpu") or {}).get("model", "unknown CPU")
        arm = metrics.parent.relative_to(claims).parts[1]
        found.setdefault(arm, Counter())[model] += 1
    return {arm: dict(sorted(count.items())) for arm, count in sorted(found.items())}


def machines_markdown(found: dict[str, dict[str, int]]) -> str:
    models = sorted({m for count in found.values() for m in count})
    lines = ["| arm | " + " | ".join(models) + " |", "|---" * (len(models) + 1) + "|"]
    for arm, count in found.items():
        lines.append(f"| {arm} | " + " | ".join(str(count.get(m, 0)) for m in models) + " |")
    return "\n".join(lines) + "\n"


TABLE = "claims/claims.csv"  # a run's claims table, under results/<run>/


def archived_table(archive: Path) -> dict[str, dict[str, str]]:
    """{claim id: its row} of the claims table a finished run archived."""
    with tarfile.open(archive, "r:gz") as tar:
        names = [n for n in tar.getnames() if n.endswith("/" + TABLE)]
        if not names:
            raise ValueError(f"{archive}: holds no {TABLE} (the run had not finished)")
        text = tar.extractfile(names[0]).read().decode("utf-8")
    return {row["id"]: row for row in csv.DictReader(io.StringIO(text))}


def run_table(results: Path) -> dict[str, dict[str, str]]:
    path = results / TABLE
    if not path.is_file():
        raise ValueError(f"{path}: no claims table (run the claims target)")
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["id"]: row for row in csv.DictReader(handle)}


REMOVED = "removed: not in the later version's claims file"


def verdict_changes(before: dict, after: dict, revisions: dict[str, str]) -> list[dict[str, str]]:
    """One row per claim of either table: its kind and verdict before and after, whether
    the verdict changed, and the revision note (what the later version changed, and why)."""
    rows = []
    for claim in [*after, *(c for c in before if c not in after)]:
        old, new = before.get(claim, {}), after.get(claim, {})
        said = {k: f"{row['verdict']} ({row['kind']})" if row else "—"
                for k, row in (("before", old), ("after", new))}  # fmt: skip
        revision = revisions.get(claim) or ("" if new else REMOVED)
        rows.append({"id": claim, **said, "changed": said["before"] != said["after"],
                     "revision": revision})  # fmt: skip
    return rows


def changes_markdown(rows: list[dict[str, str]]) -> str:
    lines = ["| claim | before | after | what changed, and why (the claim's `revision`) |",
             "|---|---|---|---|"]  # fmt: skip
    for r in rows:
        mark = "**" if r["changed"] else ""
        revision = (r["revision"] or "—").replace("|", "\\|")  # a table cell
        lines.append(f"| `{r['id']}` | {r['before']} | {mark}{r['after']}{mark} | {revision} |")
    changed = sum(r["changed"] for r in rows)
    return "\n".join(lines) + f"\n\n{changed} of {len(rows)} verdicts changed (in bold).\n"


def _revisions(claims_file: Path) -> dict[str, str]:
    import yaml

    section = yaml.safe_load(claims_file.read_text(encoding="utf-8"))["claims"]
    return {c["id"]: c.get("revision", "") for c in section["list"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    saving = commands.add_parser("save")
    saving.add_argument("--run", default="paper")
    saving.add_argument("--to", type=Path, required=True)
    restoring = commands.add_parser("restore")
    restoring.add_argument("--from", dest="source", type=Path, required=True)
    counting = commands.add_parser("machines")
    counting.add_argument("--run", default="paper")
    comparing = commands.add_parser("changes")
    comparing.add_argument("--before", type=Path, required=True, help="an archived run")
    comparing.add_argument("--run", default="paper")
    comparing.add_argument("--after", type=Path, help="an archived run instead of --run's")
    comparing.add_argument(
        "--claims", type=Path, default=Path("workflow/claims/config/claims.yaml")
    )
    args = parser.parse_args(argv)
    if args.command == "changes":
        try:
            after = (archived_table(args.after) if args.after
                     else run_table(Path("results") / args.run))  # fmt: skip
            rows = verdict_changes(archived_table(args.before), after, _revisions(args.claims))
        except (OSError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(changes_markdown(rows), end="")
        return 0
    if args.command == "machines":
        found = machines(Path("results") / args.run)
        if not found:
            print(f"error: no finished claims job under results/{args.run}", file=sys.stderr)
            return 1
        print(machines_markdown(found), end="")
    elif args.command == "save":
        print(f"{save_finished(args.run, args.to)} finished jobs saved to {args.to}")
    else:
        print(f"{restore_finished(args.source)} finished jobs restored from {args.source}; "
              f"resume with the run's snakemake command and {RESUME}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
