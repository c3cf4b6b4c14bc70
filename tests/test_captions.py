"""The report's captions describe the run they are in: every number or name a config key can
change is read from the config, so a run with another receptor or another model size gets
captions about itself, not about the paper's run.

Snakemake renders each caption as a Jinja2 template (trim_blocks, lstrip_blocks) with a
`snakemake` object (config, params, wildcards, input, output), then as reStructuredText.
The front page (workflow.rst) is rendered apart from any job, and is kept free of any run's
values: it names the config keys instead.
"""

from __future__ import annotations

import copy
import io
import json
import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
import yaml
from docutils.core import publish_parts

from tcrclaims.figures import BY_ID as CLAIMS_FIGURES
from tcrformer.figures import BY_ID as LIBRARY_FIGURES

from conftest import OTHER_RECEPTOR, OTHER_RUN, ROOT

BY_ID = {**LIBRARY_FIGURES, **CLAIMS_FIGURES}
REPORT = ROOT / "workflow" / "report"
CLAIMS_REPORT = ROOT / "workflow" / "claims" / "report"  # the claims' captions, in their folder
CAPTIONS = sorted([*REPORT.rglob("*.rst"), *CLAIMS_REPORT.rglob("*.rst")])
FRONT_PAGE = REPORT / "workflow.rst"
RUN_CAPTIONS = [path for path in CAPTIONS if path != FRONT_PAGE]
PAPER_RECEPTOR = "CASSIRSSYEQYF"
# Text that is true of the paper's run only: none of it may survive a change of receptor,
# focus residue or reversal model size.
STALE = (PAPER_RECEPTOR, "arginine", "d_model = 64", "2 + 2 layers", "13 keys", "60 %")
CAPTION = re.compile(r'"caption": "((?:[^"\\]|\\.)*)"')  # in report.html
# Snakemake's own caption environment, but an undefined name is an error, not "".
ENV = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def merged(base: dict, overrides: dict) -> dict:
    """`base` with `overrides` laid over it, key by key (as Snakemake merges config files)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def default_run_config() -> dict:
    """config/config.yaml with workflow/claims/config/claims.yaml, and two runs named for the
    compare rules (they exist, and their captions render, only when `compare` names two
    runs)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = merged(
        config, yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())
    )
    return merged(config, {"compare": ["paper", "alt"]})


def other_run_config() -> dict:
    return merged(default_run_config(), OTHER_RUN)


def job_params(caption: Path, config: dict) -> SimpleNamespace:
    """The params of the rule whose output the caption describes."""
    name = caption.stem
    if name in BY_ID:
        figure = BY_ID[name]
        return SimpleNamespace(
            figure=name, options=figure.options(config), drawn_from=figure.drawn_from()
        )
    if name == "ensemble_table":
        ensemble = config["ensemble"]
        return SimpleNamespace(recipe=ensemble["recipe"], seeds=ensemble["seeds"])
    return SimpleNamespace(title=f"run {config['run']}")


def render(caption: Path, config: dict) -> str:
    """The caption's reStructuredText as Snakemake renders it for a run of `config` (its
    null receptor keys filled in, as the workflow's config check does)."""
    from tcrformer.core.config import apply_receptor

    config = apply_receptor(copy.deepcopy(config))
    job = SimpleNamespace(
        config=config, params=job_params(caption, config), wildcards={}, input=[], output=[]
    )
    return ENV.from_string(caption.read_text()).render(snakemake=job)


def rst_to_html(text: str) -> str:
    """The HTML body docutils makes of `text`; any docutils warning is an error."""
    settings = {"halt_level": 2, "report_level": 2, "warning_stream": io.StringIO()}
    return publish_parts(text, writer="html", settings_overrides=settings)["body"]


def test_every_figure_has_a_caption_among_those_tested():
    assert set(BY_ID) <= {path.stem for path in RUN_CAPTIONS}
    assert FRONT_PAGE.exists()


@pytest.mark.parametrize("caption", RUN_CAPTIONS, ids=lambda p: p.stem)
def test_caption_renders_as_valid_rst_for_the_default_run(caption):
    text = render(caption, default_run_config())
    assert "{{" not in text and "{%" not in text, caption.name
    assert rst_to_html(text).strip(), caption.name


@pytest.mark.parametrize("caption", RUN_CAPTIONS, ids=lambda p: p.stem)
def test_caption_describes_a_run_with_another_receptor_and_model(caption):
    text = render(caption, other_run_config())
    html = rst_to_html(text)
    stale = [s for s in STALE if s in text or s in html]
    assert not stale, f"{caption.name} still says {stale}:\n{text}"
    if PAPER_RECEPTOR in render(caption, default_run_config()):
        assert OTHER_RECEPTOR in html, f"{caption.name} names no receptor of this run"


@pytest.mark.parametrize("residue", "ACDEFGHIKLMNPQRSTVWY")
def test_the_focus_residue_is_named_whatever_it_is(residue):
    config = merged(
        default_run_config(), {"toy": {"sequence": f"CA{residue}F", "focus_position": 3}}
    )
    for name in ("fig02_head_plane", "fig03_attention_row"):
        text = render(REPORT / "figures" / f"{name}.rst", config)
        assert f" {residue}3 " in text, (name, residue)


def test_the_front_page_reads_no_config_and_names_no_receptor():
    """workflow.rst must render without a config (any use of one raises here)."""
    text = ENV.from_string(FRONT_PAGE.read_text()).render(snakemake=SimpleNamespace())
    html = rst_to_html(text)
    for fixed in (*STALE, "GILGFVFTL", "HLA-A*02:01"):
        assert fixed not in text, fixed
    assert "toy.sequence" in html


@pytest.mark.slow
def test_a_report_of_another_receptor_describes_that_run(other_run):
    """The report of the suite's other run (conftest.OTHER_RUN: another receptor, other
    model sizes), built by Snakemake."""
    report = other_run / "other_report.zip"
    with zipfile.ZipFile(report) as archive:
        files = {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}
    assert any(name.endswith("fig13_training.png") for name in files), sorted(files)
    html = b"".join(data for name, data in files.items() if name.endswith(".html")).decode()
    # Each result's caption, as Snakemake rendered it into the page. (The page also shows
    # every rule's params, and with them the run's config: the claims file's prose names
    # the paper's receptor, and that is the user's own text, not a caption.)
    captions = [json.loads(f'"{text}"') for text in CAPTION.findall(html)]
    assert len(captions) >= len([n for n in files if n.endswith(".png")]), len(captions)
    assert all(OTHER_RECEPTOR in text for text in captions if "receptor" in text.lower())
    assert any(OTHER_RECEPTOR in text for text in captions)
    for text in captions:
        stale = [s for s in STALE if s in text]
        assert not stale, f"a caption of the report says {stale}: {text[:200]}"
    for name, data in files.items():
        if name.endswith(".html") or "golden" in Path(name).name:
            continue  # the golden check states the explainer's values, the paper's receptor too
        stale = [s for s in STALE if s.encode() in data]
        assert not stale, f"{name} of the report says {stale}"
