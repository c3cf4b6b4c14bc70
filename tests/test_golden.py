"""The golden checker bites: every tolerance kind fails just outside and passes just inside."""

import pytest

from tcrformer.core import golden, golden_file
from tcrformer.core.golden import FAIL, PASS, REPORT, SKIPPED, check, compare, report_markdown
from tcrformer.core.golden_file import (
    GoldenEntry,
    GoldenFileError,
    Tolerance,
    load_golden,
    parse_tolerance,
)

from conftest import ROOT


@pytest.mark.parametrize(
    ("tolerance", "explainer", "inside", "outside"),
    [
        ({"abs": 0.01}, 0.5, 0.5099, 0.5101),
        ({"abs": 0.01}, 0.5, 0.4901, 0.4899),
        ({"abs": 0.001}, [1.0, 2.0], [1.0009, 1.9991], [1.0, 2.0011]),
        ({"min": 0.9}, 0.99, 0.9, 0.8999),
        ({"max": 1e-5}, 4e-6, 1e-5, 1.0001e-5),
        ("exact", 256, 256, 257),
        ("exact", "FYQEYSSRISSAC", "FYQEYSSRISSAC", "FYQEYSSRISSCA"),
        ("exact", [2, 12, 8000], [2, 12, 8000], [2, 12, 8001]),
        ("exact-first-1", ["C", "S", "F", "V"], ["C", "A", "G", "L"], ["S", "C", "F", "V"]),
    ],
)
def test_tolerance_bites(tolerance, explainer, inside, outside):
    tol = parse_tolerance(tolerance, "test")
    assert compare(inside, explainer, tol)[0] == PASS
    assert compare(outside, explainer, tol)[0] == FAIL


def test_exact_treats_int_and_float_alike_but_not_strings():
    assert compare(256.0, 256, Tolerance("exact"))[0] == PASS
    assert compare("256", 256, Tolerance("exact"))[0] == FAIL


def test_abs_rejects_a_shape_mismatch_and_non_numbers():
    assert compare([1.0, 2.0, 3.0], [1.0, 2.0], Tolerance("abs", 1.0))[0] == FAIL
    assert compare("0.5", 0.5, Tolerance("abs", 1.0))[0] == FAIL
    assert compare(float("nan"), 0.5, Tolerance("abs", 1.0))[0] == FAIL


def test_report_only_is_never_pass_or_fail():
    assert compare(1e9, 250, Tolerance("report-only"))[0] == REPORT


def entry(key, value, tol="exact", chapter="toy"):
    return GoldenEntry(key, value, parse_tolerance(tol, key), chapter)


def test_missing_key_fails_and_extras_are_listed():
    rows, extras = check({"toy.a": 1, "toy.new": 2}, [entry("toy.a", 1), entry("toy.b", 2)])
    status = {r.key: r.status for r in rows}
    assert status == {"toy.a": PASS, "toy.b": FAIL}
    assert extras == ["toy.new"]


def test_unavailable_prefix_skips_with_its_reason():
    values = {"esm2.unavailable": "weights could not be downloaded", "esm2.chain_length": 131}
    rows, _ = check(values, [entry("esm2.chain_length", 131), entry("esm2.p_C", 0.98)])
    by_key = {r.key: r for r in rows}
    assert by_key["esm2.chain_length"].status == PASS
    assert by_key["esm2.p_C"].status == SKIPPED
    assert "downloaded" in by_key["esm2.p_C"].reason


def test_other_inputs_skip_rather_than_fail():
    inputs = {"toy": {"toy.sequence": "CASSIRSSYEQYF"}}
    config = {"toy": {"sequence": "CASSLAPGATNEKLFF"}}
    rows, _ = check({"toy.x": 2}, [entry("toy.x", 1)], inputs, config)
    assert rows[0].status == SKIPPED and "inputs differ" in rows[0].reason


def test_chapter_selection():
    rows, _ = check({}, [entry("toy.a", 1), entry("pe.b", 2, chapter="notes")], chapters={"notes"})
    assert [r.key for r in rows] == ["pe.b"]


