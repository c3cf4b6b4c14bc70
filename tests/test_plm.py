"""Chapter plm: ESM-2 through fair-esm (a tiny random one saved in fair-esm's format), SCEPTR's
masked-residue head, the CDR3 scan, and the errors a user can make. No test touches the
network: the tiny checkpoint stands in for the real weights, downloads are switched off."""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import re
import sys
import urllib.error

import esm
import pytest
import torch
from esm.model.esm2 import ESM2

from tcrformer import AMINO_ACIDS
from tcrformer.chapters.plm import compute as chapter
from tcrformer.chapters.plm import esm2, scan, sceptr_mlm, segments, settings, weights
from tcrformer.chapters.plm.values import chapter_values, esm2_values
from tcrformer.core.config import ConfigError
from tcrformer.core.golden import PASS, SKIPPED, check
from tcrformer.core.golden_file import load_golden
from tcrformer.core.io import ResultFileError

from conftest import OFFLINE, ROOT, default_config, snakemake, write_config

EXPLAINER_GOLDEN = ROOT / "config" / "golden" / "explainer_values.yaml"
TINY = {"num_layers": 2, "embed_dim": 32, "attention_heads": 4}


def plm_settings(section):
    """The chapter's typed settings for a `plm:` section."""
    return settings.Settings.from_config({"plm": section})


def plm_config(**esm2_overrides) -> dict:
    """The `plm` section of config/config.yaml, never downloading, with ESM-2 overrides."""
    plm = copy.deepcopy(default_config()["plm"])
    plm["esm2"].update({"download": False, **esm2_overrides})
    return plm


def save_tiny_esm2(folder: pathlib.Path, name: str = "esm2_t2_tiny", cfg_extra=None):
    """A random 2-layer ESM-2 saved as fair-esm saves its checkpoints, plus the regression file."""
    torch.manual_seed(0)
    model = ESM2(**TINY, alphabet=esm.data.Alphabet.from_architecture("ESM-1b"))
    state = model.state_dict()
    regression = {k: v for k, v in state.items() if k.startswith("contact_head.regression")}
    encoder = {f"encoder.sentence_encoder.{k}": v for k, v in state.items() if k not in regression}
    cfg = argparse.Namespace(
        encoder_layers=TINY["num_layers"],
        encoder_embed_dim=TINY["embed_dim"],
        encoder_attention_heads=TINY["attention_heads"],
        token_dropout=True,
        **(cfg_extra or {}),
    )
    checkpoint = folder / f"{name}.pt"
    torch.save({"model": encoder, "cfg": {"model": cfg}}, checkpoint)
    torch.save({"model": regression}, esm2.regression_path(checkpoint))
    return checkpoint


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> pathlib.Path:
    return save_tiny_esm2(tmp_path_factory.mktemp("esm2"))


@pytest.fixture(scope="module")
def sceptr_model():
    return sceptr_mlm.load_variant(plm_config()["sceptr"]["variant"])


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """An empty torch hub cache; a download attempt fails as it does without a network."""

    def no_network(url, dst, *args, **kwargs):
        raise urllib.error.URLError("no network in tests")

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(torch.hub, "download_url_to_file", no_network)
    return tmp_path / "torch"


# The chain and the positions -------------------------------------------------------------


def test_the_explainers_chain_is_131_residues_with_the_cdr3_after_the_v_gene():
    chain = plm_settings(plm_config()).chain
    assert chain.length == 131
    assert chain.sequence[chain.index_of(1)] == "C"
    assert chain.sequence[chain.index_of(6)] == "R"
    assert chain.sequence.endswith("SYEQYFGPGTRLTVT")


def test_renormalized_probabilities_sum_to_one_and_rank_best_first():
    from tcrformer.chapters.plm.guess import Guess, renormalized

    logits = [0.0] * 20
    logits[AMINO_ACIDS.index("S")], logits[AMINO_ACIDS.index("L")] = 3.0, 2.0
    probabilities = renormalized(logits)
    assert sum(probabilities.values()) == pytest.approx(1.0)
    guess = Guess("m", 6, "R", probabilities)
    assert guess.top() == ["S", "L", "A", "C"]  # ties in alphabetical order
    assert guess.rank_true > 2


# ESM-2 through fair-esm, with a tiny random checkpoint -----------------------------------


