"""The companion notebook's way in (notebooks/walkthrough.ipynb): the pipeline, one cell at a time.

A notebook cell calls what a rule calls, with the same settings, and nothing else:

    start(receptor, ...)        the config checked as the workflow checks it (a bad receptor
                                is the workflow's one line, and the cell fails with it)
    session.keep(chapter, ..)   a rule's results written as the rule writes them, into the
                                session's folder, so that the figures read the same files
    session.figure(id)          one row of the figure table, drawn from those files
    session.beside(values, ..)  our values beside the explainer's (the golden file, read only
                                to show them; the golden check's own comparison says PASS)
    session.train(recipe, ..)   the reversal training, with a live progress line and loss curve
    finished_run(run)           a pipeline run's trained reversal model, when there is one

Nothing here computes a number of its own: every value comes from a chapter's compute module.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tcrformer.core import numerics
from tcrformer.core.config import SCHEMA_PATH, ConfigError

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config" / "config.yaml"
RESULTS = ROOT / "results"
# What a rule names its outputs where its chapter's figure data names the files otherwise.
RULE_NAMES = {"plm": {"table": "scan", "summary": "scan_summary"}}
_PINNED: numerics.Pinned | None = None


def shown(value: Any, digits: int = 4, limit: int = 70) -> str:
    """A value as a table cell: numbers to `digits` significant digits, long lists cut."""
    from tcrformer.core.text import short

    def rounded(x: Any) -> Any:
        if isinstance(x, list):
            return [rounded(v) for v in x]
        if isinstance(x, float):
            return float(f"{x:.{digits}g}")
        return x

    return short(rounded(value), limit)


class ReceptorError(ConfigError):
    """A ConfigError that IPython shows as its one line, not as a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def merged(base: dict, overlay: Mapping) -> dict:
    """`base` with `overlay` laid over it, section by section (as --configfile does)."""
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merged(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def notebook_config(
    receptor: str,
    focus_position: int | None = None,
    genes: tuple[str, str] | None = None,
    germline: tuple[str, str] | None = None,
    training_steps: int | None = None,
    esm2_download: bool = False,
    overlay: Mapping | None = None,
) -> dict:
    """config/config.yaml with the notebook's parameters laid over it: the receptor's CDR3β,
    the toy's focus residue (also the second residue the language models hide), its V and J
    genes and the CDR3's ends they encode, the speedrun's steps, and whether ESM-2 may be
    downloaded. None keeps the config's value."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    merged(config, overlay or {})
    config["receptor"]["cdr3b"] = receptor
    if focus_position is not None:
        config["toy"]["focus_position"] = focus_position
        config["plm"]["positions"] = [1, focus_position]
    if genes is not None:
        config["receptor"]["trbv"], config["receptor"]["trbj"] = genes
    if germline is not None:
        v_cdr3, j_cdr3 = germline
        config["plm"]["germline"].update(v_cdr3=v_cdr3, j_cdr3=j_cdr3)
    if training_steps is not None:
        config["reversal"]["speedrun"]["steps"] = training_steps
    config["plm"]["esm2"]["download"] = esm2_download
    return config


def _pin(config: Mapping) -> numerics.Pinned:
    """The pipeline's numerics, pinned once per kernel before torch is imported."""
    global _PINNED
    if _PINNED is None:
        if "torch" in sys.modules:
            raise RuntimeError(
                "PyTorch was imported before tcrformer.notebook.start: restart the kernel "
                "and run the notebook from the top"
            )
        _PINNED = numerics.pin(numerics.Numerics.from_config(config.get("numerics")))
        numerics.configure_torch(_PINNED)
    return _PINNED


@dataclass
class Session:
    """One receptor's walk through the chapters: its checked config and settings, and the
    folder its result files go to (as results/<run>/<chapter>/ in a pipeline run)."""

    config: dict
    settings: dict[str, Any]
    folder: Path
    kept: dict[str, dict[str, str]] = field(default_factory=dict)  # chapter -> {name: file}
    timing: dict[str, Any] = field(default_factory=dict)  # the last training's, as the rule's
    # Values not to judge against the explainer's (key prefix -> why): a loaded run's recipe.
    unlike: dict[str, str] = field(default_factory=dict)

    @property
    def receptor(self) -> str:
        return self.config["receptor"]["cdr3b"]

    def keep(self, chapter: str, results: Mapping[str, Any]) -> Mapping[str, Any]:
        """Write the results of one of `chapter`'s rules that its figures read, under the
        names of its figure data's FILES, as the rule writes them (core.io.write_named)."""
        from tcrformer.chapters import module
        from tcrformer.core.io import write_named

        files = module(chapter, "figure_data").FILES
        rename = RULE_NAMES.get(chapter, {})
        folder = self.folder / chapter
        folder.mkdir(parents=True, exist_ok=True)
        chosen = {rename.get(name, name): content for name, content in results.items()}
        chosen = {name: content for name, content in chosen.items() if name in files}
        paths = {name: str(folder / files[name]) for name in chosen}
        write_named(paths, chosen)
        self.kept.setdefault(chapter, {}).update(paths)
        return results

    def figure(self, figure_id: str):
        """One figure of the figure table, drawn from the files kept (a matplotlib Figure)."""
        from tcrformer.figures import BY_ID, draw

        figure = BY_ID[figure_id]
        paths = self.kept.get(figure.chapter, {}) if figure.chapter else {}
        return draw(figure_id, paths, figure.options(self.config))

    def beside(self, values: Mapping[str, Any], keys: Iterable[str] | None = None):
        """Our values beside what the explainer printed (config/golden/explainer_values.yaml),
        judged by the golden check; a value printed for other inputs (another receptor) is
        SKIPPED with the reason, and a value it never printed says so. A table (pandas
        DataFrame), one row per key, in the order given."""
        import pandas as pd

        from tcrformer.core.golden import REPORT, SKIPPED, check
        from tcrformer.core.golden_file import load_golden
        from tcrformer.core.io import dumps_json

        entries, inputs = load_golden(ROOT / self.config["golden"]["file"])
        wanted = list(values if keys is None else keys)
        values = json.loads(dumps_json({key: values[key] for key in wanted}))  # as values.json
        printed = [e for e in entries if e.key in wanted]
        rows, _ = check(values, printed, inputs, self.config)
        for row in rows:
            why = next((w for prefix, w in self.unlike.items() if row.key.startswith(prefix)), "")
            if why and row.status != REPORT:
                row.status, row.reason = SKIPPED, why
        by_key = {row.key: row for row in rows}

        def line(key: str) -> dict[str, str]:
            row = by_key.get(key)
            if row is None:
                return {"ours": shown(values[key]), "the explainer printed": "",
                        "check": "not printed in the explainer"}  # fmt: skip
            verdict = row.status if not row.reason else f"{row.status}: {row.reason}"
            return {"ours": shown(row.value), "the explainer printed": shown(row.explainer_value),
                    "check": verdict}  # fmt: skip

        return pd.DataFrame([line(key) for key in wanted], index=pd.Index(wanted, name="value"))

    def train(self, recipe_name: str = "speedrun", every: int = 25):
        """Train one of the reversal chapter's recipes as the rule does
        (chapters.reversal.compute.train_reversal), showing a progress line and the loss
        curve as it goes; then evaluate it as evaluate_reversal does. Returns its values."""
        from tcrformer.chapters.reversal.compute import train_reversal
        from tcrformer.core.io import write_named

        recipe = self.settings["reversal"].recipes[recipe_name]
        folder = self.folder / "reversal"
        folder.mkdir(parents=True, exist_ok=True)
        live = LiveLoss(recipe.steps, recipe.label_smoothing, every)
        results = train_reversal(
            recipe, folder / "checkpoints", numerics.describe(_PINNED), on_loss=live.observe
        )
        outputs = {name: str(folder / f"{name}.{kind}") for name, kind in TRAIN_OUTPUTS.items()}
        write_named(outputs, results)
        self.timing = results["timing"]
        return self.evaluate(recipe, outputs["model"], outputs["losses"])

    def evaluate(self, recipe, model_path: str | Path, losses_path: str | Path):
        """evaluate_reversal on a trained model: its values; Fig. 13's files kept."""
        from tcrformer.chapters.reversal.compute import evaluate_reversal

        results = evaluate_reversal(recipe, str(model_path), str(losses_path))
        self.keep("reversal", {**results, "losses": _read_csv(losses_path)})
        return results["values"]

    def load_run(self, run: str, results: Path = RESULTS):
        """A finished pipeline run's reversal model (results/<run>/reversal/), evaluated on
        this session's receptor with the paper's recipe, as long as its loss curve. Its
        values are judged against the explainer's only if it trained the config's recipe."""
        from tcrformer.core.io import read_json

        folder = finished_run(run, results)
        if folder is None:
            raise FileNotFoundError(f"no trained model in {results / run / 'reversal'}")
        paper = self.settings["reversal"].recipes["reversal"]
        trained = read_json(folder / "training_time.json")["fingerprint"]
        if trained != paper.fingerprint():  # another recipe or seed than the config's
            self.unlike["reversal."] = (
                f"run {run} trained another recipe than config/config.yaml's (fingerprint "
                f"{trained}, not {paper.fingerprint()}); its own verdicts: "
                f"results/{run}/reversal/golden_report.md"
            )
        from tcrformer.training.model import load_model

        _, architecture = load_model(folder / "model.safetensors", paper.impl)
        layer = paper.cross_attention_layer
        if layer == paper.num_layers:  # `last`: the run's own last layer
            layer = architecture["num_layers"]
        recipe = paper.replace(
            steps=len(_read_csv(folder / "losses.csv")),
            cross_attention_layer=layer,
            **{key: architecture[key] for key in MODEL_KEYS},
        )
        return self.evaluate(recipe, folder / "model.safetensors", folder / "losses.csv")


MODEL_KEYS = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "norm")  # saved with it
TRAIN_OUTPUTS = {"model": "safetensors", "losses": "csv", "numerics": "json", "timing": "json"}


