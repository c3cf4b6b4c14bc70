"""Every valid config draws every figure: configurations drawn from the schema's valid space
(another receptor and focus, the notes model's size and layers, a small reversal model and
its steps, heads that divide the width), each chapter's results built in-process, and every
figure of the table drawn from them. A config the schema and the chapters accept but a
figure cannot draw is a bug.

The chapters run here are those of `all` (toy, notes, plm with SCEPTR alone, reversal, and
the schematics); the ensemble, claims and compare figures are drawn by their own slow tests
from non-default configurations.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcrformer import AMINO_ACIDS
from tcrformer.core.io import write_named
from tcrformer.figures import FIGURES, draw
from tcrformer.validation import validate

from conftest import OTHER_RECEPTOR, ROOT, default_config

matplotlib.use("Agg")
torch.set_num_threads(1)
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
RENAMED = {"plm": {"table": "scan", "summary": "scan_summary"}}  # rule output -> figure data


@st.composite
def configs(draw_from):
    """A config the schema accepts, changed where a user changes it."""
    config = copy.deepcopy(default_config())
    germline = config["plm"]["germline"]  # the genes stay: their ends are IMGT's, trimmed
    v_end = germline["v_cdr3"][: draw_from(st.integers(1, len(germline["v_cdr3"])))]
    j_end = germline["j_cdr3"][-draw_from(st.integers(1, len(germline["j_cdr3"]))) :]
    shortest = max(1, 8 - len(v_end) - len(j_end))  # the reversal task's strings: 8 or more
    middle = draw_from(st.text(alphabet=AMINO_ACIDS, min_size=shortest, max_size=shortest + 6))
    cdr3 = v_end + middle + j_end  # from the conserved C to the conserved F
    config["toy"].update(sequence=cdr3, focus_position=draw_from(st.integers(1, len(cdr3))))
    config["plm"]["chain"]["cdr3"] = cdr3
    germline.update(v_cdr3=v_end, j_cdr3=j_end)
    config["plm"]["positions"] = sorted(
        draw_from(st.sets(st.integers(1, len(cdr3)), min_size=1, max_size=2))
    )
    heads = draw_from(st.sampled_from([1, 2, 4]))
    config["notes"].update(
        d_model=heads * draw_from(st.sampled_from([4, 8, 16])),
        num_heads=heads,
        d_ff=draw_from(st.sampled_from([16, 64])),
        num_layers=draw_from(st.integers(1, 3)),
        src_vocab=draw_from(st.integers(30, 200)),
        tgt_vocab=draw_from(st.integers(30, 200)),
        max_len=200,
    )
    rev_heads = draw_from(st.sampled_from([1, 2]))
    steps = draw_from(st.integers(6, 16))
    config["reversal"].update(
        d_model=rev_heads * 8, num_heads=rev_heads, d_ff=32,
        num_layers=draw_from(st.integers(1, 3)), steps=steps, warmup=4,
        report_every=draw_from(st.integers(2, steps)), eval_n=20, batch_size=16,
        cdr3=cdr3, max_len=max(16, len(cdr3)), device="cpu", log_every=1000,
        checkpoint_every=1000,
    )  # fmt: skip
    return config


def write_chapter(folder, chapter: str, results: dict) -> None:
    """The results under the file names the chapter's figure data reads."""
    from tcrformer.figures import BY_ID

    files = next(f.files() for f in BY_ID.values() if f.chapter == chapter)
    outputs = {}
    for name, content in results.items():
        name = RENAMED.get(chapter, {}).get(name, name)
        if name in files:
            outputs[name] = folder / files[name]
        else:
            suffix = (".npy" if isinstance(content, np.ndarray) else
                      ".csv" if isinstance(content, pd.DataFrame) else
                      ".json" if isinstance(content, dict | list) else ".bin")  # fmt: skip
            outputs[name] = folder / f"{name}{suffix}"
    write_named(outputs, {RENAMED.get(chapter, {}).get(k, k): v for k, v in results.items()})