def test_plain_torch_load_refuses_the_fair_esm_format(tiny_checkpoint):
    """Why the allow-list exists: torch >= 2.6 refuses the checkpoint's argparse.Namespace."""
    import pickle

    with pytest.raises(pickle.UnpicklingError, match="argparse.Namespace"):
        torch.load(tiny_checkpoint)


def test_tiny_esm2_loads_through_fair_esm_with_only_namespace_allowed(tiny_checkpoint):
    model, alphabet = esm2.load_local(tiny_checkpoint)
    assert isinstance(model, ESM2) and not model.training
    assert esm2.parameter_count(model) == 27690
    assert alphabet.mask_idx == alphabet.get_idx("<mask>")


def test_one_mask_token_replaces_exactly_the_hidden_cdr3_residue(tiny_checkpoint):
    _, alphabet = esm2.load_local(tiny_checkpoint)
    chain = plm_settings(plm_config()).chain
    batch, offset = esm2.masked_tokens(alphabet, chain, (1, 6))
    assert offset == 1 and batch.shape == (2, chain.length + 2)
    for row, position in enumerate((1, 6)):
        masked = (batch[row] == alphabet.mask_idx).nonzero().flatten().tolist()
        assert masked == [len(chain.v_gene_part) + position]  # +1 for <cls>, -1 for 1-based


def test_esm2_guesses_match_the_explainers_recipe(tiny_checkpoint):
    """Our batched guesses equal the explainer's one-at-a-time code run on the same model."""
    model, alphabet = esm2.load_local(tiny_checkpoint)
    chain = plm_settings(plm_config()).chain
    ours = esm2.guesses(model, alphabet, chain, (1, 6), "esm2")
    for guess in ours:
        tokens = alphabet.get_batch_converter()([("tcr", chain.sequence)])[2]
        i = len(chain.v_gene_part) + (guess.position - 1) + 1
        tokens[0, i] = alphabet.mask_idx
        with torch.no_grad():
            logits = model(tokens)["logits"][0, i]
        p = torch.softmax(logits[[alphabet.get_idx(a) for a in AMINO_ACIDS]], -1)
        for aa, value in zip(AMINO_ACIDS, p.tolist(), strict=True):
            assert guess.probabilities[aa] == pytest.approx(value, abs=1e-5)
        assert sum(guess.probabilities.values()) == pytest.approx(1.0)
    assert [g.true_residue for g in ours] == ["C", "R"]


def test_esm2_result_and_values_with_a_configured_checkpoint(tiny_checkpoint):
    plm = plm_settings(plm_config(checkpoint=str(tiny_checkpoint)))
    result = chapter.esm2_result(plm)
    assert result["available"] and result["weights"] == str(tiny_checkpoint)
    values = esm2_values(result)
    assert values["esm2.chain_length"] == 131
    assert len(values["esm2.top4_at_cdr3_pos6"]) == 4
    assert 0.0 <= values["esm2.p_R_at_cdr3_pos6"] <= 1.0
    assert "esm2.unavailable" not in values


def test_weight_files_are_found_where_torch_and_fair_esm_look(tiny_checkpoint, offline_hub):
    assert weights.hub_dir() == pathlib.Path(torch.hub.get_dir())
    assert weights.weight_files(settings.Esm2Options("esm2_t12_35M_UR50D", None, False)) == []
    configured = settings.Esm2Options("esm2_t12_35M_UR50D", str(tiny_checkpoint), False)
    assert weights.weight_files(configured) == [
        str(tiny_checkpoint),
        str(tiny_checkpoint.with_name("esm2_t2_tiny-contact-regression.pt")),
    ]


def test_without_weights_esm2_is_unavailable_and_its_golden_keys_skipped(offline_hub):
    plm = plm_settings(plm_config(download=True))
    result = chapter.esm2_result(plm)
    assert result["available"] is False
    assert "download failed" in result["reason"] and "no network" in result["reason"]
    values = esm2_values(result)
    assert values["esm2.chain_length"] == 131
    assert not [k for k in values if k.startswith("esm2.p_") or k.startswith("esm2.top")]
    entries, inputs = load_golden(EXPLAINER_GOLDEN)
    rows = {r.key: r for r in check(values, entries, inputs, chapters={"plm"})[0]}
    assert rows["esm2.chain_length"].status == PASS
    for key in ("esm2.p_C_at_cdr3_pos1", "esm2.top4_at_cdr3_pos6"):
        assert rows[key].status == SKIPPED and rows[key].reason == result["reason"]


