"""The companion notebook (notebooks/walkthrough.ipynb) runs top to bottom, for the
explainer's receptor and for another one, and shows the receptor it was given.

It is executed as a student would run it (nbclient, a fresh kernel, every cell in order), with
papermill's convention for parameters: a cell after the one tagged `parameters` sets them; for
another receptor, by papermill itself, with the command docs/usage.md gives. A cell that raises
fails the test. The committed notebook carries no outputs (nbstripout).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import numpy as np
import pytest
import yaml

from conftest import OTHER_EXAMPLE, ROOT

NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"
OTHER = yaml.safe_load(OTHER_EXAMPLE.read_text())
# Another receptor, its focus residue, genes and germline-encoded ends, as the example config
# gives them.
OTHER_PARAMETERS = {
    "receptor": OTHER["receptor"]["cdr3b"],
    "focus_position": OTHER["toy"]["focus_position"],
    "genes": [OTHER["receptor"]["trbv"], OTHER["receptor"]["trbj"]],
    "germline": [OTHER["plm"]["germline"]["v_cdr3"], OTHER["plm"]["germline"]["j_cdr3"]],
}
USAGE = ROOT / "docs" / "usage.md"


def with_parameters(notebook, parameters: dict):
    """The notebook with a cell setting `parameters` right after its `parameters` cell."""
    tagged = [i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in parameters.items()))
    cell.metadata["tags"] = ["injected-parameters"]
    notebook.cells.insert(tagged[0] + 1, cell)
    return notebook


def execute(parameters: dict, timeout: int = 600):
    """The notebook with `parameters`, run in a fresh kernel."""
    notebook = with_parameters(nbformat.read(NOTEBOOK, as_version=4), parameters)
    execute_in_place(notebook, timeout)
    return notebook


def execute_in_place(notebook, timeout: int = 600) -> None:
    """Run every cell in order; the first that raises stops it (CellExecutionError), its
    error in its outputs. The kernel starts in the notebook's folder, as Jupyter starts it,
    and talks over Unix sockets (the suite allows no TCP)."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory() as sockets:  # an absolute path: the kernel's cwd differs
        kernel = KernelManager(kernel_name="python3", transport="ipc", ip=f"{sockets}/kernel")
        resources = {"metadata": {"path": str(NOTEBOOK.parent)}}
        NotebookClient(notebook, km=kernel, timeout=timeout, resources=resources).execute()


def texts(notebook) -> list[str]:
    """Every code cell's text output, in order: streams, plain text, Markdown, HTML."""
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                found.append(output.text)
            for kind in ("text/plain", "text/markdown", "text/html"):
                found.append(output.get("data", {}).get(kind, ""))
    return found


def images(notebook) -> int:
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    )


