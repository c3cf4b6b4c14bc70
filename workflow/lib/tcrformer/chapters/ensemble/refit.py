"""Fit the golden bands again from a committed ensemble, without training anything.

    python -m tcrformer.chapters.ensemble.refit [--folder config/golden]

The bands file is what `ensemble_summary` writes (`golden_bands`); when only the way bands
are made changes (bands.py, the golden file's error_budget), this fits them anew from the
committed per-seed values (ensemble_seeds.csv) with the same function, keeps the provenance
of how those seeds were trained, and records where and when the bands were fitted.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import sys
from pathlib import Path

import pandas as pd
import yaml

from tcrformer.chapters.ensemble import bands, distributions
from tcrformer.chapters.ensemble.compute import golden_bands
from tcrformer.core import golden
from tcrformer.core.config import apply_receptor
from tcrformer.core.io import write_text
from tcrformer.core.manifest import git_state
from tcrformer.training.recipe import recipe_from_config
from tcrformer.training.schedule import label_smoothing_floor


def refit(folder: Path, config: dict) -> dict:
    golden_file = folder / "seed_values.yaml"
    old = yaml.safe_load((folder / "ensemble_bands.yaml").read_text(encoding="utf-8"))
    provenance = {k: v for k, v in old["provenance"].items() if k != "band"}  # the old method
    recipe = recipe_from_config(config["reversal"], provenance.get("recipe", "reversal"))
    seeds = pd.read_csv(folder / "ensemble_seeds.csv")
    entries, inputs = _entries(golden_file)
    keys = [c for c in seeds.columns if c != "seed"]
    published = distributions.published_values(
        golden.published(entries, inputs, config, "reversal"), recipe.name, recipe.cdr3, keys
    )
    table = distributions.summary_table(seeds, published)
    fit = {
        "prefix": recipe.name,
        "floor": round(label_smoothing_floor(recipe.label_smoothing), 6),
        "eval_n": recipe.eval_n,
    }
    state = git_state()
    provenance["bands_fitted"] = {
        "command": "python -m tcrformer.chapters.ensemble.refit",
        "commit": state["commit"],
        "dirty": state["dirty"],  # true: the method was not yet committed at `commit`
        "method_sha256": hashlib.sha256(Path(bands.__file__).read_bytes()).hexdigest(),
        "date": datetime.date.today().isoformat(),
    }
    budget = yaml.safe_load(golden_file.read_text(encoding="utf-8"))["error_budget"]
    return golden_bands(seeds, table, budget, fit, provenance)


def _entries(golden_file: Path):
    """The golden entries without their bands (the bands are what is being made)."""
    data = yaml.safe_load(golden_file.read_text(encoding="utf-8"))
    entries = [
        golden.GoldenEntry(e["key"], e["value"], golden.Tolerance("exact"), e["chapter"])
        for e in data["values"]
    ]
    return entries, data.get("inputs") or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="config/golden", type=Path)
    parser.add_argument("--config", default="config/config.yaml", type=Path)
    args = parser.parse_args(argv)
    config = apply_receptor(yaml.safe_load(args.config.read_text(encoding="utf-8")))
    bands = refit(args.folder, config)
    text = yaml.safe_dump(bands, sort_keys=False, allow_unicode=True)
    write_text(args.folder / "ensemble_bands.yaml", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