def _read_csv(path):
    from tcrformer.core.io import read_csv

    return read_csv(path)


def finished_run(run: str = "paper", results: Path = RESULTS) -> Path | None:
    """results/<run>/reversal/ when a pipeline run has trained the paper's recipe there."""
    folder = results / run / "reversal"
    needed = ("model.safetensors", "losses.csv", "training_time.json")
    return folder if all((folder / name).is_file() for name in needed) else None


def finished_runs(results: Path = RESULTS) -> list[str]:
    """The names of the runs under results/ with a trained reversal model."""
    if not results.is_dir():
        return []
    return sorted(p.name for p in results.iterdir() if finished_run(p.name, results))


def start(receptor: str, folder: str | Path | None = None, **parameters: Any) -> Session:
    """Check the notebook's config as the workflow does (tcrformer.validation.validate) and
    pin the pipeline's numerics. A bad receptor raises the workflow's own one-line error.

    The kernel then works in the repository root, as the workflow does: Jupyter starts it in
    notebooks/, and the config's paths (the golden file, a checkpoint) are the root's."""
    from tcrformer.validation import validate

    os.chdir(ROOT)
    config = notebook_config(receptor, **parameters)
    try:
        settings = validate(config, SCHEMA_PATH)  # imports no torch
        _pin(config)  # before anything imports torch, as the rule scripts do
    except ConfigError as err:
        raise ReceptorError(err.key, err.value, err.problem) from None
    folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="tcrformer-notebook-"))
    return Session(config, settings, folder)


