"""Figures: the fast chapters' figure rules run, every PNG opens, reruns are byte-identical,
and nothing that draws a figure imports code that trains or loads a model."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from conftest import ROOT, snakemake

PLOTTING = ROOT / "workflow" / "lib" / "tcrformer" / "plotting"
CLAIMS = ROOT / "workflow" / "claims"  # the claims' own figures: their package, script, captions
SCRIPTS = [ROOT / "workflow" / "scripts" / f"{name}.py"
           for name in ("draw_figure", "golden_table", "manifest_table")]  # fmt: skip
SCRIPTS += [CLAIMS / "scripts" / "draw_figure.py"]
FIGURE_CODE = [ROOT / "workflow" / "lib" / "tcrformer" / "figures.py"] + sorted(
    (ROOT / "workflow" / "lib" / "tcrformer" / "chapters").glob("*/figure_data.py")
)
CLAIMS_FIGURE_CODE = [CLAIMS / "lib/tcrclaims" / f"{name}.py"
                      for name in ("figure_data", "figures", "plotting")]  # fmt: skip
CAPTIONS = ROOT / "workflow" / "report" / "figures"

# Modules that train or load a model: a figure must be drawable without any of them. Of a
# chapter's package, figure code may read its settings and its figure data, nothing else.
MODEL_MODULES = (
    "torch",
    "esm",
    "sceptr",
    "libtcrlm",
    "tcrformer.models.transformer",
    "tcrformer.models.fast",
    "tcrformer.training.loop",
    "tcrformer.training.model",
    "tcrformer.training.measures",
    "tcrformer.training.data",
    "tcrformer.training.evaluate",
)
CHAPTER_PARTS_FOR_FIGURES = ("settings", "figure_data")
CLAIMS_PARTS_FOR_FIGURES = (*CHAPTER_PARTS_FOR_FIGURES, "figures", "plotting")
PNG_WIDTH_PX = (600, 3000)
PNG_HEIGHT_PX = (300, 2500)


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved in tcrformer)."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = ["tcrformer", "plotting"][: 3 - node.level]
                base = ".".join([*package, base] if base else package)
            names |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return names


def is_model_module(name: str) -> bool:
    if any(name == m or name.startswith(f"{m}.") for m in MODEL_MODULES):
        return True
    parts = name.split(".")
    if parts[0] == "tcrclaims":  # a chapter's package of its own
        return len(parts) > 1 and parts[1] not in CLAIMS_PARTS_FOR_FIGURES
    in_chapter = parts[:2] == ["tcrformer", "chapters"] and len(parts) > 3
    return in_chapter and parts[3] not in CHAPTER_PARTS_FOR_FIGURES


@pytest.mark.parametrize(
    "path",
    SCRIPTS + FIGURE_CODE + CLAIMS_FIGURE_CODE + sorted(PLOTTING.glob("*.py")),
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_figure_code_imports_no_model_code(path):
    offending = sorted(n for n in imported_modules(path) if is_model_module(n))
    assert not offending, f"{path.name} imports {offending}"


def test_importing_the_plotting_package_loads_no_model_code():
    modules = [f"tcrformer.plotting.{p.stem}" for p in PLOTTING.glob("*.py")]
    modules += ["tcrformer.figures"] + [f"tcrformer.chapters.{p.parent.name}.figure_data"
                                         for p in FIGURE_CODE[1:]]  # fmt: skip
    modules += [f"tcrclaims.{p.stem}" for p in CLAIMS_FIGURE_CODE]
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [m for m in loaded if is_model_module(m)]


def test_the_import_check_sees_relative_and_model_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from tcrformer.chapters.reversal import compute\nimport torch.nn\nfrom . import style\n"
    )
    names = imported_modules(probe)
    assert {"tcrformer.chapters.reversal.compute", "torch.nn", "tcrformer.plotting.style"} <= names
    assert is_model_module("tcrformer.chapters.reversal.compute")
    assert is_model_module("tcrformer.training.evaluate")
    assert is_model_module("tcrformer.training.loop")
    assert is_model_module("tcrclaims.compute") and not is_model_module("tcrclaims.plotting")
    assert not is_model_module("tcrformer.chapters.toy.figure_data")
    assert not is_model_module("tcrformer.core.io")


def test_every_figure_has_a_caption_a_draw_function_and_a_name_after_the_seed():
    """The library's figures and the claims' (captions in their own folder)."""
    from tcrclaims.figures import FIGURES as CLAIMS_FIGURES
    from tcrformer.figures import FIGURES

    names = [figure.id for figure in (*FIGURES, *CLAIMS_FIGURES)]
    assert len(set(names)) == len(names)
    captions = {**dict.fromkeys(FIGURES, CAPTIONS),
                **dict.fromkeys(CLAIMS_FIGURES, CLAIMS / "report" / "figures")}  # fmt: skip
    for figure, folder in captions.items():
        assert re.fullmatch(r"fig(\d\d|S\d|C\d)_[a-z0-9_]+", figure.id), figure.id
        assert (folder / f"{figure.id}.rst").read_text().strip(), figure.id
        assert callable(figure.draw_function()), figure.id
    assert all(f.id.startswith("figC") for f in CLAIMS_FIGURES) and len(CLAIMS_FIGURES) == 7


def check_png(path: Path) -> None:
    image = imread(path)
    height, width = image.shape[:2]
    assert PNG_WIDTH_PX[0] <= width <= PNG_WIDTH_PX[1], (path.name, width)
    assert PNG_HEIGHT_PX[0] <= height <= PNG_HEIGHT_PX[1], (path.name, height)
    assert image.std() > 0.01, f"{path.name} is blank"


@pytest.mark.slow
def test_the_default_runs_figures_are_valid_files_and_its_report_shows_them(full_run, other_run):
    """Every figure of the suite's default run is a PNG of a sane size that is not blank, and
    an SVG, neither carrying the software's name or a date (test_reliability checks that
    another run draws the same bytes); the report of the other run shows each figure under
    its chapter's section."""
    from tcrformer.chapters import records
    from tcrformer.figures import FIGURES

    in_all = {chapter.name for chapter in records() if chapter.writes_values}  # as common.smk
    drawn = [f for f in FIGURES if f.chapter in (*in_all, None)]
    figures = full_run / "results" / "paper" / "figures"
    for figure in drawn:
        check_png(figures / f"{figure.id}.png")
        svg = (figures / f"{figure.id}.svg").read_bytes()
        assert svg.startswith(b"<?xml"), figure.id
        for data in (svg, (figures / f"{figure.id}.png").read_bytes()):
            assert b"Software" not in data[:4096] and b"<dc:date>" not in data, figure.id
    with zipfile.ZipFile(other_run / "other_report.zip") as archive:
        page = "".join(archive.read(n).decode() for n in archive.namelist() if n.endswith(".html"))
    for figure in drawn:
        assert f"{figure.id}.png" in page, figure.id
    assert "1. Toy Transformer" in page and "5. Schematics" in page


