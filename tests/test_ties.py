"""Attention spread evenly names no winner: the tie rule (models.attention.leaders), the toy
chapter's partner, and Fig. 3's title and colours, for a uniform row, a row shared by two
keys and a clear winner."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_hex

from tcrformer.chapters.toy.compute import toy_values
from tcrformer.chapters.toy.settings import Settings
from tcrformer.models.attention import TIE_MARGIN, leaders
from tcrformer.plotting import style
from tcrformer.plotting.toy import draw_attention_row

from conftest import default_config


def toy_row(sequence: str, focus: int):
    """(values, head 1's attention weights) of the toy chapter for `sequence`, `focus`."""
    config = default_config()
    config["toy"].update(sequence=sequence, focus_position=focus)
    outputs = toy_values(Settings.from_config(config))
    return outputs["values"], outputs["attention_weights"][0]


def fig3(weights, sequence: str, focus: int) -> tuple[str, list[int]]:
    """Fig. 3's title, and the positions (1-based) of its red bars."""
    figure = draw_attention_row(weights, sequence, focus)
    ax = figure.axes[0]
    colours = [to_hex(bar.get_facecolor()) for bar in ax.patches]
    return ax.get_title(), [i + 1 for i, colour in enumerate(colours) if colour == style.HIGHLIGHT]


def test_a_uniform_row_ties_every_key():
    assert leaders(np.full(13, 1 / 13)).tolist() == list(range(13))


@pytest.mark.parametrize(
    "behind, tied",
    [(0.9 * TIE_MARGIN, True), (1.1 * TIE_MARGIN, False)],
    ids=["within the margin", "beyond it"],
)
def test_a_key_leads_when_its_score_is_ahead_by_more_than_the_margin(behind, tied):
    """Scores 0 and -behind (and a far lower third): a tie only within the margin."""
    scores = np.array([0.0, -behind, -5.0])
    row = np.exp(scores) / np.exp(scores).sum()
    assert leaders(row).tolist() == ([0, 1] if tied else [0])


def test_the_arginine_has_a_clear_partner_named_in_red():
    values, weights = toy_row("CASSIRSSYEQYF", 6)
    assert values["toy.head1.partner_position"] == 10
    title, red = fig3(weights, "CASSIRSSYEQYF", 6)
    assert title.endswith("60% on E10") and red == [10]


def test_a_residue_with_a_zero_query_spreads_its_attention_evenly():
    """The isoleucine has no charge and no polarity: head 1 scores every key 0."""
    values, weights = toy_row("CASSIRSSYEQYF", 5)
    np.testing.assert_array_equal(weights[4], np.full(13, 1 / 13))
    assert values["toy.head1.partner_position"] is None
    assert not [key for key in values if key.startswith("toy.head1.weight_I_to_")]
    title, red = fig3(weights, "CASSIRSSYEQYF", 5)
    assert title.endswith("head 1: spread evenly, 8% on every key") and red == []


def test_a_row_shared_by_two_equal_keys_names_both_and_paints_neither():
    """The arginine of CASRSEEQYF scores both glutamates alike."""
    values, weights = toy_row("CASRSEEQYF", 4)
    assert values["toy.head1.partner_position"] is None
    title, red = fig3(weights, "CASRSEEQYF", 4)
    assert title.endswith("spread evenly over E6, E7, 41% each") and red == []