def test_download_switched_off_says_so(offline_hub):
    result = chapter.esm2_result(plm_settings(plm_config(download=False)))
    assert "plm.esm2.download is false" in result["reason"]
    assert not (offline_hub / "hub" / "checkpoints" / "esm2_t12_35M_UR50D.pt").exists()


class Stderr:
    """A stand-in for sys.stderr that is, or is not, a terminal."""

    def __init__(self, terminal: bool):
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal

    def write(self, text: str) -> int:
        return len(text)


@pytest.mark.parametrize(
    "terminal, kernel, shown",
    [(False, False, False), (True, False, True), (False, True, True)],
    ids=["pipeline job", "terminal", "notebook kernel"],
)
def test_the_download_shows_progress_only_where_someone_watches(
    terminal, kernel, shown, tmp_path, monkeypatch
):
    """torch's progress bar for a terminal or a notebook, never in a pipeline job's stderr."""
    asked = []

    def download(url, dst, *args, progress=True, **kwargs):
        asked.append(progress)
        pathlib.Path(dst).write_bytes(b"weights")

    shell = argparse.Namespace(kernel=object()) if kernel else None
    monkeypatch.setattr(torch.hub, "download_url_to_file", download)
    monkeypatch.setattr("sys.stderr", Stderr(terminal))
    monkeypatch.setitem(sys.modules, "IPython", argparse.Namespace(get_ipython=lambda: shell))
    esm2.download("esm2_t12_35M_UR50D", tmp_path / "esm2_t12_35M_UR50D.pt")
    assert asked == [shown, shown]  # the weights and their contact regression


def test_required_esm2_without_weights_is_an_error_naming_the_key(offline_hub):
    plm = plm_settings(plm_config(required=True))
    with pytest.raises(ConfigError, match=r"^config error: plm\.esm2\.required = True: ESM-2"):
        chapter.esm2_result(plm)


# Bad input ---------------------------------------------------------------------------------


def test_cdr3_with_a_letter_outside_the_20_amino_acids():
    plm = plm_config()
    plm["chain"]["cdr3"] = "CASSIRSSBEQYF"
    with pytest.raises(ConfigError, match=r"plm\.chain\.cdr3 = 'CASSIRSSBEQYF': letter 'B'"):
        plm_settings(plm)


def test_position_outside_the_cdr3():
    plm = plm_config()
    plm["positions"] = [1, 14]
    with pytest.raises(ConfigError, match=r"plm\.positions\[1\] = 14: outside plm\.chain\.cdr3"):
        plm_settings(plm)


@pytest.mark.parametrize(
    ("section", "field", "bad", "key"),
    [
        ("tcr", "trbv", "TRBV99*01", "plm.tcr.trbv"),
        ("tcr", "trav", "TRAV27*99", "plm.tcr.trav"),
    ],
)
def test_unknown_gene_for_sceptr(sceptr_model, section, field, bad, key):
    plm = plm_config()
    plm[section][field] = bad
    receptor = plm_settings(plm).receptor
    with pytest.raises(ConfigError, match=re.escape(f"config error: {key} = '{bad}'")):
        sceptr_mlm.guesses(sceptr_model, receptor, (1,))


@pytest.mark.parametrize(
    ("section", "field", "bad", "key"),
    [
        ("tcr", "cdr3a", "AGAGSQGNLI", "plm.tcr.cdr3a"),
        ("chain", "cdr3", "ASSIRSSYEQYF", "plm.chain.cdr3"),
    ],
)
def test_a_cdr3_must_run_from_c_to_f_or_w(section, field, bad, key):
    plm = plm_config()
    plm[section][field] = bad
    with pytest.raises(ConfigError, match=re.escape(f"config error: {key} = '{bad}': must run")):
        plm_settings(plm)