def test_figure_choices_come_from_the_config(workflow_copy):
    """figures.pad_tokens reaches the Fig. 12 data; a wave dimension past d_model is refused."""
    masks = "results/paper/notes/figure_data.json"
    built = snakemake(workflow_copy, masks, "--config", "figures={'pad_tokens': 5}")
    assert built.returncode == 0, built.stderr[-3000:]
    data = json.loads((workflow_copy / masks).read_text())
    assert data["padded_decoder_input"].count("<pad>") == 5
    refused = snakemake(workflow_copy, masks, "--config", "figures={'wave_dims': [0, 600]}")
    assert refused.returncode == 1
    assert "config error: figures.wave_dims[1] = 600: not below notes.d_model = 512" in (
        refused.stderr
    )


# The language-model figures from hand-made results (no model needed).


def guess(position: int, true: str, top: str) -> dict:
    probabilities = {aa: 0.01 for aa in "ACDEFGHIKLMNPQRSTVWY"}
    probabilities[top] = 0.81
    return {
        "model": "sceptr",
        "position": position,
        "true_residue": true,
        "probabilities": probabilities,
        "p_true": probabilities[true],
    }


def scan_table(models=("sceptr",)) -> pd.DataFrame:
    cdr3, segments = "CASSIRS", ["V-gene"] * 5 + ["junction"] * 2
    rows = [
        {"model": m, "position": i + 1, "true_residue": aa, "segment": s, "p_true": 0.5}
        for m in models
        for i, (aa, s) in enumerate(zip(cdr3, segments, strict=True))
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("esm2_available", [False, True])
def test_plm_figures_draw_with_and_without_esm2(tmp_path, esm2_available):
    from tcrformer.plotting import plm, style

    sceptr = {"variant": "SCEPTR_MLM_only", "guesses": [guess(1, "C", "C"), guess(6, "R", "G")]}
    esm2 = {"model": "esm2_t12_35M_UR50D", "available": False, "reason": "no weights here"}
    if esm2_available:
        esm2 = {**esm2, "available": True, "guesses": [guess(1, "C", "C")]}
    fig = plm.draw_masked_guesses(esm2, sceptr, "CASSIRS")
    titles = [ax.get_title() for ax in fig.axes]
    assert sum("SCEPTR" in t for t in titles) == 2
    assert sum("ESM-2" in t for t in titles) == (1 if esm2_available else 0)
    scan = plm.draw_cdr3_scan(
        scan_table(("esm2", "sceptr") if esm2_available else ("sceptr",)),
        {"sceptr": {"mean_p_true_germline": 0.8, "mean_p_true_junctional": 0.1}},
        plm.model_details(esm2, sceptr),
    )
    style.save(scan, tmp_path / "scan.png", tmp_path / "scan.svg")
    check_png(tmp_path / "scan.png")


def test_top_guesses_and_the_masked_cdr3():
    from tcrformer.plotting import plm

    assert plm.top_guesses({"A": 0.2, "C": 0.5, "D": 0.2, "E": 0.1}, k=3) == [
        ("C", 0.5),
        ("A", 0.2),
        ("D", 0.2),
    ]
    assert plm.masked("CASSIRSSYEQYF", 6) == "CASSI·SSYEQYF"


def test_the_plm_figure_data_reads_the_cdr3_back_from_the_scan():
    from tcrformer.chapters.plm.figure_data import PlmFigures

    assert PlmFigures({}, {}, scan_table(("esm2", "sceptr")), {}).cdr3 == "CASSIRS"


def test_teacher_forcing_and_masks():
    from tcrformer.chapters.notes.compute import teacher_forcing

    masks = teacher_forcing("CAS", pad_tokens=2)
    assert masks["decoder_input"] == ["<bos>", "C", "A", "S"]
    assert masks["target"] == ["C", "A", "S", "<eos>"]
    causal = np.array(masks["causal"])
    assert (causal == np.tril(np.ones((6, 6), dtype=bool))).all()
    assert np.array(masks["padding"])[:, -2:].sum() == 0
    assert np.array(masks["combined"]).sum() == causal[:, :4].sum()


def test_golden_table_escapes_and_groups_by_chapter():
    from tcrformer.plotting.tables import golden_html

    report = {
        "golden_file": "config/golden/explainer_values.yaml",
        "summary": {"PASS": 1, "FAIL": 1},
        "rows": [
            {
                "chapter": "toy",
                "key": "toy.x",
                "explainer_value": 0.605,
                "value": 0.60472,
                "tolerance": "abs 0.0005",
                "status": "PASS",
                "reason": "",
            },
            {
                "chapter": "notes",
                "key": "n.<b>",
                "explainer_value": [1, 2],
                "value": None,
                "tolerance": "exact",
                "status": "FAIL",
                "reason": "no regenerated value",
            },
        ],
        "extra_keys": [],
    }
    page = golden_html(report, "run paper")
    assert page.index("Chapter toy") < page.index("Chapter notes")
    assert "n.&lt;b&gt;" in page and "<b>1 PASS, 1 FAIL</b>" in page


def test_training_figure_from_hand_made_results(tmp_path):
    from tcrformer.chapters.reversal.figure_data import ReversalFigures
    from tcrformer.plotting import reversal, style

    steps = np.arange(1, 101)
    losses = pd.DataFrame({"step": steps, "loss": 0.6 + 3.0 * np.exp(-steps / 20)})
    data = ReversalFigures(
        losses=losses,
        attention=np.full((4, 8, 7), 1 / 7),
        source="CASSIRS",
        output="SRISSAC",
        layer=2,
        floor=0.574,
        report_losses={50: 0.85, 100: 0.62},
        antidiagonal_mean=0.95,
    )
    fig = reversal.fig13_training(data)
    loss_ax, map_ax = fig.axes[:2]
    assert [t.get_text() for t in map_ax.get_yticklabels()][-1] == "<eos>"
    assert "95%" in map_ax.get_title() and "decoder layer 2" in map_ax.get_title()
    assert any(np.allclose(line.get_ydata(), 0.574) for line in loss_ax.get_lines())
    style.save(fig, tmp_path / "f.png", tmp_path / "f.svg")
    check_png(tmp_path / "f.png")
