"""Golden check v2 applied (tcrformer.chapters.ensemble.golden_v2), on ensembles whose truth
is known: the bands file records its method and refuses another one, a run is judged on
its curve, held-out ensembles from the same numerics pool and a shifted one is stratified,
and the command line writes its record or says, in one line, what is missing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from tcrformer.chapters.ensemble import curves, golden_v2
from tcrformer.core import golden

FLOOR, EVAL_N = 0.611, 1000


def ensemble(seeds, shift=0.0, seed=0) -> pd.DataFrame:
    """Per-seed statistics drawn from known models; `shift` moves the loss window by that
    many of its sds (what other numerics would do if they changed the training)."""
    rng = np.random.default_rng(seed)
    n = len(seeds)
    return pd.DataFrame({
        "seed": list(seeds),
        "loss_window": rng.normal(0.64 + shift * 0.002, 0.002, n),
        "loss_early": FLOOR + np.exp(rng.normal(math.log(0.25), 0.08, n)),
        "misses": stats.betabinom.rvs(EVAL_N, 2.0, 60.0, size=n, random_state=rng),
        "antidiagonal": 1 / (1 + np.exp(-rng.normal(3.0, 0.4, n))),
    })  # fmt: skip


def wide_curves(seeds, seed=0, after_1000=0.0) -> pd.DataFrame:
    """A curves.csv table of correct runs (test_monitor's model), raised by `after_1000`
    from step 1,001 on."""
    from test_monitor import correct_curves

    runs = correct_curves(len(seeds), np.random.default_rng(seed))
    runs[:, 1000:] += after_1000
    columns = {f"seed{s}": run for s, run in zip(seeds, runs, strict=True)}
    return pd.DataFrame({"step": np.arange(1, runs.shape[1] + 1), **columns})


@pytest.fixture(scope="module")
def record():
    found = golden_v2.bands_record(ensemble(range(64, 96)), 0.01, FLOOR, EVAL_N, {"run": "t"})
    return {**found, "monitor": golden_v2.monitor_record(wide_curves(range(64, 96)), 0.01, FLOOR)}


def test_the_bands_file_records_its_method_and_reads_back(record):
    assert record["method"]["sha256"] == golden_v2.method_sha256()
    assert record["method"]["seeds"] == list(range(64, 96)) and record["method"]["n"] == 32
    assert record["method"]["alpha_per_key"] == pytest.approx(0.0025)
    bands = golden_v2.read_bands(yaml.safe_load(yaml.safe_dump(record)))
    assert set(bands) == set(curves.KEYS)
    assert bands["loss_window"].floor == FLOOR and bands["antidiagonal"].side == "lower"
    assert 0.64 < bands["loss_window"].bound < 0.66


def test_bands_made_by_another_method_are_refused(record):
    other = {**record, "method": {**record["method"], "sha256": "0" * 64}}
    with pytest.raises(golden_v2.ResultFileError, match="method.sha256 differs"):
        golden_v2.read_bands(other)


def test_a_run_is_judged_on_its_curve_and_a_wrong_cdr3_has_no_antidiagonal(record):
    bands = golden_v2.read_bands(record)
    losses = pd.DataFrame({"step": np.arange(1, 3001), "loss": np.full(3000, 0.64)})
    values = {"r.cdr3_output": "FYQEYSSRISSAC", "r.heldout_exact": 970,
              "r.cross_attention_antidiagonal_mean": 0.95}  # fmt: skip
    good = golden_v2.run_statistics(losses, values, "r", "CASSIRSSYEQYF", EVAL_N)
    assert good["loss_window"] == pytest.approx(0.64) and good["misses"] == 30
    wrong = golden_v2.run_statistics(
        losses, {**values, "r.cdr3_output": "FYQEYSSRISSAA"}, "r", "CASSIRSSYEQYF", EVAL_N
    )
    assert math.isnan(wrong["antidiagonal"])
    rows = pd.DataFrame([{"seed": 1, **good}, {"seed": 2, **wrong},
                         {"seed": 3, **good, "loss_window": 0.70}])  # fmt: skip
    judged = golden_v2.judge_seeds(bands, rows).set_index("seed")
    assert judged["fails"].tolist() == [0, 0, 1]  # a missing anti-diagonal is not a FAIL
    assert judged.loc[3, "failed_keys"] == "loss_window"


def test_held_out_ensembles_pool_when_they_agree_and_are_stratified_when_shifted(record):
    bands = golden_v2.read_bands(record)
    fitting = ensemble(range(64, 96))
    heldout = {"same": ensemble(range(96, 112), seed=1),
               "shifted": ensemble(range(112, 128), shift=3.0, seed=2)}  # fmt: skip
    found = golden_v2.validate_heldout(fitting, heldout, bands, FLOOR, EVAL_N)
    same, shifted = found["ensembles"]["same"], found["ensembles"]["shifted"]
    assert same["comparison"]["pool"] and not shifted["comparison"]["pool"]
    assert found["pooled"]["ensembles"] == ["same"] and found["stratify"] == ["shifted"]
    assert found["pooled"]["draws"] == 16 and found["pooled"]["fails"] == same["fails"]
    assert same["draws"] == 16 and same["fails"] <= 1
    low, high = same["rate_interval_95"]
    assert low == 0.0 or same["fails"] > 0
    assert high == pytest.approx(curves.failure_interval(same["fails"], 16)[1], abs=1e-4)
    assert shifted["fails"] > same["fails"]  # a 3 sd shift crosses a 2.8 sd bound often
    assert set(same["pit"]) == set(curves.KEYS) and same["pit"]["loss_window"]["n"] == 16
    assert "| shifted | 112..127 |" in golden_v2.validation_markdown(found)


def write_ensemble(folder, stats_, run, curves_seed=0, after_1000=0.0, mode="portable"):
    import json

    folder.mkdir(parents=True)
    for seed in stats_["seed"]:  # what each seed trained under (golden_v2.NUMERICS_FIELDS)
        (folder / f"seed{seed}").mkdir()
        numerics = {"mode": mode, "ranks": 1, "threads": 1}
        (folder / f"seed{seed}" / "numerics.json").write_text(json.dumps(numerics))
    stats_.to_csv(folder / "statistics_v2.csv", index=False)
    wide = wide_curves(list(stats_["seed"]), curves_seed, after_1000)
    wide.to_csv(folder / "curves.csv", index=False)
    (folder / "golden_bands.yaml").write_text(yaml.safe_dump({"provenance": {"run": run}}))
    return folder


def test_the_command_line_fits_validates_and_names_what_is_missing(tmp_path, monkeypatch, capsys):
    from conftest import ROOT

    monkeypatch.chdir(ROOT)  # the config names config/golden/seed_values.yaml
    out = tmp_path / "v2"
    fit = write_ensemble(tmp_path / "fit", ensemble(range(64, 96)), "golden_fit")
    held = write_ensemble(tmp_path / "held", ensemble(range(96, 112), seed=1), "golden_held", 1)
    broken = write_ensemble(tmp_path / "broken", ensemble(range(200, 216), seed=2), "golden_b",
                            2, after_1000=0.03)  # fmt: skip
    assert golden_v2.main(["fit", "--ensemble", str(fit), "--folder", str(out)]) == 0
    record = yaml.safe_load((out / "bands.yaml").read_text())
    assert record["provenance"]["run"] == "golden_fit" and record["method"]["budget"] == 0.01
    # The provenance names the commands that rerun it: the overlay that trained these seeds,
    # and the module that fitted the bands (not `python -m __main__`).
    provenance = record["provenance"]
    assert provenance["command"].endswith("config/golden/ensembles/fit.yaml")
    assert provenance["bands_fitted"]["command"].startswith(f"python -m {golden_v2.MODULE} fit")
    assert (out / "fit_curves.csv").is_file() and (out / "fit_statistics_v2.csv").is_file()
    assert record["monitor"]["n"] == 32 and len(record["monitor"]["limits"]) == 30
    args = ["validate", "--ensemble", f"portable={held}", "--ensemble", f"broken={broken}",
            "--folder", str(out)]  # fmt: skip
    assert golden_v2.main(args) == 0
    found = yaml.safe_load((out / "validation.yaml").read_text())
    assert found["ensembles"]["portable"]["draws"] == 16
    # The monitor, replayed on every held-out curve: correct ones pass, raised ones flag.
    assert found["ensembles"]["portable"]["monitor"]["flagged"] <= 1
    assert found["ensembles"]["broken"]["monitor"]["flagged"] >= 15
    assert "| broken |" in (out / "validation.md").read_text()
    assert found["provenance"]["portable"]["run"] == "golden_held"
    assert (out / "portable_statistics_v2.csv").is_file()
    # Fitting seeds are never held out; a folder without its files is named.
    args = ["validate", "--ensemble", f"again={fit}", "--folder", str(out)]
    assert golden_v2.main(args) == 1
    assert "shares seeds with the fitting ensemble" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert golden_v2.main(["fit", "--ensemble", str(empty), "--folder", str(out)]) == 1
    assert "no curves.csv, statistics_v2.csv, golden_bands.yaml" in capsys.readouterr().err
    assert golden_v2.main(["validate", "--ensemble", str(held), "--folder", str(out)]) == 1
    assert "expected name=folder" in capsys.readouterr().err


def test_numerics_that_do_not_pool_get_bands_of_their_own(tmp_path, monkeypatch, capsys):
    """A held-out ensemble whose numerics shift the training (3 sds) is stratified: bands
    fitted on it by the same method, matched by the numerics field that differs, checked by
    leave-one-out; a run under those numerics is judged by them, any other by the pooled
    bands; an ensemble that pools is refused."""
    from conftest import ROOT

    monkeypatch.chdir(ROOT)
    out = tmp_path / "v2"
    fit = write_ensemble(tmp_path / "fit", ensemble(range(64, 96)), "golden_fit")
    same = write_ensemble(tmp_path / "same", ensemble(range(96, 112), seed=1), "golden_same", 1)
    native = write_ensemble(tmp_path / "native", ensemble(range(128, 144), shift=-6.0, seed=2),
                            "golden_native", 2, mode="native")  # fmt: skip
    assert golden_v2.main(["fit", "--ensemble", str(fit), "--folder", str(out)]) == 0
    args = ["validate", "--ensemble", f"same={same}", "--ensemble", f"native={native}"]
    assert golden_v2.main([*args, "--folder", str(out)]) == 0
    assert yaml.safe_load((out / "validation.yaml").read_text())["stratify"] == ["native"]
    refused = ["stratify", "--ensemble", f"same={same}", "--folder", str(out)]
    assert golden_v2.main(refused) == 1
    assert "pools with the fitting ensemble" in capsys.readouterr().err
    args = ["stratify", "--ensemble", f"native={native}", "--folder", str(out)]
    assert golden_v2.main(args) == 0
    record = yaml.safe_load((out / "bands.yaml").read_text())
    stratum = record["strata"]["native"]
    assert stratum["match"] == {"mode": "native"} and stratum["n"] == 16
    assert stratum["bands"]["loss_window"]["bound"] < record["bands"]["loss_window"]["bound"]
    checked = yaml.safe_load((out / "validation.yaml").read_text())["strata"]["native"]
    assert checked["leave_one_out"]["draws"] == 16 and checked["leave_one_out"]["fails"] <= 2
    # Judged: a native run by its stratum (its lower window FAILs what the pooled bands
    # pass), a portable or unrecorded one by the pooled bands.
    assert golden_v2.stratum_of(record, {"mode": "native", "ranks": 2}) == "native"
    assert golden_v2.stratum_of(record, {"mode": "portable", "ranks": 1}) is None
    assert golden_v2.stratum_of(record, None) is None
    config = {"reversal": {"cdr3": "CASSIRSSYEQYF"}}
    values = {"reversal.cdr3_output": "FYQEYSSRISSAC", "reversal.heldout_exact": 975,
              "reversal.cross_attention_antidiagonal_mean": 0.95}  # fmt: skip
    curve = wide_curves([0], seed=7)
    raised = pd.DataFrame({"step": curve["step"], "loss": curve["seed0"]})
    window = curves.window_mean(raised["loss"].to_numpy(), curves.WINDOW)
    middle = (
        stratum["bands"]["loss_window"]["bound"] + record["bands"]["loss_window"]["bound"]
    ) / 2
    raised["loss"] += middle - window  # between the two bounds
    by = {mode: {r.key: r for r in golden_v2.judged_by_v2([], record, raised, values, config,
                                                         {}, {"mode": mode, "ranks": 1})}
          for mode in ("native", "portable")}  # fmt: skip
    assert by["native"]["reversal.v2.loss_window"].status == "FAIL"
    assert by["native"]["reversal.v2.loss_window"].tolerance.endswith("(stratum native)")
    assert by["portable"]["reversal.v2.loss_window"].status == "PASS"
    assert "native (mode native, 16 seeds)" in golden_v2.method_v2(record)["interval"]


def test_power_counts_the_faulty_runs_the_bands_fail(tmp_path, monkeypatch, record):
    import json

    from conftest import ROOT

    monkeypatch.chdir(ROOT)
    out = tmp_path / "v2"
    out.mkdir()
    (out / "bands.yaml").write_text(yaml.safe_dump(record))
    runs = tmp_path / "power"
    for fault, raised in (("lr_doubled", 0.06), ("harmless", 0.0)):
        wide = wide_curves([0, 1], seed=5, after_1000=raised)
        for seed in (0, 1):
            folder = runs / fault / f"seed{seed}"
            folder.mkdir(parents=True)
            values = {"fault": fault, "seed": seed, "breaks": f"{fault} breaks",
                      "reversal.cdr3_output": "FYQEYSSRISSAC", "reversal.heldout_exact": 970,
                      "reversal.cross_attention_antidiagonal_mean": 0.95}  # fmt: skip
            (folder / "values.json").write_text(json.dumps(values))
            losses = pd.DataFrame({"step": wide["step"], "loss": wide[f"seed{seed}"]})
            losses.to_csv(folder / "losses.csv", index=False)
    args = ["power", "--runs", str(runs), "--folder", str(out)]
    assert golden_v2.main(args) == 0
    found = yaml.safe_load((out / "power.yaml").read_text())["faults"]
    assert found["lr_doubled"]["caught"] == 2 and found["lr_doubled"]["keys"] == ["loss_window"]
    assert found["harmless"]["caught"] == 0 and found["harmless"]["interval_95"][0] == 0.0
    assert found["lr_doubled"]["monitor_flagged"] == 2 and found["harmless"]["monitor_flagged"] == 0
    assert "| `lr_doubled` | lr_doubled breaks | 2 | 2 |" in (out / "power.md").read_text()
    written = pd.read_csv(out / "power_curves.csv")  # every faulty run's curve, as trained
    assert written["harmless_seed1"].tolist() == pytest.approx(wide["seed1"].tolist())
    assert golden_v2.main(["power", "--runs", str(tmp_path / "none"), "--folder", str(out)]) == 1


def test_the_v2_ensembles_have_fresh_disjoint_seeds_and_valid_configs():
    """The four overlays of config/golden/ensembles: each a valid config, at least 16
    seeds, none shared with another or with version 1's seeds (0..63), numerics as named."""
    import copy

    from tcrformer.validation import validate as validate_config

    from conftest import ROOT, default_config

    schema, seen = ROOT / "workflow/schemas/config.schema.yaml", set()
    expected = {"fit": ("portable", 1), "portable": ("portable", 1), "ranks2": ("portable", 2),
                "native": ("native", 1)}  # fmt: skip
    for name, (mode, ranks) in expected.items():
        overlay = yaml.safe_load((ROOT / f"config/golden/ensembles/{name}.yaml").read_text())
        config = copy.deepcopy(default_config())
        for section, values in overlay.items():
            config[section] = {**config[section], **values} if isinstance(values, dict) else values
        settings = validate_config(config, schema)
        seeds = set(settings["ensemble"].seeds)
        assert len(seeds) >= 16 and not seeds & seen and min(seeds) >= 64, name
        assert (settings["ensemble"].ranks, config["numerics"]["mode"]) == (ranks, mode)
        assert config["run"] == f"golden_{name}"
        seen |= seeds


def test_the_golden_file_names_where_its_v2_bands_live(tmp_path):
    from tcrformer.core.golden import bands_v2_file

    from conftest import ROOT

    assert (
        bands_v2_file(ROOT / "config/golden/seed_values.yaml")
        == ROOT / "config/golden/v2/bands.yaml"
    )
    assert golden_v2.FOLDER / golden_v2.BANDS == golden_v2.GOLDEN_FILE.parent / "v2/bands.yaml"
    plain = tmp_path / "golden.yaml"
    plain.write_text(yaml.safe_dump({"values": []}))
    assert bands_v2_file(plain) is None  # the monitor is then off


def v1_rows():
    from tcrformer.core import golden

    return [
        golden.Row("reversal.loss_step3000", "reversal", 0.64, 0.63,
                   "ensemble [0.62, 0.68] (n=32)", golden.PASS),
        golden.Row("reversal.heldout_exact", "reversal", 960, 890,
                   "ensemble [906.7, 1000] (n=32)", golden.FAIL),
        golden.Row("toy.weights", "toy", 1, 1, "exact", golden.PASS),
    ]  # fmt: skip


def test_v2_judges_the_curve_and_v1s_bands_are_shown_not_judged(record):
    from tcrformer.core import golden

    config = {"reversal": {"cdr3": "CASSIRSSYEQYF", "steps": 3000}}
    inputs = {"reversal": {"reversal.steps": 3000}}
    values = {"reversal.cdr3_output": "FYQEYSSRISSAC", "reversal.heldout_exact": 975,
              "reversal.cross_attention_antidiagonal_mean": 0.95}  # fmt: skip
    curve = wide_curves([0], seed=7)
    losses = pd.DataFrame({"step": curve["step"], "loss": curve["seed0"]})
    rows = golden_v2.judged_by_v2(v1_rows(), record, losses, values, config, inputs)
    by_key = {r.key: r for r in rows}
    assert by_key["reversal.loss_step3000"].status == golden.REPORT
    assert by_key["reversal.heldout_exact"].reason.endswith("v1: FAIL")
    assert by_key["toy.weights"].status == golden.PASS  # another chapter: untouched
    v2 = {k.removeprefix("reversal.v2."): r for k, r in by_key.items() if ".v2." in k}
    assert set(v2) == set(curves.KEYS)
    assert v2["misses"].value == 25 and v2["loss_window"].tolerance.startswith("v2 tolerance")
    # A raised curve FAILs its window, a wrong CDR3 leaves the anti-diagonal unjudged, and
    # a run whose inputs differ from the seed's is SKIPPED with the reason.
    raised = losses.assign(loss=losses["loss"] + 0.03)
    wrong = {**values, "reversal.cdr3_output": "FYQEYSSRISSAA"}
    rows = {r.key: r for r in golden_v2.judged_by_v2([], record, raised, wrong, config, inputs)}
    assert rows["reversal.v2.loss_window"].status == golden.FAIL
    assert rows["reversal.v2.antidiagonal"].status == golden.REPORT
    other = {"reversal": {**config["reversal"], "steps": 1000}}
    rows = golden_v2.judged_by_v2([], record, losses, values, other, inputs)
    assert {r.status for r in rows} == {golden.SKIPPED} and "inputs differ" in rows[0].reason
    assert golden_v2.method_v2(record)["keys"] == 4


@pytest.mark.slow
def test_a_run_with_v2_bands_is_judged_by_them(workflow_copy):
    """The rules pick v2 up once its bands file exists beside the golden file: the report
    has the v2 rows (SKIPPED here: the small run's recipe is not the seed's)."""
    import json

    from conftest import snakemake, write_config

    bands = workflow_copy / "config/golden/v2/bands.yaml"
    bands.parent.mkdir(parents=True, exist_ok=True)
    found = golden_v2.bands_record(ensemble(range(64, 96)), 0.01, FLOOR, EVAL_N, {"run": "t"})
    bands.write_text(yaml.safe_dump(found))
    small = {"run": "v2", "reversal": {"steps": 100, "eval_n": 50, "warmup": 40,
                                       "log_every": 50, "report_every": 50}}  # fmt: skip
    config = write_config(workflow_copy / "v2.yaml", small)
    done = snakemake(workflow_copy, "reversal", "--configfile", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((workflow_copy / "results/v2/reversal/golden_report.json").read_text())
    v2 = {r["key"]: r for r in report["rows"] if ".v2." in r["key"]}
    assert set(v2) == {f"reversal.v2.{k}" for k in curves.KEYS}
    assert {r["status"] for r in v2.values()} == {"SKIPPED"}
    assert report["trained_values"]["version"] == 2


# The committed record (config/golden/v2/) ------------------------------------------------------
# What golden_v2 wrote from the real ensembles: these tests recompute it from the committed
# curves and statistics, so no bound, count or rate in it was typed, and check the rate the
# held-out seeds show against the budget.


def committed(name: str):
    from conftest import ROOT

    path = ROOT / "config/golden/v2" / name
    return yaml.safe_load(path.read_text()) if name.endswith(".yaml") else pd.read_csv(path)


def test_the_committed_statistics_are_the_committed_curves_window_means():
    for name in ("fit", *committed("validation.yaml")["ensembles"]):
        wide, table = committed(f"{name}_curves.csv"), committed(f"{name}_statistics_v2.csv")
        for row in table.itertuples(index=False):
            curve = wide.sort_values("step")[f"seed{row.seed}"].to_numpy(float)
            assert row.loss_window == pytest.approx(curves.window_mean(curve, curves.WINDOW))
            assert row.loss_early == pytest.approx(curves.window_mean(curve, curves.EARLY))


def test_the_committed_bands_and_monitor_are_what_the_method_fits():
    from conftest import ROOT

    record = committed("bands.yaml")
    budget = golden.read_method(ROOT / "config/golden/seed_values.yaml")["budget"]
    assert record["method"]["budget"] == budget == 0.01
    method = record["method"]
    statistics = committed("fit_statistics_v2.csv")
    assert method["seeds"] == [int(s) for s in statistics["seed"]] and method["n"] >= 32
    again = golden_v2.bands_record(statistics, budget, method["floor"], method["eval_n"], {})
    assert again["bands"] == record["bands"]
    assert golden_v2.read_bands(record).keys() == set(curves.KEYS)  # the method's sha256
    limits = golden_v2.monitor_record(committed("fit_curves.csv"), budget, method["floor"])
    assert limits["limits"] == pytest.approx(record["monitor"]["limits"])


def test_the_committed_validation_is_what_the_held_out_seeds_give_and_keeps_the_budget():
    record, found = committed("bands.yaml"), committed("validation.yaml")
    method = record["method"]
    heldout = {name: committed(f"{name}_statistics_v2.csv") for name in found["ensembles"]}
    assert sum(len(t) for t in heldout.values()) >= 48
    assert all(not set(t["seed"]) & set(method["seeds"]) for t in heldout.values())
    monitored = {name: golden_v2.monitor_flags(record["monitor"], committed(f"{name}_curves.csv"))
                 for name in heldout}  # fmt: skip
    again = golden_v2.validate_heldout(committed("fit_statistics_v2.csv"), heldout,
                                       golden_v2.read_bands(record), method["floor"],
                                       method["eval_n"], monitored)  # fmt: skip
    again = yaml.safe_load(yaml.safe_dump(again))  # the yaml's types
    for key in ("ensembles", "pooled", "stratify"):
        assert again[key] == found[key], key
    # Every held-out seed the bands judge, pooled or not: more FAILs than a 1 % rate allows at
    # 95 % confidence (one-sided exact binomial) would refute the budget.
    fails = sum(e["fails"] for e in found["ensembles"].values())
    draws = sum(e["draws"] for e in found["ensembles"].values())
    assert stats.binomtest(fails, draws, method["budget"], alternative="greater").pvalue >= 0.05


def test_the_committed_power_is_what_the_bands_say_of_the_faulty_runs():
    record, summary, runs = committed("bands.yaml"), committed("power.yaml"), committed("power.csv")
    statistics = runs[["seed", *curves.KEYS]]
    judged = golden_v2.judge_seeds(golden_v2.read_bands(record), statistics)
    assert judged["fails"].tolist() == runs["fails"].tolist()
    assert judged["failed_keys"].fillna("").tolist() == runs["failed_keys"].fillna("").tolist()
    # The judged statistics and the monitor's flags are those of the committed curves.
    from tcrformer.chapters.ensemble.monitor import Reference, first_flag

    wide = committed("power_curves.csv").sort_values("step")
    reference = Reference.from_record(record["monitor"])
    for row in runs.itertuples(index=False):
        curve = wide[f"{row.fault}_seed{row.seed}"].dropna().to_numpy(float)
        assert row.loss_window == pytest.approx(curves.window_mean(curve, curves.WINDOW))
        assert row.loss_early == pytest.approx(curves.window_mean(curve, curves.EARLY))
        flag = first_flag(reference, curve)
        assert (flag is None) == pd.isna(row.monitor_step) and (flag or 0) == (
            0 if pd.isna(row.monitor_step) else row.monitor_step
        )
    for fault, group in runs.groupby("fault"):
        entry = summary["faults"][fault]
        assert (entry["runs"], entry["caught"]) == (len(group), int(group["fails"].sum()))
        assert entry["monitor_flagged"] == int(group["monitor_step"].notna().sum())
    assert len(summary["faults"]) >= 6