def build(config, folder) -> None:
    """Every chapter of `all`, in-process, as its rules would."""
    from tcrformer.chapters.notes import compute as notes
    from tcrformer.chapters.notes.settings import Settings as NotesSettings
    from tcrformer.chapters.plm import compute as plm
    from tcrformer.chapters.plm.settings import Settings as PlmSettings
    from tcrformer.chapters.reversal.compute import evaluate_reversal, train_reversal
    from tcrformer.chapters.reversal.settings import Settings as ReversalSettings
    from tcrformer.chapters.toy import compute as toy
    from tcrformer.chapters.toy.settings import Settings as ToySettings

    for chapter in ("toy", "notes", "plm", "reversal"):
        (folder / chapter).mkdir(parents=True)
    write_chapter(folder / "toy", "toy", toy.toy_values(ToySettings.from_config(config)))
    write_chapter(folder / "notes", "notes", notes.notes_values(NotesSettings.from_config(config)))
    plm_settings = PlmSettings.from_config(config)
    esm2 = {"available": False, "reason": "not loaded in this test", "guesses": []}
    scan = plm.plm_scan(plm_settings, esm2)
    write_chapter(folder / "plm", "plm", {**plm.plm_sceptr(plm_settings), "esm2": esm2, **scan})
    recipe = ReversalSettings.from_config(config).recipes["reversal"]
    trained = train_reversal(recipe, folder / "checkpoints", {})
    model_path, losses_path = folder / "model.safetensors", folder / "reversal" / "losses.csv"
    write_named({"model": model_path, "losses": losses_path},
                {k: trained[k] for k in ("model", "losses")})  # fmt: skip
    evaluated = evaluate_reversal(recipe, str(model_path), str(losses_path))
    write_chapter(folder / "reversal", "reversal", evaluated)


OF_ALL = [f for f in FIGURES if f.chapter in ("toy", "notes", "plm", "reversal", None)]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture], derandomize=True)  # fmt: skip
@given(config=configs())
def test_every_valid_config_draws_every_figure(config, tmp_path_factory):
    import matplotlib.pyplot as plt

    validate(config, SCHEMA)  # the workflow's own check: a valid config must pass it
    folder = tmp_path_factory.mktemp("run")
    build(config, folder)
    for figure in OF_ALL:
        paths = {name: str(folder / figure.chapter / file) for name, file in figure.files().items()}
        drawn = draw(figure.id, paths, figure.options(config))
        assert drawn.axes, figure.id
        plt.close(drawn)


@pytest.mark.slow
def test_a_non_default_run_draws_every_figure_and_its_report(other_run):
    """Another receptor, smaller notes and reversal models with other depths (a one-layer
    reversal model), through Snakemake (conftest.OTHER_RUN): every figure of `all`, and the
    report of `figures` with every figure in it."""
    for figure in OF_ALL:
        png = other_run / f"results/other/figures/{figure.id}.png"
        assert png.stat().st_size > 5_000, figure.id
    with zipfile.ZipFile(other_run / "other_report.zip") as archive:
        names = {Path(name).name for name in archive.namelist()}
    assert {f"{figure.id}.png" for figure in OF_ALL} <= names


@pytest.mark.slow
def test_the_other_receptor_reaches_every_chapter(other_run):
    """config/examples/other_receptor.yaml sets the receptor block: every chapter read its
    CDR3, and the scan's germline labels come from its own germline ends."""
    results = other_run / "results/other"
    assert json.loads((results / "values.json").read_text())["toy.sequence"] == OTHER_RECEPTOR
    notes = json.loads((results / "notes/figure_data.json").read_text())
    assert notes["sequence"] == OTHER_RECEPTOR
    scan = pd.read_csv(results / "plm/scan.csv")
    for _, guesses in scan.groupby("model"):
        assert "".join(guesses.sort_values("position")["true_residue"]) == OTHER_RECEPTOR
    segments = scan[scan["model"] == "sceptr"].sort_values("position")["segment"].tolist()
    assert segments == ["V-gene"] * 5 + ["junction"] * 4 + ["J-gene"] * 7  # CASSL APGA TNEKLFF
    decoded = (results / "reversal/cdr3_decoded.txt").read_text().splitlines()
    assert decoded[0] == OTHER_RECEPTOR