def test_unknown_tolerance_kind_names_the_file(tmp_path):
    bad = tmp_path / "golden.yaml"
    bad.write_text("values:\n- {key: toy.a, chapter: toy, value: 1, tolerance: {rel: 0.1}}\n")
    with pytest.raises(GoldenFileError, match=r"golden\.yaml: toy\.a: unknown tolerance"):
        load_golden(bad)


def test_golden_file_that_is_not_yaml_names_the_file(tmp_path):
    bad = tmp_path / "golden.yaml"
    bad.write_text("values: [unclosed\n")
    with pytest.raises(GoldenFileError, match="golden.yaml"):
        load_golden(bad)


def test_project_golden_file_loads_and_names_every_chapter():
    entries, inputs = load_golden(ROOT / "config/golden/explainer_values.yaml")
    assert {e.chapter for e in entries} >= {"toy", "notes", "reversal", "plm"}
    assert inputs["toy"]["toy.sequence"] == "CASSIRSSYEQYF"


def test_markdown_report_has_one_row_per_key_and_no_stray_pipes():
    rows, extras = check({"toy.a": [1.0, 2.0]}, [entry("toy.a", [1.0, 2.5], {"abs": 0.1})])
    text = report_markdown(rows, extras, "t", "g.yaml")
    table = [line for line in text.splitlines() if line.startswith("| `toy.a`")]
    assert len(table) == 1 and table[0].count("|") == 7


# The bands file (golden check v3) ----------------------------------------------------------


def golden_with_bands(tmp_path, bands_text: str | None, budget: float = 0.01):
    """A copy of the committed golden file beside a bands file of `bands_text` (None: none)."""

    path = tmp_path / "explainer_values.yaml"
    path.write_text((ROOT / "config/golden/explainer_values.yaml").read_text()
                    .replace("error_budget: 0.01", f"error_budget: {budget}"))  # fmt: skip
    (tmp_path / "v3").mkdir()
    if bands_text is not None:
        (tmp_path / "v3/bands.yaml").write_text(bands_text)
    return path


@pytest.mark.parametrize(
    ("edit", "budget", "message"),
    [
        (None, 0.01, "bands file named by"),
        ("{not yaml", 0.01, "not valid YAML"),
        ("version: 3\nbands: [1, 2]\n", 0.01, "expected a mapping with a 'bands:' mapping"),
        ("version: 2", 0.01, "bands of method version 2, this code judges version 3"),
        ("", 0.05, "bands made for error_budget 0.01, the golden file's is 0.05"),
    ],
    ids=["missing", "malformed", "no bands", "another version", "another budget"],
)
def test_a_bands_file_that_cannot_judge_is_one_line_naming_it(tmp_path, edit, budget, message):

    committed = (ROOT / "config/golden/v3/bands.yaml").read_text()
    if edit == "version: 2":
        text = committed.replace("\nversion: 3\n", "\nversion: 2\n")
    else:
        text = committed if edit == "" else edit
    path = golden_with_bands(tmp_path, text, budget)
    with pytest.raises(golden_file.GoldenFileError) as raised:
        golden_file.load_golden(path)
    line = str(raised.value)
    assert message in line and "\n" not in line and "v3/bands.yaml" in line, line


def test_the_committed_bands_judge_both_sides_and_report_printed_values():

    entries, _ = golden_file.load_golden(ROOT / "config/golden/explainer_values.yaml")
    by_key = {e.key: e for e in entries}
    late = by_key["reversal.curve.loss_late"].tolerance
    assert late.kind == "ensemble" and late.band.low < late.band.high
    assert golden.compare(late.band.low - 1e-4, None, late)[0] == "FAIL"
    assert golden.compare((late.band.low + late.band.high) / 2, None, late)[0] == "PASS"
    printed = by_key["reversal.heldout_exact"].tolerance
    status, reason = golden.compare(999, 999, printed)
    assert status == "REPORT" and reason.startswith("at percentile ")
    assert by_key["reversal.heldout_exact"].placement.startswith("at percentile ")
    cdr3 = by_key["reversal.cdr3_output"]
    assert golden.compare("AAA", cdr3.value, cdr3.tolerance)[1].startswith("wrong; right in ")
