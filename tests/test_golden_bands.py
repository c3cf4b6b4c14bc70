"""The golden bands of the trained values: measured, not typed.

config/golden/ensemble_seeds.csv is the committed 32-seed ensemble of the paper's recipe
(`snakemake --cores 2 ensemble`, results/paper/ensemble/seeds.csv); ensemble_bands.yaml is
what the ensemble_summary rule derived from it. These tests check that nobody typed a band:
the bands are what the helper computes from the committed ensemble, they hold at least 98 %
of its seeds, every stochastic key of the golden file takes its band from it, and the
provenance says how it was made."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from tcrformer.chapters.ensemble import distributions
from tcrformer.core import golden

from conftest import ROOT

FOLDER = ROOT / "config" / "golden"
SEEDS = pd.read_csv(FOLDER / "ensemble_seeds.csv")
BANDS = yaml.safe_load((FOLDER / "ensemble_bands.yaml").read_text())
ENTRIES, INPUTS = golden.load_golden(FOLDER / "seed_values.yaml")
STOCHASTIC = [e for e in ENTRIES if e.tolerance.kind == golden.ENSEMBLE]


def test_the_ensemble_has_at_least_32_seeds_and_its_provenance():
    provenance = BANDS["provenance"]
    assert len(SEEDS) >= 32 and provenance["n"] == len(SEEDS)
    assert sorted(provenance["seeds"]) == sorted(SEEDS["seed"])
    for field in ("command", "numerics", "date", "config_sha256", "band"):
        assert provenance[field], field
    assert provenance["numerics"].startswith("portable")


def test_the_bands_are_what_the_helper_computes_from_the_committed_ensemble():
    published = golden.published(ENTRIES, INPUTS, {}, "reversal")
    keys = [c for c in SEEDS.columns if c != "seed"]
    values = distributions.published_values(published, "reversal", "CASSIRSSYEQYF", keys)
    derived = distributions.golden_bands(SEEDS, values, BANDS["provenance"])["bands"]
    assert derived.keys() == BANDS["bands"].keys()
    for key, band in derived.items():
        for field, value in band.items():
            assert (
                BANDS["bands"][key][field] == pytest.approx(value)
                if isinstance(value, float)
                else BANDS["bands"][key][field] == value
            ), (key, field)


def test_the_committed_bands_hold_at_least_98_percent_of_the_ensemble():
    coverage = distributions.band_coverage(SEEDS, BANDS["bands"])
    assert coverage and all(fraction >= 0.98 for fraction in coverage.values()), coverage


def test_every_trained_value_of_the_golden_file_takes_its_band_from_the_ensemble():
    keys = {e.key for e in STOCHASTIC}
    losses = {e.key for e in ENTRIES if e.key.startswith("reversal.loss_step")}
    assert losses <= keys
    assert {"reversal.heldout_exact", "reversal.cross_attention_antidiagonal_mean"} <= keys
    for entry in STOCHASTIC:
        band = BANDS["bands"][entry.key]
        assert entry.tolerance.band == (band["low"], band["high"])
        assert entry.tolerance.n == len(SEEDS)
        assert entry.placement  # where the seed's own printed value falls among ours


def test_a_value_outside_the_band_fails_and_inside_passes():
    entry = STOCHASTIC[0]
    low, high = entry.tolerance.band
    assert golden.compare(low, entry.value, entry.tolerance)[0] == golden.PASS
    assert golden.compare(high, entry.value, entry.tolerance)[0] == golden.PASS
    below = low - max(abs(low) * 1e-6, 1e-9)
    assert golden.compare(below, entry.value, entry.tolerance)[0] == golden.FAIL