def test_the_committed_notebook_has_no_outputs():
    """Diffs stay reviewable: outputs and execution counts are stripped (nbstripout)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_the_committed_notebook_is_as_nbstripout_leaves_it():
    """The pre-commit hook's own check: nbstripout would change nothing."""
    done = subprocess.run(
        [sys.executable, "-m", "nbstripout", "--verify", str(NOTEBOOK)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_parameter_cell_sets_the_explainers_receptor():
    """What a student opens: the parameters cell names the receptor the config names."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    (cell,) = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    defaults = {}
    exec(cell.source, {}, defaults)  # noqa: S102 (the notebook's own parameter cell)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert defaults["receptor"] == config["receptor"]["cdr3b"]
    assert defaults["focus_position"] == config["toy"]["focus_position"]


def receptor_shown(notebook, receptor: str) -> None:
    """The cells show `receptor`: the opening line names it, the toy input's rows are its
    letters, the language models hide its residues, and the trained model reverses it."""
    shown = "\n".join(texts(notebook))
    assert f"reads the CDR3β **{receptor}**" in shown
    rows = [f"{letter}{i}" for i, letter in enumerate(receptor, start=1)]
    toy_table = next(t for t in texts(notebook) if t.lstrip().startswith("hydropathy"))
    assert [line.split()[0] for line in toy_table.splitlines()[1:] if line.strip()][
        : len(rows)
    ] == rows
    assert f"SCEPTR hides {receptor[0]}1:" in shown
    assert f"{receptor} -> " in shown


@pytest.mark.slow
def test_the_notebook_runs_for_the_explainers_receptor():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    receptor = config["receptor"]["cdr3b"]
    notebook = execute({})
    receptor_shown(notebook, receptor)
    shown = "\n".join(texts(notebook))
    assert "PASS" in shown and "FAIL" not in shown  # every printed number agrees
    # Every figure the cells draw (the explainer's data figures and schematics), and the
    # live loss curve, as pictures.
    drawn = sum(cell.source.count("session.figure(") for cell in notebook.cells)
    assert drawn >= 15 and images(notebook) == drawn + 1


def papermill_command() -> list[str]:
    """docs/usage.md's papermill command for another receptor, as its arguments."""
    blocks = re.findall(r"```bash\n(.*?)```", USAGE.read_text(), flags=re.S)
    (block,) = [b for b in blocks if "papermill" in b]
    return shlex.split(block.replace("\\\n", " ").split("&&")[-1])


def injected(notebook) -> dict:
    """The parameters papermill set: its cell tagged `injected-parameters`, run."""
    (cell,) = [c for c in notebook.cells if "injected-parameters" in c.metadata.get("tags", [])]
    parameters = {}
    exec(cell.source, {}, parameters)  # noqa: S102 (the cell papermill wrote)
    return parameters


@pytest.mark.slow
def test_papermill_runs_the_notebook_for_another_receptor(tmp_path):
    """docs/usage.md's command, with a shorter training (150 steps): papermill sets the example
    receptor's parameters and runs every cell, and the notebook it writes shows that receptor."""
    program, source, output, *parameters = papermill_command()
    assert (program, source) == (".venv/bin/papermill", "notebooks/walkthrough.ipynb")
    written = tmp_path / Path(output).name
    command = [sys.executable, "-m", "papermill", source, str(written), *parameters]
    done = subprocess.run(
        [*command, "-p", "training_steps", "150"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    notebook = nbformat.read(written, as_version=4)
    assert injected(notebook) == {**OTHER_PARAMETERS, "training_steps": 150}
    receptor = OTHER_PARAMETERS["receptor"]
    receptor_shown(notebook, receptor)
    shown = "\n".join(texts(notebook))
    focus = OTHER_PARAMETERS["focus_position"]
    assert f"{receptor[focus - 1]}{focus} puts" in shown
    assert "inputs differ from the explainer's" in shown  # its numbers are not the explainer's


def pipeline_line(receptor: str) -> str:
    """The workflow's config check's line for `receptor` (tcrformer.validation.validate, as
    workflow/rules/common.smk runs it before any rule)."""
    from tcrformer.core.config import SCHEMA_PATH, ConfigError
    from tcrformer.validation import validate

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["receptor"]["cdr3b"] = receptor
    with pytest.raises(ConfigError) as expected:
        validate(config, SCHEMA_PATH)
    return str(expected.value)


@pytest.mark.parametrize("receptor", ["CASSIRSSYEQYX", "", "cassirssyeqyf"])
def test_a_bad_receptor_gives_the_pipelines_line_shown_as_one_line(receptor, monkeypatch):
    """What the notebook's first cell calls raises the pipeline's error, and IPython shows
    it as that one line (its _render_traceback_), not as a traceback."""
    from tcrformer import notebook

    monkeypatch.chdir(ROOT)  # start() works in the root; the test's own folder comes back

    line = pipeline_line(receptor)
    assert line.startswith("config error: receptor.cdr3b = ")
    with pytest.raises(notebook.ReceptorError) as raised:
        notebook.start(receptor)
    assert str(raised.value) == line and raised.value._render_traceback_() == [line]


@pytest.mark.slow
def test_a_bad_receptor_stops_the_first_cell_that_reads_it_with_the_config_line():
    """In a kernel: the cell that starts the session fails with the pipeline's one line as
    its whole traceback; no cell after it runs."""
    from nbclient.exceptions import CellExecutionError

    receptor = "CASSIRSSYEQYX"
    notebook = with_parameters(nbformat.read(NOTEBOOK, as_version=4), {"receptor": receptor})
    with pytest.raises(CellExecutionError):
        execute_in_place(notebook, timeout=120)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    failed = [c for c in code if any(o.output_type == "error" for o in c.get("outputs", []))]
    assert len(failed) == 1 and "notebook.start(" in failed[0].source
    (error,) = [o for o in failed[0].outputs if o.output_type == "error"]
    assert error.traceback == [pipeline_line(receptor)]
    reads = [c for c in code if "receptor" in c.source and "tags" not in c.metadata]
    assert reads[0] is failed[0], "an earlier cell reads the receptor"
    after = code[code.index(failed[0]) + 1 :]
    assert after and all(c.get("execution_count") is None for c in after)


def test_a_finished_runs_model_is_loaded_and_judged_only_if_it_trained_the_config_recipe(
    tmp_path, monkeypatch
):
    """load_run: a run's saved model evaluated on the receptor. A run of the config's recipe
    is judged as the golden check judges it (here SKIPPED by the golden check itself: the
    test evaluates 20 held-out strings, not the explainer's 1,000); a run of another recipe
    (a smaller model) is SKIPPED by the notebook, with the reason."""
    from tcrformer import notebook
    from tcrformer.core.config import SCHEMA_PATH
    from tcrformer.core.io import write_json
    from tcrformer.training.model import build_model, save_model
    from tcrformer.training.values import losses_frame
    from tcrformer.validation import validate

    monkeypatch.chdir(ROOT)
    config = notebook.notebook_config("CASSIRSSYEQYF", overlay={"reversal": {"eval_n": 20}})
    session = notebook.Session(config, validate(config, SCHEMA_PATH), tmp_path / "session")
    paper = session.settings["reversal"].recipes["reversal"]
    smaller = paper.replace(d_model=16, num_heads=2, d_ff=32, num_layers=1)
    assert notebook.finished_runs(tmp_path) == []
    for run, recipe in (("paper", paper), ("smaller", smaller)):
        folder = tmp_path / run / "reversal"
        folder.mkdir(parents=True)
        model = build_model(recipe.architecture(), recipe.impl, recipe.init)  # untrained
        save_model(folder / "model.safetensors", model, recipe.architecture())
        losses_frame(np.linspace(3.0, 1.0, recipe.steps)).to_csv(folder / "losses.csv", index=False)
        write_json(folder / "training_time.json", {"fingerprint": recipe.fingerprint()})
    assert notebook.finished_runs(tmp_path) == ["paper", "smaller"]

    values = session.load_run("paper", tmp_path)
    assert {"reversal.heldout_exact", "reversal.cdr3_output"} <= values.keys()
    assert session.unlike == {}
    judged = session.beside(values)["check"]
    assert judged["reversal.heldout_exact"].startswith("SKIPPED: inputs differ")
    values = session.load_run("smaller", tmp_path)
    judged = session.beside(values)["check"]
    assert judged["reversal.heldout_exact"].startswith("SKIPPED: run smaller trained another")


def test_the_readme_opens_the_notebook():
    readme = (ROOT / "README.md").read_text()
    command = json.dumps("notebooks/walkthrough.ipynb")[1:-1]
    assert f"jupyter lab {command}" in readme and "locks/notebook.txt" in readme


BUILD = "nbconvert --execute --to html notebooks/walkthrough.ipynb --output-dir results/notebook"


def test_ci_executes_the_notebook_into_a_page_and_publishes_it():
    """GitHub's job `notebook` and .ci/run build the page from the stripped source with the
    notebook lock; the page is uploaded for GitHub Pages and deployed from main, and the
    README links the section that says where it is."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/main.yml").read_text())
    steps = workflow["jobs"]["notebook"]["steps"]
    runs = " ".join(" ".join(step.get("run", "").split()) for step in steps)
    assert "pip install -r locks/notebook.txt" in runs and BUILD in runs
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact")]
    assert upload["with"]["path"] == "results/notebook"
    pages = workflow["jobs"]["pages"]
    assert pages["needs"] == "notebook" and "refs/heads/main" in pages["if"]
    assert [s["uses"].split("@")[0] for s in pages["steps"]] == ["actions/deploy-pages"]
    ci = " ".join((ROOT / ".ci/run").read_text().replace("\\\n", " ").split())
    assert "install -q -r locks/notebook.txt" in ci and BUILD in ci
    assert "(docs/usage.md#the-notebook)" in (ROOT / "README.md").read_text()
    assert "walkthrough.html" in USAGE.read_text()
