"""The study-notes chapter: every golden key computed, at the paper's sizes and small ones."""

import copy
import math

import numpy as np
import pytest

from tcrformer.chapters.notes import compute as notes
from tcrformer.chapters.notes.settings import Settings
from tcrformer.models.positional import period

from conftest import ROOT

PAPER = {
    "d_model": 512,
    "num_heads": 8,
    "d_ff": 2048,
    "num_layers": 6,
    "src_vocab": 10000,
    "tgt_vocab": 8000,
    "dropout": 0.1,
    "max_len": 5000,
    "seed": 0,
    "pe": {
        "table_positions": 100,
        "probe_position": 1,
        "probe_dims": 4,
        "cosine_pairs": [[0, 1], [0, 10]],
        "period_dims": [0, 128, 256, 510],
    },
    "parity": {"seed": 0, "batch": 2, "length": 10},
    "shapes": {"batch": 2, "src_len": 10, "tgt_len": 12},
    "page2": {"seq_len": 6, "d_model": 16, "nhead": 4, "dim_feedforward": 32, "seed": 0},
}


def small() -> dict:
    config = copy.deepcopy(PAPER)
    config.update(d_model=32, num_heads=4, d_ff=64, num_layers=2, src_vocab=50, tgt_vocab=40)
    config["pe"]["period_dims"] = [0, 31]
    return config


def settings(section: dict) -> Settings:
    """The chapter's settings for a `notes:` section (Fig. 12's receptor and padding fixed)."""
    config = {"notes": section, "toy": {"sequence": "CASSIRSSYEQYF"}, "figures": {"pad_tokens": 3}}
    return Settings.from_config(config)


def chapter_values(section: dict) -> dict:
    return notes.notes_values(settings(section))["values"]


@pytest.fixture(scope="module")
def paper_values():
    return chapter_values(PAPER)


def test_pe_values_at_the_paper_size():
    values = notes.pe_values(settings(PAPER))
    assert values["pe.d_model"] == 512
    expected = [math.sin(1), math.cos(1), math.sin(1 / 10000 ** (2 / 512))]
    assert values["pe.pos1_dims0_3"][:3] == pytest.approx(expected)
    assert 0 < values["pe.cos_pos0_pos10"] < values["pe.cos_pos0_pos1"] < 1
    assert values["pe.period_dim0"] == round(2 * math.pi, 1)
    # Each step of 128 dims (64 pairs) multiplies the period by 10000^(128/512) = 10.
    assert values["pe.period_dim256"] == pytest.approx(100 * values["pe.period_dim0"], rel=0.01)


def test_pe_keys_follow_the_config():
    config = small()
    config["pe"].update(probe_position=3, probe_dims=2, cosine_pairs=[[2, 5]])
    values = notes.pe_values(settings(config))
    assert set(values) == {
        "pe.d_model",
        "pe.pos3_dims0_1",
        "pe.cos_pos2_pos5",
        "pe.period_dim0",
        "pe.period_dim31",
    }


def test_period_is_shared_by_a_sin_cos_pair():
    assert period(6, 64) == period(7, 64)
    assert period(0, 64) == pytest.approx(2 * math.pi)


def test_pe_table_for_the_figure():
    table = notes.pe_table(settings(PAPER))
    assert table.shape == (100, 512) and table.dtype == np.float64
    assert np.abs(table).max() <= 1
    np.testing.assert_allclose(table[0, 1::2], 1.0)


def test_parity_is_within_float32_rounding():
    values = notes.parity_values(settings(small()))
    assert values["parity.layernorm_max_abs_diff"] < 1e-6
    assert values["parity.mha_causal_max_abs_diff"] < 1e-6


def test_mha_parity_uses_the_causal_mask():
    """Copying our weights into PyTorch's module and flipping the mask is what makes them agree."""
    import torch

    from tcrformer.models.transformer import MultiHeadAttention, causal_mask

    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, dropout=0.0).eval()
    theirs = notes.torch_attention_like(ours)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        unmasked, _ = theirs(x, x, x)
        masked = ours(x, x, x, causal_mask(5))
    assert (masked - unmasked).abs().max() > 1e-3  # the mask matters...
    assert (masked[:, -1] - unmasked[:, -1]).abs().max() < 1e-6  # ...except on the last row


def test_small_chapter_runs_and_checks_its_counts():
    values = chapter_values(small())
    assert values["params.total"] == (
        values["params.all_layers_6_plus_6"] + values["params.embeddings_and_output"]
    )
    assert values["shapes.logits"] == [2, 12, 40]


def test_paper_values(paper_values):
    v = paper_values
    assert v["params.total"] == v["params.all_layers_6_plus_6"] + v["params.embeddings_and_output"]
    assert v["params.all_layers_6_plus_6"] == 6 * (
        v["params.encoder_layer"] + v["params.decoder_layer"]
    )
    assert (
        v["params.encoder_layer"]
        == v["params.attention_sublayer"] + v["params.ffn_layer"] + 4 * 512
    )
    assert v["shapes.src_mask"] == [2, 1, 10]
    assert v["shapes.tgt_mask"] == [2, 12, 12]
    assert v["shapes.logits"] == [2, 12, 8000]
    assert v["myth.attention_weights_per_block"] == "4d^2"
    assert v["myth.ffn_weights_per_block"] == "8d^2"
    assert v["page2.pe_shape"] == [6, 16]
    assert v["page2.encoder_output_shape"] == [1, 6, 16]


def test_paper_values_match_the_golden_file(paper_values):
    """The published numbers, read from the golden file (not typed into the code)."""
    import yaml

    golden_path = ROOT / "config" / "golden" / "explainer_values.yaml"
    with open(golden_path, encoding="utf-8") as handle:
        golden = {row["key"]: row for row in yaml.safe_load(handle)["values"]}
    for key, value in paper_values.items():
        row = golden[key]
        tolerance = row["tolerance"]
        if tolerance == "exact":
            assert value == row["value"], key
        elif "abs" in tolerance:
            assert np.allclose(value, row["value"], atol=tolerance["abs"], rtol=0), key
        elif "max" in tolerance:
            assert value <= tolerance["max"], key
