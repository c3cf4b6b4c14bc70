"""Self-contained HTML pages of the golden check and the manifest, for the Snakemake report.

The report shows JSON as raw text; these pages show the same content as tables that read
at a glance (one row per golden value with its verdict, one row per result file).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from tcrformer.core.text import short

STATUS_COLOURS = {"PASS": "#d8f0dd", "FAIL": "#f8d7d3", "SKIPPED": "#fdf0c8", "REPORT": "#e3e9f2"}

CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 13px; margin: 1.5em; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin-top: 1.5em; }
table { border-collapse: collapse; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num, th.num { text-align: right; }
code { font-size: 12px; }
"""


def _cell(text: Any, cls: str = "", style: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' style="{style}"' if style else "")
    return f"<td{attrs}>{html.escape(str(text))}</td>"


def _table(headers: Sequence[str], rows: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>\n"
    )


def _golden_row(row: Mapping) -> str:
    status = row["status"]
    return (
        "<tr>"
        + "".join(
            [
                _cell(row["key"]),
                _cell(short(row["explainer_value"], 60)),
                _cell(short(row["value"], 60)),
                _cell(row["tolerance"]),
                _cell(status, style=f"background:{STATUS_COLOURS.get(status, '#fff')}"),
                _cell(row.get("reason", "")),
            ]
        )
        + "</tr>"
    )


def golden_html(report: Mapping, title: str) -> str:
    """The golden report: the explainer's value, ours, tolerance, status; a table a chapter."""
    summary = report.get("summary", {})
    counts = ", ".join(f"{summary[s]} {s}" for s in STATUS_COLOURS if s in summary)
    body = [
        f"<p>Regenerated values against <code>{html.escape(report['golden_file'])}</code>: "
        f"<b>{html.escape(counts)}</b>.</p>"
    ]
    chapters = list(dict.fromkeys(row["chapter"] for row in report["rows"]))
    headers = ("key", "explainer value", "regenerated", "tolerance", "status", "note")
    for chapter in chapters:
        rows = [_golden_row(r) for r in report["rows"] if r["chapter"] == chapter]
        body += [f"<h2>Chapter {html.escape(chapter)}</h2>", _table(headers, rows)]
    extras = report.get("extra_keys", [])
    if extras:
        body.append(f"<h2>Produced without a published value ({len(extras)})</h2>")
        body.append("<p>" + ", ".join(f"<code>{html.escape(k)}</code>" for k in extras) + "</p>")
    return _page(title, "\n".join(body))


def _key_values(mapping: Mapping) -> str:
    rows = [f"<tr>{_cell(k)}{_cell(short(v, 100))}</tr>" for k, v in mapping.items()]
    return _table(("name", "value"), rows)


def _file_row(path: str, info: Mapping) -> str:
    size = _cell(f"{info['bytes']:,}", cls="num")
    digest = f"<td><code>{html.escape(info['sha256'])}</code></td>"
    return f"<tr>{_cell(path)}{_cell(info['rule'])}{size}{digest}</tr>"


def manifest_html(manifest: Mapping, title: str) -> str:
    """The provenance manifest: versions, git state, config digest, and every result file."""
    files = manifest.get("files", {})
    rows = [_file_row(path, info) for path, info in sorted(files.items())]
    body = [
        "<h2>Project and git state</h2>",
        _key_values(
            {
                **manifest.get("project", {}),
                **manifest.get("git", {}),
                "config sha256": manifest.get("config_sha256", ""),
            }
        ),
        "<h2>Versions</h2>",
        _key_values(manifest.get("versions", {})),
        f"<h2>Result files ({len(files)})</h2>",
        _table(("file", "rule", "bytes", "sha256"), rows),
    ]
    return _page(title, "\n".join(body))


def benchmarks_html(frame, title: str) -> str:
    """Every benchmarked job of the run: wall time, max RSS, CPU time (machine-dependent)."""
    rows = [
        "<tr>" + _cell(r.job) + _cell(f"{r.wall_seconds:.1f}", "num")
        + _cell(f"{r.max_rss_mb:.0f}", "num") + _cell(f"{r.cpu_seconds:.1f}", "num") + "</tr>"
        for r in frame.itertuples(index=False)
    ]  # fmt: skip
    note = (
        "<p>Measured by Snakemake's <code>benchmark:</code> directive on the machine that ran "
        "the job; they vary from run to run and are never compared. Cached rules (the "
        "training, the language models) have no benchmark: see training_time.json.</p>"
    )
    headers = ["job", "wall time (s)", "max RSS (MB)", "CPU time (s)"]
    return _page(title, note + _table(headers, rows))


def landing_html(run: str, manifest: Mapping, golden: Mapping, chapters: Mapping[str, list]) -> str:
    """The report's front page: which run this is, how its golden check went, the numerics in
    force, and what each section holds. `chapters` maps a report section to its figure ids."""
    from tcrformer.core.numerics import one_line

    git = manifest.get("git", {})
    counts = golden.get("summary", {})
    verdict = "; ".join(f"{n} {status}" for status, n in counts.items())
    facts = {
        "run": run,
        "commit": f"{git.get('commit', 'unknown')}"
        + (" (with local changes)" if git.get("dirty") else ""),
        "config sha256": manifest.get("config_sha256", ""),
        "golden check": verdict,
    }
    numerics = {process: one_line(n) for process, n in manifest.get("numerics", {}).items()}
    sections = [f"<li><b>{html.escape(name)}</b>: {html.escape(', '.join(ids) or '-')}</li>"
                for name, ids in chapters.items()]  # fmt: skip
    body = [
        _key_values(facts),
        "<h2>Numerics in force</h2>",
        _key_values(numerics),
        "<h2>The sections of this report</h2>",
        "<ul>" + "".join(sections) + "</ul>",
        "<p>Each section is in the report's menu; every figure has its caption, and the "
        "golden table and the manifest are in section 0.</p>",
    ]
    return _page(f"Run {run}", "\n".join(body))