@pytest.mark.parametrize(
    ("field", "bad", "key"),
    [
        ("j_gene", "TRBJ9-9*01", "plm.germline.j_gene"),
        ("v_gene", "TRBV99*01", "plm.germline.v_gene"),
        ("v_cdr3", "CASSL", "plm.germline.v_cdr3"),
        ("j_cdr3", "SYNEQFF", "plm.germline.j_cdr3"),
    ],
)
def test_unknown_germline_gene_or_wrong_germline_end(field, bad, key):
    plm = plm_config()
    plm["germline"][field] = bad
    with pytest.raises(ConfigError, match=re.escape(f"config error: {key} = '{bad}'")):
        segments.check_germline(plm_settings(plm).germline)


def test_unknown_sceptr_variant():
    with pytest.raises(ConfigError, match=r"plm\.sceptr\.variant = 'SCEPTR_huge'.*SCEPTR_MLM_only"):
        sceptr_mlm.load_variant("SCEPTR_huge")


def test_checkpoint_path_that_does_not_exist(tmp_path):
    """Found when the config is read, before any rule runs."""
    missing = tmp_path / "esm2_t12_35M_UR50D.pt"
    with pytest.raises(ConfigError, match=r"^config error: plm\.esm2\.checkpoint = ") as err:
        plm_settings(plm_config(checkpoint=str(missing)))
    assert str(err.value).endswith(f"file not found ({missing})")


def test_checkpoint_without_its_contact_regression_file(tmp_path):
    checkpoint = save_tiny_esm2(tmp_path)
    esm2.regression_path(checkpoint).unlink()
    with pytest.raises(ConfigError, match="contact-regression file .* is not there beside it"):
        plm_settings(plm_config(checkpoint=str(checkpoint)))
    with pytest.raises(ResultFileError, match="esm2_t2_tiny-contact-regression.pt: file not found"):
        esm2.load_local(checkpoint)


@pytest.mark.parametrize(
    "content",
    [b"this is not a checkpoint\n", "torch-file-of-the-wrong-shape"],
)
def test_a_file_that_is_not_a_checkpoint(tmp_path, content):
    checkpoint = tmp_path / "esm2_t12_35M_UR50D.pt"
    if isinstance(content, bytes):
        checkpoint.write_bytes(content)
    else:
        torch.save({"weights": torch.zeros(3)}, checkpoint)
    torch.save({"model": {}}, esm2.regression_path(checkpoint))
    with pytest.raises(ResultFileError, match=f"^{checkpoint}: not a fair-esm ESM-2 checkpoint"):
        esm2.load_local(checkpoint)


def test_a_refused_global_is_reported_by_name(tmp_path):
    checkpoint = save_tiny_esm2(tmp_path, cfg_extra={"data": pathlib.PurePosixPath("x")})
    with pytest.raises(ResultFileError, match=r"refused the global\(s\) pathlib\.PurePosixPath"):
        esm2.load_local(checkpoint)


def test_checkpoint_name_must_start_with_esm2(tmp_path):
    checkpoint = save_tiny_esm2(tmp_path, name="tiny")
    with pytest.raises(ConfigError, match=r"plm\.esm2\.checkpoint = .*must start with 'esm2'"):
        plm_settings(plm_config(checkpoint=str(checkpoint)))


# SCEPTR and the scan -------------------------------------------------------------------------


def test_sceptr_is_sure_of_the_cysteine_and_unsure_of_the_junctional_arginine(sceptr_model):
    receptor = plm_settings(plm_config()).receptor
    cysteine, arginine = sceptr_mlm.guesses(sceptr_model, receptor, (1, 6))
    for guess in (cysteine, arginine):
        assert sum(guess.probabilities.values()) == pytest.approx(1.0)
        assert set(guess.probabilities) == set(AMINO_ACIDS)
    assert cysteine.true_residue == "C" and cysteine.p_true > 0.8 and cysteine.top()[0] == "C"
    assert arginine.true_residue == "R" and arginine.p_true < 0.2


def test_the_mask_lands_on_the_cdr3beta_of_the_receptor(sceptr_model):
    receptor = plm_settings(plm_config()).receptor
    tokens = sceptr_model.tokeniser.tokenise(sceptr_mlm._tcr(receptor))
    rows = sceptr_mlm.cdr3b_token_rows(tokens, receptor.cdr3b)
    assert rows[-1] == len(tokens) - 1 and len(rows) == 13
    assert tokens[rows[0], 3] == 6  # libtcrlm's compartment index of CDR3B