class LiveLoss:
    """The training's progress as it goes, in a notebook: a progress line and the loss curve
    (plotting.reversal.draw_loss), redrawn every `every` steps in one output area. Outside
    a notebook it prints the progress line alone. Its `observe(step, loss)` is what the
    training loop calls after every step (chapters.reversal.compute.train_reversal)."""

    WIDTH = 30

    def __init__(self, steps: int, label_smoothing: float, every: int = 25):
        from tcrformer.training.schedule import label_smoothing_floor

        self.steps, self.every = steps, every
        self.floor = label_smoothing_floor(label_smoothing)
        self.losses: list[float] = []
        self.started = _clock()
        self._handles = _display_handles()

    def line(self, step: int) -> str:
        done = round(self.WIDTH * step / self.steps)
        seconds = _clock() - self.started
        return (
            f"step {step:>4}/{self.steps} [{'#' * done}{'.' * (self.WIDTH - done)}] "
            f"loss {self.losses[-1]:.3f}  {seconds:.0f} s"
        )

    def observe(self, step: int, loss) -> None:
        self.losses.append(float(loss))
        if step % self.every and step != self.steps:
            return
        if self._handles is None:
            if step % (self.every * 10) == 0 or step == self.steps:
                print(self.line(step), flush=True)
            return
        import pandas as pd

        from tcrformer.plotting.reversal import draw_loss

        text, curve = self._handles
        text.update({"text/plain": self.line(step)}, raw=True)
        frame = pd.DataFrame({"step": range(1, step + 1), "loss": self.losses})
        curve.update(draw_loss(frame, self.floor, self.steps))


def _clock() -> float:
    import time

    return time.perf_counter()


def _display_handles():
    """Two output areas updated in place (text, figure), or None outside IPython."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    if get_ipython() is None:
        return None
    return (
        display({"text/plain": "starting"}, raw=True, display_id=True),
        display({"text/plain": ""}, raw=True, display_id=True),
    )
