"""Chapter compare: two finished runs side by side, checked before any rule runs.

Unit tests build fake runs (a manifest, values.json, the toy and reversal files) in a
temporary results folder; the slow test makes two real short runs in a workflow copy and
compares them through Snakemake.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tcrformer.chapters.compare import compute, figure_data
from tcrformer.chapters.compare.settings import Settings
from tcrformer.core.config import ConfigError
from tcrformer.core.golden_file import Band, GoldenEntry, Tolerance
from tcrformer.core.io import sha256, write_named

from conftest import private_copy, snakemake

TOY = "CASSIRSSYEQYF"


def fake_run(
    results: Path,
    run: str,
    values: dict | None = None,
    config: dict | None = None,
    sequence: str = TOY,
    reversal: bool = True,
    commit: str = "0123456789abcdef",
) -> Path:
    """A complete run: its result files and a manifest listing them (paths from the root)."""
    folder = results / run
    n = len(sequence)
    weights = np.full((4, n, n), 1.0 / n)
    weights[0] = np.eye(n)
    files = {
        "values.json": json.dumps(values or {"toy.n": n}),
        "toy/figure_data.json": json.dumps({"sequence": sequence}),
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    np.save(folder / "toy/attention_weights.npy", weights)
    listed = [*files, "toy/attention_weights.npy"]
    if reversal:
        (folder / "reversal").mkdir()
        pd.DataFrame({"step": range(1, 31), "loss": np.linspace(3.0, 1.0, 30)}).to_csv(
            folder / "reversal/losses.csv", index=False
        )
        source = "CASSIRSSYEQYF"
        np.save(folder / "reversal/cross_attention.npy", np.full((4, 14, 13), 1 / 13))
        labels = {"source": source, "output": source[::-1]}
        (folder / "reversal/figure_data.json").write_text(json.dumps(labels))
        listed += ["reversal/losses.csv", "reversal/cross_attention.npy"]
    manifest = {
        "git": {"commit": commit, "dirty": False},
        "config_sha256": "f" * 64,
        "config": {"run": run, "toy": {"sequence": sequence}, **(config or {})},
        "numerics": {"toy_values": {"mode": "portable", "threads": 1}},
        "files": {f"{results.name}/{run}/{path}": {"sha256": "", "rule": "x"} for path in listed},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    fake_run(folder, "paper")
    fake_run(folder, "alt", sequence="CASSLAPGATNEKLFF", reversal=False)
    return folder


def settings_error(results: Path, runs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        Settings.from_config({"compare": runs}, results=results)
    error = caught.value
    assert error.key == "compare" and "\n" not in str(error)
    return error


# The settings ---------------------------------------------------------------------------------


def test_no_runs_checks_nothing_and_the_target_asks_for_two(tmp_path):
    settings = Settings.from_config({}, results=tmp_path / "nowhere")
    assert settings.runs == ()
    assert Settings.from_config({"compare": []}).runs == ()
    with pytest.raises(ConfigError, match="name two runs to compare"):
        settings.require_pair()


def test_two_complete_runs(results):
    settings = Settings.from_config({"compare": ["paper", "alt"]}, results=results)
    assert (settings.a, settings.b, settings.name) == ("paper", "alt", "paper_vs_alt")
    assert settings.output() == results / "compare" / "paper_vs_alt"
    digests = settings.manifest_sha256()
    assert set(digests) == {"paper", "alt"} and all(len(d) == 64 for d in digests.values())


@pytest.mark.parametrize(
    ("runs", "named", "problem"),
    [
        (["paper"], "'paper'", "name two runs, not 1"),
        (["paper", "alt", "third"], "'third'", "name two runs, not 3"),
        (["paper", "paper"], "'paper'", "the same run named twice"),
        (["paper", "ghost"], "'ghost'", "no such run"),
        (["compare", "paper"], "'compare'", "holds the comparisons"),
    ],
)
def test_a_bad_pair_is_one_line_naming_the_run(results, runs, named, problem):
    message = str(settings_error(results, runs))
    assert message.startswith("config error: compare = ") and named in message
    assert problem in message


def test_a_run_without_its_manifest_is_incomplete(results):
    (results / "alt" / "manifest.json").unlink()
    message = str(settings_error(results, ["paper", "alt"]))
    assert "'alt'" in message and "run alt is incomplete" in message
    assert "manifest.json" in message and "--config run=alt" in message


def test_a_run_missing_a_file_its_manifest_lists_is_incomplete(results):
    (results / "paper" / "toy" / "attention_weights.npy").unlink()
    message = str(settings_error(results, ["paper", "alt"]))
    assert "run paper is incomplete" in message
    assert "paper/toy/attention_weights.npy" in message and "listed in" in message


def test_an_unreadable_manifest_is_incomplete(results):
    (results / "alt" / "manifest.json").write_text("{not json")
    assert "is not a manifest" in str(settings_error(results, ["paper", "alt"]))


# The value table ------------------------------------------------------------------------------


def entry(key: str, tolerance: Tolerance) -> GoldenEntry:
    return GoldenEntry(key=key, value=None, tolerance=tolerance, chapter="toy")


ENTRIES = [
    entry("loose", Tolerance("abs", 0.01)),
    entry("tight", Tolerance("abs", 0.001)),
    entry("exact.int", Tolerance("exact")),
    entry("bounded", Tolerance("min", 0.5)),
    entry("shown", Tolerance("report-only")),
    entry("band", Tolerance("ensemble", band=Band(0.0, 1.0, 32))),
    entry("first", Tolerance("exact-first-1")),
]


def table_of(a: dict, b: dict) -> pd.DataFrame:
    return compute.value_table(a, b, ENTRIES, ("paper", "alt")).set_index("key")


def test_a_tolerance_tells_values_apart_or_not():
    table = table_of({"loose": 0.500, "tight": 0.500}, {"loose": 0.505, "tight": 0.505})
    assert not table.loc["loose", "differs"] and table.loc["tight", "differs"]
    assert table.loc["loose", "difference"] == pytest.approx(0.005)
    assert table.loc["loose", "rule"] == "golden abs 0.01"


def test_exact_keys_and_keys_without_a_golden_entry():
    table = table_of(
        {"exact.int": 3, "extra": 1, "other": 2.0, "first": [1, 2]},
        {"exact.int": 4, "extra": 1.0, "other": 2.5, "first": [1, 3]},
    )
    assert table.loc["exact.int", "differs"] and table.loc["exact.int", "difference"] == 1
    assert not table.loc["extra", "differs"]  # 1 == 1.0, as the golden check has it
    assert table.loc["other", "differs"] and table.loc["other", "rule"] == "exact: no golden entry"
    assert not table.loc["first", "differs"]  # the golden rule: only the first element counts
    assert table.loc["first", "difference"] == 1


def test_bounds_report_only_and_ensemble_keys_differ_unless_exactly_equal():
    values = {"bounded": 0.9, "shown": 5.0, "band": 0.5}
    assert not table_of(values, dict(values))["differs"].any()
    other = table_of(values, {"bounded": 0.95, "shown": 6.0, "band": 0.6})
    assert other["differs"].all()
    assert other.loc["bounded", "rule"] == "exact: golden min is a one-sided bound"
    assert other.loc["shown", "rule"] == "exact: golden report-only is report-only"
    assert other.loc["band", "rule"] == "exact: golden ensemble is an ensemble band"


def test_lists_strings_and_keys_of_one_run():
    table = table_of(
        {"list": [[1.0, 2.0], [3.0, 4.0]], "ragged": [1, 2], "word": "CASS", "same": "CASS",
         "gone": 1},
        {"list": [[1.0, 2.5], [3.0, 3.0]], "ragged": [1, 2, 3], "word": "CAST", "same": "CASS",
         "new": [1]},
    )  # fmt: skip
    assert table.loc["list", "difference"] == 1.0 and table.loc["list", "differs"]
    assert table.loc["list", "value_a"] == "[[1.0, 2.0], [3.0, 4.0]]"
    assert table.loc["ragged", "difference"] == "shape differs" and table.loc["ragged", "differs"]
    assert table.loc["word", "difference"] == "not equal" and table.loc["word", "differs"]
    assert table.loc["same", "difference"] == "equal" and not table.loc["same", "differs"]
    assert table.loc["gone", "rule"] == "only in paper" and table.loc["gone", "value_b"] == ""
    assert table.loc["new", "rule"] == "only in alt" and table.loc["new", "differs"]
    assert list(table.index) == sorted(table.index)


# The config diff ------------------------------------------------------------------------------


def test_the_config_diff_names_every_dotted_key_that_differs():
    a = {"run": "paper", "toy": {"sequence": "CASS", "block": {"seed": 0}}, "list": [1, 2],
         "same": {"x": 1}, "gone": True}  # fmt: skip
    b = {"run": "alt", "toy": {"sequence": "CAST", "block": {"seed": 0}}, "list": [1, 3],
         "same": {"x": 1.0}, "new": None}  # fmt: skip
    assert compute.diff(a, b) == {
        "gone": {"a": True, "only_in": "a"},
        "list": {"a": [1, 2], "b": [1, 3]},
        "new": {"b": None, "only_in": "b"},
        "run": {"a": "paper", "b": "alt"},
        "toy.sequence": {"a": "CASS", "b": "CAST"},
    }


def test_the_config_diff_of_two_manifests_has_config_git_and_numerics():
    a = {"config": {"toy": {"sequence": "CASS"}}, "git": {"commit": "a1", "dirty": False},
         "numerics": {"toy_values": {"threads": 1}}}  # fmt: skip
    b = {"config": {"toy": {"sequence": "CASS"}}, "git": {"commit": "b2", "dirty": False},
         "numerics": {"toy_values": {"threads": 2}}}  # fmt: skip
    result = compute.config_diff(a, b, ("paper", "alt"))
    assert (result["a"], result["b"]) == ("paper", "alt")
    assert result["config"] == {} and result["git"] == {"commit": {"a": "a1", "b": "b2"}}
    assert result["numerics"] == {"toy_values.threads": {"a": 1, "b": 2}}
    assert result["differ"] == {"config": 0, "git": 1, "numerics": 1}


# The rule, on fake runs -----------------------------------------------------------------------


OUTPUTS = {
    "values": "values.csv",
    "config_diff": "config_diff.json",
    "summary": "summary.md",
    "losses_png": "losses.png",
    "losses_svg": "losses.svg",
    "attention_png": "attention.png",
    "attention_svg": "attention.svg",
}


def test_compare_runs_writes_every_output_byte_stable(results, tmp_path):
    fake_run(results, "paper2", values={"toy.n": 13, "toy.word": "CASS"}, commit="feedbeef" * 5)
    settings = Settings.from_config({"compare": ["paper", "paper2"]}, results=results)
    written = []
    for attempt in ("one", "two"):
        out = tmp_path / attempt
        write_named({k: str(out / v) for k, v in OUTPUTS.items()}, compute.compare_runs(
            settings, ENTRIES))  # fmt: skip
        written.append({name: (out / name).read_bytes() for name in OUTPUTS.values()})
    assert written[0] == written[1]
    out = tmp_path / "one"
    summary = (out / "summary.md").read_text()
    assert "# Compare: run paper against run paper2" in summary
    assert "`feedbeeffeed`" in summary and "`0123456789ab`" in summary
    assert "**1 of 2 keys differ** (1 in one run only)" in summary
    diffs = json.loads((out / "config_diff.json").read_text())
    assert diffs["config"] == {"run": {"a": "paper", "b": "paper2"}}
    assert set(diffs["manifest_sha256"]) == {"paper", "paper2"}
    assert pd.read_csv(out / "values.csv")["key"].tolist() == ["toy.n", "toy.word"]


def test_a_run_without_reversal_files_still_compares(results, tmp_path):
    settings = Settings.from_config({"compare": ["paper", "alt"]}, results=results)
    runs = {run: figure_data.read(figure_data.paths(results / run)) for run in ("paper", "alt")}
    assert runs["alt"].losses is None and runs["alt"].cross_attention is None
    assert runs["paper"].output == "FYQEYSSRISSAC" and runs["alt"].sequence == "CASSLAPGATNEKLFF"
    out = tmp_path / "out"
    write_named({k: str(out / v) for k, v in OUTPUTS.items()}, compute.compare_runs(settings, []))
    for name in OUTPUTS.values():
        assert (out / name).stat().st_size > 0, name
    summary = (out / "summary.md").read_text()
    assert "| `toy.sequence` | CASSIRSSYEQYF | CASSLAPGATNEKLFF |" in summary
    svg = (out / "losses.svg").read_text()
    assert "<svg" in svg


# Through Snakemake: the suite's two complete runs ----------------------------------------------

PAIR = "compare=[paper, other]"


@pytest.fixture(scope="module")
def two_runs(full_run, other_run, tmp_path_factory):
    """One workflow copy that holds both of the suite's complete runs: paper (the full
    default run) and other (another receptor, other model sizes, a short training), with
    their .snakemake records, so that Snakemake finds both runs done."""
    wf = private_copy(full_run, tmp_path_factory.mktemp("compare") / "wf")
    for part in ("results/other", ".snakemake/metadata"):
        shutil.copytree(other_run / part, wf / part, dirs_exist_ok=True)
    return wf


def one_config_error(proc) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("config error")]
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return errors[0]


@pytest.mark.slow
def test_bad_pairs_stop_snakemake_before_any_rule(two_runs):
    wf = two_runs
    shutil.rmtree(wf / "results/compare", ignore_errors=True)
    incomplete = wf / "results/half"
    (incomplete / "toy").mkdir(parents=True)
    cases = [
        ("compare=[paper]", "'paper'"),
        ("compare=[paper, alt, paper]", "'paper'"),
        ("compare=[paper, ghost]", "'ghost'"),
        ("compare=[paper, half]", "'half'"),
    ]
    for pair, named in cases:
        error = one_config_error(snakemake(wf, "compare", "--config", pair))
        assert error.startswith("config error: compare = ") and named in error, (pair, error)
        assert not (wf / "results/compare").exists(), pair
    error = one_config_error(snakemake(wf, "compare"))
    assert "name two runs" in error and "compare=" in error
    assert not (wf / "results/compare").exists()
    # A run the manifest no longer matches: a file it lists is gone.
    figure = wf / "results/other/figures/fig01_toy_input.svg"
    kept = figure.read_bytes()
    figure.unlink()
    try:
        error = one_config_error(snakemake(wf, "compare", "--config", PAIR))
        assert "run other is incomplete" in error and "fig01_toy_input.svg" in error
    finally:
        figure.write_bytes(kept)
    assert not (wf / "results/compare").exists()
    shutil.rmtree(incomplete)


@pytest.mark.slow
def test_compare_two_real_runs(two_runs):
    wf = two_runs
    manifests = {run: sha256(wf / f"results/{run}/manifest.json") for run in ("paper", "other")}
    proc = snakemake(wf, "compare", "--config", PAIR)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 of 2 steps (100%) done" in proc.stderr  # compare_runs and the target, nothing else
    assert manifests == {run: sha256(wf / f"results/{run}/manifest.json") for run in manifests}
    out = wf / "results/compare/paper_vs_other"
    for name in OUTPUTS.values():
        assert (out / name).stat().st_size > 0, name
    table = pd.read_csv(out / "values.csv").set_index("key")
    assert table.loc["toy.sequence", ["differs", "rule"]].tolist() == [True, "golden exact"]
    pairs = table.loc["toy.attention_map.pairs", ["value_a", "value_b"]]
    assert pairs.astype(str).tolist() == ["169", "256"]  # 13 and 16 residues, squared
    assert table.loc["toy.attention_map.pairs", "differs"]
    assert table.loc["toy.head1.focus_position", "rule"] == "exact: no golden entry"
    assert table.loc["toy.head1.weight_R_to_E", "rule"] == "only in paper"
    # Other model sizes: the notes chapter's counts and encodings, and the trained values.
    for chapter in ("params.", "pe.", "reversal."):
        assert table[table.index.str.startswith(chapter)]["differs"].any(), chapter
    diffs = json.loads((out / "config_diff.json").read_text())
    assert diffs["config"]["toy.sequence"] == {"a": "CASSIRSSYEQYF", "b": "CASSLAPGATNEKLFF"}
    assert diffs["config"]["run"] == {"a": "paper", "b": "other"}
    assert diffs["config"]["notes.d_model"] == {"a": 512, "b": 128}
    summary = (out / "summary.md").read_text()
    assert "toy.sequence" in summary and "Compare: run paper against run other" in summary
    again = snakemake(wf, "compare", "--config", PAIR)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    report = snakemake(wf, "compare", "--config", PAIR, "--report", "compare.zip")
    assert report.returncode == 0, report.stderr[-3000:]