def test_segments_follow_imgt_and_put_the_arginine_in_the_junction():
    germline = plm_settings(plm_config()).germline
    segments.check_germline(germline)
    assert segments.imgt_v_cdr3("TRBV19*01") == "CASSI"
    assert segments.imgt_j_cdr3("TRBJ2-7*01") == "SYEQYF"
    found = segments.segments("CASSIRSSYEQYF", germline.v_cdr3, germline.j_cdr3)
    assert found == ["V-gene"] * 5 + ["junction"] * 2 + ["J-gene"] * 6
    assert segments.segments("CASS", "CASSI", "SYEQYF") == ["V-gene"] * 4


def test_scan_covers_every_position_and_germline_beats_junction():
    plm = plm_settings(plm_config())
    table, summary = chapter.scan_result(plm, esm2_available=False)
    assert list(table.columns) == scan.COLUMNS
    assert table["position"].tolist() == list(range(1, 14))
    assert table.loc[table["position"] == 6, "segment"].item() == "junction"
    assert set(summary) == {"sceptr"}
    sceptr = summary["sceptr"]
    assert (sceptr["n_germline"], sceptr["n_junctional"]) == (11, 2)
    assert sceptr["mean_p_true_germline"] > sceptr["mean_p_true_junctional"]


def test_scan_with_both_models_and_the_values_keys(tiny_checkpoint):
    plm = plm_settings(plm_config(checkpoint=str(tiny_checkpoint)))
    esm2_result, sceptr_result = chapter.esm2_result(plm), chapter.sceptr_result(plm)
    table, summary = chapter.scan_result(plm, esm2_available=True)
    assert table["model"].value_counts().to_dict() == {"esm2": 13, "sceptr": 13}
    values = chapter_values(esm2_result, sceptr_result, summary)
    for prefix in ("esm2", "sceptr"):
        assert f"{prefix}.p_C_at_cdr3_pos1" in values
        assert f"{prefix}.top4_at_cdr3_pos6" in values
        assert f"{prefix}.scan.mean_p_true_junctional" in values
    assert values["sceptr.model_variant"] == "SCEPTR_MLM_only"


def test_golden_bands_for_sceptr_encode_the_explainers_claim():
    entries, _ = load_golden(EXPLAINER_GOLDEN)
    bands = {e.key: (e.tolerance.kind, e.tolerance.bound, e.chapter) for e in entries}
    assert bands["sceptr.p_C_at_cdr3_pos1"] == ("min", 0.8, "plm")
    assert bands["sceptr.p_R_at_cdr3_pos6"] == ("max", 0.2, "plm")
    assert bands["sceptr.scan.germline_minus_junctional"] == ("min", 0.0, "plm")


# The chapter through Snakemake ---------------------------------------------------------------


@pytest.mark.slow
def test_plm_chapter_offline_passes_sceptr_and_skips_esm2(workflow_copy, tmp_path, monkeypatch):
    wf = workflow_copy
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # an empty hub cache
    override = write_config(wf / "offline.yaml", OFFLINE)
    proc = snakemake(wf, "plm", "--configfile", str(override))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((wf / "results/paper/plm/golden_report.json").read_text())
    rows = {row["key"]: row for row in report["rows"]}
    assert rows["esm2.p_C_at_cdr3_pos1"]["status"] == SKIPPED
    assert "plm.esm2.download is false" in rows["esm2.p_C_at_cdr3_pos1"]["reason"]
    assert (wf / "results/paper/plm/scan.csv").read_text().count("\nsceptr,") == 13


@pytest.mark.slow
def test_plm_rules_run_the_esm2_path_with_a_fixture_checkpoint(workflow_copy, tmp_path):
    wf = workflow_copy
    checkpoint = save_tiny_esm2(tmp_path)
    override = write_config(
        wf / "tiny.yaml", {"run": "tiny", "plm": {"esm2": {"checkpoint": str(checkpoint)}}}
    )
    targets = ["results/tiny/plm/values.json", "results/tiny/plm/scan.csv"]
    proc = snakemake(wf, *targets, "--configfile", str(override))
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = json.loads((wf / targets[0]).read_text())
    assert "esm2.unavailable" not in values
    assert {"esm2.p_C_at_cdr3_pos1", "esm2.p_R_at_cdr3_pos6", "esm2.scan.n_junctional"} <= set(
        values
    )
    assert (wf / targets[1]).read_text().count("\nesm2,") == 13
