"""The claims' pilot (workflow/claims/config/claims_pilot.yaml, tools/claims_pilot.py): fresh
seeds, a job for every candidate setup's arms, and a report that reads each endpoint's spread
as the decision code does, seals the means, and applies the rule the design fixed before the
pilot (docs/claims_v5_design.md, section 8): setups in a fixed order, qualified per claim;
plans at the planned effects, unreachable above the cap; a budget with an order and a power
floor; forecasts over v4's prior. The plan's arithmetic (tools/claims_power.py) for a pilot's
spreads and joint endpoints."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from tcrclaims import protocol
from tcrclaims.kinds import INCONCLUSIVE, REFUTED, SUPPORTED
from tcrformer.stats.sign_flip import sign_flip_null

from conftest import ROOT
from tools import claims_pilot as pilot
from tools import claims_power as power

SETTINGS = pilot.pilot_settings()
LEVEL = pilot.ALPHA / 3  # the plan's worst Holm step, all three claims in the family


def used_seeds() -> set[int]:
    """Every training seed a run of this repository trained or registered before the pilot:
    the claims files (v1-v3 registered 0..103 at most), the golden ensembles and fault runs,
    and the ensemble of config.yaml."""
    seeds = set(range(104))
    claims = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())["claims"]
    seeds |= set(claims["seeds"])
    files = [*(ROOT / "results/archive").glob("claims_v*.yaml"),
             *(ROOT / "config/golden").rglob("*.yaml"), ROOT / "config/config.yaml"]  # fmt: skip
    for path in files:
        stack = [yaml.safe_load(path.read_text())]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key, value in node.items():
                    if "seeds" in str(key) and isinstance(value, list):
                        seeds |= {v for v in value if isinstance(v, int)}
                    stack.append(value)
            elif isinstance(node, list):
                stack.extend(node)
    return seeds


def test_the_pilot_trains_fresh_seeds_on_fresh_strings_and_every_setups_arms():
    used = used_seeds()
    assert {5000, 7000, 8207, 231, 103} <= used  # the check sees the earlier runs
    assert not set(SETTINGS.seeds) & used
    v4 = yaml.safe_load((ROOT / "workflow/claims/config/claims.yaml").read_text())["claims"]
    v4_strings = {v4["eval_seed_per_seed"] + s for s in v4["seeds"]} | {1, 2}
    strings = {SETTINGS.recipe(arm, s).eval_seed for arm in SETTINGS.tested_arms()
               for s in SETTINGS.seeds_of(arm)}  # fmt: skip
    assert not strings & v4_strings and not strings & used
    # three arms a generalisation setup (both regularisers, one without each), the setups
    # those of the rule's order; Pre-LN deep with and without warm-up, the excess on 5,000
    # strings at every 20th step from 1,000
    setups = {c.test["arm"] for c in SETTINGS.claims if c.test["metric"] == "heldout_fraction"}
    assert {(SETTINGS.arms[a].train_set, SETTINGS.arms[a].steps) for a in setups} == set(
        pilot.SETUPS)  # fmt: skip
    assert "set1000_steps1500" not in setups  # v4's own: no room
    for arm in setups:
        assert {f"{arm}_no_dropout", f"{arm}_no_smoothing"} <= set(SETTINGS.tested_arms())
        assert SETTINGS.arms[f"{arm}_no_dropout"].dropout == 0
        assert SETTINGS.arms[f"{arm}_no_smoothing"].label_smoothing == 0
    # dropout: held-out gain and the gap, both; smoothing: the held-out gain, its gap reported
    for claim in SETTINGS.claims:
        family = pilot.family_of(claim.id)
        ends = [e["metric"] for e in [claim.test, *claim.test.get("co_primary", ())]]
        assert ends == {"dropout": ["heldout_fraction", "gap"],
                        "smoothing_generalisation": ["heldout_fraction"],
                        "pre_ln_warmup": ["log2_excess"]}[family]  # fmt: skip
        if family == "smoothing_generalisation":
            assert claim.test["report"] == ["gap"]
    assert SETTINGS.excess_strings_of("deep_pre") == pilot.EXCESS_STRINGS == 5000
    assert SETTINGS.snapshots_of("deep_pre") == tuple(range(1000, 1201, 20))
    assert "baseline" not in SETTINGS.tested_arms()
    jobs = sum(len(SETTINGS.seeds_of(a)) for a in SETTINGS.tested_arms())
    assert jobs == 17 * 8


def test_the_cost_is_each_jobs_steps_its_rest_and_its_excess():
    rates = {(2, True, True): (0.1, 5.0), (2, False, True): (0.08, 5.0),
             (2, True, False): (0.09, 5.0), (6, True, True): (0.25, 8.0)}  # fmt: skip
    deep = 1200 * 0.25 + 8 + 11 * (5000 + 200 + 500 + 1000 + 2000) / 1000 * 0.68
    assert pilot.job_seconds(SETTINGS, "deep_pre", rates) == pytest.approx(deep)
    assert pilot.job_seconds(SETTINGS, "set250_steps3000_no_dropout", rates) == pytest.approx(
        3000 * 0.08 + 5)  # fmt: skip
    found = pilot.cost(SETTINGS, rates)
    assert found["cpu_hours"] == pytest.approx(sum(r["cpu_hours"] for r in found["arms"]))
    assert len(found["arms"]) == 17


# A synthetic pilot run --------------------------------------------------------------------------

# Each setup's references: (median held-out exact, gap) without dropout and without smoothing.
# The first setup of the order has room but memorises (held-out 0.4); dropout's first
# qualifying setup is (1,000, 3,000), smoothing's (500, 3,000), whose spread is the largest.
REFERENCES = {
    "set500_steps1500": {"dropout": (400, 0.3), "smoothing": (400, 0.3)},
    "set1000_steps3000": {"dropout": (700, 0.10), "smoothing": (700, 0.03)},
    "set500_steps3000": {"dropout": (700, 0.12), "smoothing": (700, 0.12)},
    "set250_steps3000": {"dropout": (700, 0.15), "smoothing": (700, 0.15)},
}  # the others: (700, 0.02)
NOISY = {"set500_steps3000": 1.5, "set250_steps3000": 0.5}  # its spread, times the others'
CPU = {"deep": 200.0, 1500: 50.0, 3000: 100.0}  # CPU seconds a job


def setup_of(arm: str) -> tuple[str, str | None]:
    for kind in ("dropout", "smoothing"):
        if arm.endswith(f"_no_{kind}"):
            return arm.removesuffix(f"_no_{kind}"), kind
    return arm, None


def packed(bits: np.ndarray) -> str:
    return base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode()


def arm_records(rng, arm: str, seeds, bits: bool = False) -> dict[int, dict]:
    setup, without = setup_of(arm)
    n_train = min(SETTINGS.arms[arm].train_set, 1000)
    held_at, gap = REFERENCES.get(setup, {}).get(without or "dropout", (700, 0.02))
    gap = gap if without else gap / 2
    spread = 15 * NOISY.get(setup, 1.0)
    rows = {}
    for s in seeds:
        held = int(np.clip(held_at + (0 if without else 20) + rng.normal(0, spread), 0, 1000))
        train_at = held / 1000 + gap + rng.normal(0, 0.005)
        train = int(np.clip(round(train_at * n_train), 0, n_train))
        rows[s] = {"heldout_exact": held, "heldout_total": 1000, "heldout_fraction": held / 1000,
                   "train_exact": train, "train_total": n_train,
                   "train_fraction": train / n_train,
                   "gap": train / n_train - held / 1000}  # fmt: skip
        if bits:  # the strings ranked by a seed's own ease, every arm alike, plus the arm's luck
            for side, count, total in (("heldout", held, 1000), ("train", train, n_train)):
                ease = np.random.default_rng([s, total]).random(total) + rng.normal(0, 0.05, total)
                right = np.zeros(total, bool)
                right[np.argsort(-ease)[:count]] = True
                rows[s][f"{side}_bits"] = packed(right)
    return rows


def excess_records(rng, arm: str, seeds) -> dict[int, dict]:
    steps = range(1000, 1201, 20)
    scale = 1.2 if arm == "deep_pre_flat_1" else 1.0
    rows = {}
    for s in seeds:
        base = 0.04 * scale * (1 + 0.02 * rng.normal())

        def noisy(strings, base=base):
            return {str(t): base * math.exp(rng.normal(0, 6 / math.sqrt(strings)))
                    for t in steps}  # fmt: skip

        rows[s] = {
            "log2_excess": noisy(5000),
            "excess_by_prefix": {str(k): noisy(k) for k in (200, 500, 1000, 2000)},
        }
    return rows


def write_run(folder: Path, shift: dict[str, int] | None = None, bits: bool = False,
              cpu: bool = True) -> Path:  # fmt: skip
    """results/<run> of a pilot run: every job's metrics.json and training_time.json; `shift`
    adds strings to one arm's held-out exact in every seed (a different mean effect, the
    same spread)."""
    rng = np.random.default_rng(0)
    for arm in SETTINGS.tested_arms():
        seeds = SETTINGS.seeds_of(arm)
        deep = arm.startswith("deep")
        made = excess_records(rng, arm, seeds) if deep else arm_records(rng, arm, seeds, bits)
        for s, row in made.items():
            if shift and arm in shift:
                row = {**row, "heldout_exact": row["heldout_exact"] + shift[arm]}
            job = folder / "claims" / "arms" / arm / f"seed{s}"
            job.mkdir(parents=True, exist_ok=True)
            (job / "metrics.json").write_text(json.dumps(row))
            price = CPU["deep"] if deep else CPU[SETTINGS.arms[arm].steps]
            timing = {"cpu_seconds": price + s % 3, "wall_seconds": 2 * price,
                      "load_average": [2.5, 2.4, 2.3]} if cpu else {}  # fmt: skip
            (job / "training_time.json").write_text(json.dumps(timing))
    return folder


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    """Fewer simulations: the tests compare choices, not third decimals."""
    monkeypatch.setattr(power, "SIMULATIONS", 1000)
    monkeypatch.setattr(power, "EXACT_SIMULATIONS", 150)


@pytest.fixture(scope="module")
def v4():
    return pilot.archived_estimates()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A synthetic pilot run's jobs and report."""
    jobs = pilot.read_jobs(write_run(tmp_path_factory.mktemp("pilot") / "claims_pilot"))
    return jobs, *pilot.report(SETTINGS, jobs)


@pytest.fixture(scope="module")
def picked(plain, v4):
    jobs, found, _ = plain
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(power, "SIMULATIONS", 1000)
        patch.setattr(power, "EXACT_SIMULATIONS", 150)
        return pilot.choose(found, jobs, v4)


def keys(node) -> set[str]:
    """Every key of a nest of dicts and lists."""
    if isinstance(node, dict):
        return set(node) | set().union(*(keys(v) for v in node.values()))
    if isinstance(node, list | tuple):
        return set().union(*(keys(v) for v in node))
    return set()


def rounded(node):
    """Floats to 9 significant digits, through dicts and lists: a constant shift of the
    d_s moves their sd in its last bits."""
    if isinstance(node, dict):
        return {k: rounded(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [rounded(v) for v in node]
    return float(f"{node:.9g}") if isinstance(node, float) else node


def test_the_report_reads_each_endpoint_as_the_decision_code_and_holds_no_mean(plain):
    jobs, found, sealed = plain
    by_id = {r["id"]: r for r in found["setups"]}
    row = by_id["dropout_set500_steps3000"]
    arms = jobs["metrics"]["set500_steps3000"], jobs["metrics"]["set500_steps3000_no_dropout"]
    held = np.array([arms[0][s]["heldout_exact"] - arms[1][s]["heldout_exact"]
                     for s in SETTINGS.seeds]) / 1000  # fmt: skip
    gain, gap = row["endpoints"]
    assert (gain["metric"], gap["metric"]) == ("heldout_fraction", "gap")
    assert gain["sd"] == pytest.approx(np.std(held, ddof=1))
    assert gain["planned_sd"] == pytest.approx(power.sd_upper(gain["sd"], 8))
    assert gain["skewness"] == pytest.approx(stats.skew(held, bias=False))
    assert gain["excess_kurtosis"] == pytest.approx(stats.kurtosis(held, bias=False))
    assert row["room"]["median_gap"] == pytest.approx(0.12, abs=0.01) and row["qualifies"]
    assert -1 <= row["correlation"] <= 1
    smoothing = by_id["smoothing_generalisation_set500_steps3000"]["endpoints"]
    assert [(e["metric"], e["tested"]) for e in smoothing] == [("heldout_fraction", True),
                                                               ("gap", False)]  # fmt: skip
    # the means are sealed, and nowhere else
    assert sealed["dropout_set500_steps3000"]["means"]["heldout_fraction"] == pytest.approx(
        held.mean())  # fmt: skip
    assert "mean" not in keys(found) and "means" not in keys(found)
    # the excess: each count of strings, each window; the measured row alone is planned on
    excess = found["excess"]
    assert {(r["strings"], len(r["snapshots"])) for r in excess} == {
        (k, n) for k in (200, 500, 1000, 2000, 5000) for n in (11, 5)}  # fmt: skip
    assert [(r["strings"], len(r["snapshots"])) for r in excess if r["measured"]] == [(5000, 11)]
    assert all(r["planned_sd"] is None for r in excess if not r["measured"])
    sd = {(r["strings"], len(r["snapshots"])): r["sd"] for r in excess}
    assert sd[(5000, 11)] < sd[(200, 11)]  # more strings, less spread
    # every arm: its jobs, none failed, its costs
    arms_ = {a["arm"]: a for a in found["arms"]}
    assert len(arms_) == 17 and all(a["found"] == a["jobs"] == 8 for a in arms_.values())
    assert arms_["deep_pre"]["cpu_seconds"] == pytest.approx(201)  # the median of 200..202
    assert arms_["deep_pre"]["load_average"] == 2.5


def test_the_step_to_step_noise_is_each_windows_own(plain):
    """The 11-snapshot window's noise is between snapshots 20 steps apart, the 5-snapshot
    window's between snapshots 40 apart."""
    jobs, found, _ = plain
    for row in (r for r in found["excess"] if r["strings"] == 5000):
        every = 20 if len(row["snapshots"]) == 11 else 40
        pairs = list(zip(row["snapshots"], row["snapshots"][1:], strict=False))
        assert all(b - a == every for a, b in pairs)
        jumps = [np.log2(rec["log2_excess"][str(b)] / rec["log2_excess"][str(a)])
                 for arm in ("deep_pre_flat_1", "deep_pre")
                 for rec in jobs["metrics"][arm].values()
                 for a, b in pairs]  # fmt: skip
        assert row["step_to_step_sd"] == pytest.approx(np.std(jumps, ddof=1))


def test_each_claim_takes_the_first_setup_of_the_order_that_qualifies_for_it(plain, picked):
    """Dropout's first qualifying setup is (1,000, 3,000); smoothing's reference has no room
    there, and takes (500, 3,000), however noisy; (500, 1,500), first in the order, has room
    but its references memorise (held-out 0.4). Their shared arms differ: each is priced."""
    _, found, _ = plain
    first = {r["id"]: r for r in found["setups"]}["dropout_set500_steps1500"]
    assert first["room"]["median_gap"] >= pilot.ROOM and not first["qualifies"]
    chosen = {c: r["id"] if r else None for c, r in pilot.pick_setups(found["setups"]).items()}
    assert chosen == {
        "dropout": "dropout_set1000_steps3000",
        "smoothing_generalisation": "smoothing_generalisation_set500_steps3000",
    }
    assert picked["claims"]["dropout"]["arms"] == [
        "set1000_steps3000",
        "set1000_steps3000_no_dropout",
    ]
    assert picked["claims"]["smoothing_generalisation"]["arms"][0] == "set500_steps3000"
    assert picked["family"] == list(pilot.FAMILY) and picked["level"] == pytest.approx(LEVEL)
    # the sds play no part: the quietest qualifying setup is not the one taken
    quiet = {r["id"]: r["endpoints"][0]["sd"] for r in found["setups"] if r["qualifies"]}
    assert min(quiet, key=quiet.get) != chosen["smoothing_generalisation"]


def test_qualification_needs_room_and_a_held_out_exact_in_range():
    ok = {"median_gap": 0.08, "least_gap": 0.0, "median_heldout": 0.5}
    assert pilot.qualifies(ok) and pilot.qualifies({**ok, "median_heldout": 0.95})
    assert not pilot.qualifies({**ok, "median_gap": 0.0799})
    assert not pilot.qualifies({**ok, "median_heldout": 0.4999})
    assert not pilot.qualifies({**ok, "median_heldout": 0.9501})


def test_a_claim_no_setup_qualifies_for_is_not_run(plain, v4, monkeypatch):
    monkeypatch.setattr(pilot, "ROOM", 0.5)
    jobs, found, _ = plain
    again = {**found, "setups": [{**r, "qualifies": pilot.qualifies(r["room"])}
                                 for r in found["setups"]]}  # fmt: skip
    picked = pilot.choose(again, jobs, v4)
    for claim in ("dropout", "smoothing_generalisation"):
        assert picked["claims"][claim] == {"verdict": pilot.NOT_AT_SCALE}
    assert picked["family"] == ["pre_ln_warmup"] and picked["level"] == pilot.ALPHA


def test_the_rule_reads_no_mean_effect(plain, picked, tmp_path, v4):
    """A pilot whose arms gain 100 strings more (in both claims' chosen setups) reports and
    picks as before."""
    jobs, found, sealed = plain
    shift = {"set1000_steps3000": 100, "set500_steps3000": 100}
    shifted = pilot.read_jobs(write_run(tmp_path / "shifted", shift))
    found_again, sealed_again = pilot.report(SETTINGS, shifted)
    assert rounded(found_again) == rounded(found)
    assert sealed_again != sealed
    assert rounded(pilot.choose(found_again, shifted, v4)) == rounded(picked)


def test_the_printed_report_contains_no_mean(tmp_path, capsys):
    """The command's output for two pilots that differ only in their mean effects is the
    same but for the sealed file's digest, the SHA-256 of the file that holds the means."""
    printed, sealed = [], []
    for name, shift in (
        ("plain", None),
        ("shifted", {"set1000_steps3000": 100, "set500_steps3000": 100}),
    ):
        run, out = write_run(tmp_path / name, shift), tmp_path / f"{name}_report"
        assert pilot.main(["report", "--results", str(run), "--out", str(out)]) == 0
        text = capsys.readouterr().out
        data = (out / pilot.SEALED).read_bytes()
        assert hashlib.sha256(data).hexdigest() in text
        assert text == (out / "report.md").read_text()
        assert "mean" not in keys(json.loads((out / "report.json").read_text()))
        printed.append(text.replace(hashlib.sha256(data).hexdigest(), "<digest>"))
        sealed.append(json.loads(data))
    assert printed[0] == printed[1]
    gains = [s["dropout_set1000_steps3000"]["means"]["heldout_fraction"] for s in sealed]
    assert gains[1] == pytest.approx(gains[0] + 0.1)
    assert f"{gains[0]:.3g}" not in printed[0] and "53 seeds are floating point" in printed[0]
    (tmp_path / "empty").mkdir()
    assert pilot.main(["report", "--results", str(tmp_path / "empty")]) == 1


def test_discordant_strings_and_their_share_of_the_spread(tmp_path, capsys):
    jobs = pilot.read_jobs(write_run(tmp_path / "bits", bits=True))
    found, sealed = pilot.report(SETTINGS, jobs)
    row = {r["id"]: r for r in found["setups"]}["dropout_set500_steps3000"]
    arm = jobs["metrics"]["set500_steps3000"]
    ref = jobs["metrics"]["set500_steps3000_no_dropout"]
    b, c, within = [], [], []
    for s in SETTINGS.seeds:
        a, r = (pilot.string_bits(x[s], "heldout") for x in (arm, ref))
        b.append(int((a & ~r).sum()))
        c.append(int((~a & r).sum()))
        x = a.astype(int) - r.astype(int)  # each string's difference
        within.append(np.var(x, ddof=1) / x.size)
    assert row["discordant"]["heldout"] == [p + q for p, q in zip(b, c, strict=True)]
    assert sealed["dropout_set500_steps3000"]["discordant"]["heldout"]["9000"] == [b[0], c[0]]
    d = (np.array(b) - np.array(c)) / 1000
    gain = row["endpoints"][0]
    assert gain["strings_share"] == pytest.approx(np.mean(within) / np.var(d, ddof=1))
    assert row["endpoints"][1]["strings_share"] > 0  # the gap: both string sets
    # the printed report gives b + c per seed, never b - c
    out = tmp_path / "report"
    assert pilot.main(["report", "--results", str(tmp_path / "bits"), "--out", str(out)]) == 0
    assert ", ".join(map(str, row["discordant"]["heldout"])) in capsys.readouterr().out
    bad = {**arm[9000], "heldout_exact": arm[9000]["heldout_exact"] + 1}
    with pytest.raises(ValueError, match="heldout_bits"):
        pilot.string_bits(bad, "heldout")


def test_the_excess_per_string_error_at_any_count_of_strings(tmp_path):
    run = write_run(tmp_path / "run")
    for arm in ("deep_pre", "deep_pre_flat_1"):
        for s in SETTINGS.seeds_of(arm):
            path = run / "claims" / "arms" / arm / f"seed{s}" / "metrics.json"
            record = json.loads(path.read_text())
            record["excess_per_string"] = {str(t): {"n": 5000, "mean": 0.04, "var": 0.0016}
                                           for t in range(1000, 1201, 20)}  # fmt: skip
            path.write_text(json.dumps(record))
    found, _ = pilot.report(SETTINGS, pilot.read_jobs(run))
    se = found["excess_se"]["pre_ln_warmup_excess"]
    per_string = 0.04 / (0.04 * math.log(2))  # the delta method: sd / (mean ln 2)
    assert se[5000] == pytest.approx(per_string / math.sqrt(5000))
    assert se[200] == pytest.approx(5 * se[5000])
    assert pilot.per_string_sd({"n": 10, "log2_var": 4.0}) == 2.0


def test_failed_and_non_finite_jobs_and_ceilings_per_arm(tmp_path):
    run = write_run(tmp_path / "run")
    arm = run / "claims" / "arms"
    (arm / "set250_steps1500" / "seed9003" / "metrics.json").unlink()
    path = arm / "set250_steps1500" / "seed9004" / "metrics.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "heldout_exact": None}))
    path = arm / "deep_pre" / "seed9001" / "metrics.json"
    record = json.loads(path.read_text())
    record["log2_excess"]["1100"] = None
    path.write_text(json.dumps(record))
    for s in (9000, 9001):
        path = arm / "set250_steps1500_no_dropout" / f"seed{s}" / "metrics.json"
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "train_exact": record["train_total"]}))
    rows = {a["arm"]: a for a in pilot.arm_rows(SETTINGS, pilot.read_jobs(run))}
    assert rows["set250_steps1500"]["failed"] == [9003]
    assert rows["set250_steps1500"]["found"] == 7
    assert rows["set250_steps1500"]["non_finite"] == [9004]
    assert rows["deep_pre"]["non_finite"] == [9001] and rows["deep_pre"]["failed"] == []
    assert rows["set250_steps1500_no_dropout"]["train_at_1"] == 0.25
    assert rows["set250_steps1500_no_dropout"]["heldout_at_1"] == 0.0


# The plan, the budget and the forecast ----------------------------------------------------------


def test_pre_ln_warmup_is_planned_at_v4s_ratio_with_at_least_ten_seeds(plain, picked):
    """Planned at the log2 ratio 0.378 (not at 0), the sign-flip test itself simulated up to
    20 seeds, never fewer than 10."""
    _, found, _ = plain
    run = pilot.runs_of(found)[0]["pre_ln_warmup"]
    assert (run["strings"], len(run["snapshots"])) == (5000, 11)
    assert pilot.planned_effect("pre_ln_warmup", "log2_excess") == 0.378
    assert picked["claims"]["pre_ln_warmup"]["planned"] == pilot.MIN_EXCESS_SEEDS  # quiet pilot
    sd = 0.15
    at_v4 = power.seeds_needed(0.5, "less", sd, LEVEL, effect=0.378, at_least=10, exact=True)
    at_zero = power.seeds_needed(0.5, "less", sd, LEVEL, effect=0.0, at_least=10, exact=True)
    assert at_v4 > at_zero == 10
    # up to 20 seeds the exact test's power, below the t-test's there
    ends = [{"margin": 0.5, "direction": "less", "mean": 0.378, "sd": sd, "grid": 200}]
    exact = power.verdicts_by_simulation(at_v4, ends, 0.0, LEVEL)[SUPPORTED]
    assert exact >= power.POWER
    assert power.verdicts_by_simulation(at_v4 - 1, ends, 0.0, LEVEL)[SUPPORTED] < power.POWER
    # the rule plans pre_ln_warmup so
    run = run_for("pre_ln_warmup", sd / power.sd_upper(1.0, 8))
    assert pilot.plan_seeds("pre_ln_warmup", run, LEVEL) == at_v4
    # at 6 seeds the exact test rejects only when every d_s lies below the margin: power
    # 0.70 where the t-test's is 0.80
    six = [{**ends[0], "mean": 0.2, "sd": 0.1887}]
    assert power.t_power(6, 0.3, 0.1887, LEVEL) == pytest.approx(0.8, abs=0.001)
    assert power.verdicts_by_simulation(6, six, 0.0, LEVEL, draws=1000)[SUPPORTED] < 0.76


def test_the_exact_simulation_is_the_protocols_own_test():
    """The simulated p-values up to 20 seeds are those the protocol's sign-flip test gives
    the same d_s."""
    rng = np.random.default_rng(3)
    d = np.round((0.4 + 0.3 * rng.standard_normal((5, 12))) * 200) / 200
    support, refute = power._exact_sides(d, 0.5, "less", 200)
    for row, s, r in zip(d, support, refute, strict=True):
        found = protocol.effect("seed_mean", [row], 0.5, "less")
        assert (s, r) == pytest.approx((found.p_support, found.p_refute), abs=1e-12)
        assert sign_flip_null(row).method == "enumeration"


def test_a_count_above_the_cap_is_unreachable_never_capped():
    assert power.seeds_needed(0.01, "greater", 1.0, LEVEL) is None
    assert power.seeds_needed(0.5, "less", 0.1, LEVEL, effect=0.6) is None  # beyond the margin
    ends = [{"margin": 0.01, "direction": "greater", "mean": 0.02, "sd": 10.0},
            {"margin": -0.01, "direction": "less", "mean": -0.02, "sd": 10.0}]  # fmt: skip
    assert power.joint_seeds_needed(ends, [0.0], LEVEL) is None
    claims = [{"id": "c", "kind": "experiment", "test": {
        "effect": "paired_difference", "margin": 0.01, "direction": "greater"}}]  # fmt: skip
    noisy = {"fixed": {s: {"heldout_fraction": 0.5 + 0.4 * (-1) ** s} for s in range(8)},
             "fixed_no_dropout": {s: {"heldout_fraction": 0.5} for s in range(8)}}  # fmt: skip
    plan = power.plan([{**claims[0], "id": "dropout"}], noisy, 0.05)
    assert plan["claims"]["dropout"]["seeds"] is None
    assert power.UNREACHABLE in plan["claims"]["dropout"]["basis"]


def run_for(claim: str, sd: float, corr: float = 0.0) -> dict:
    """A run's plan input: one claim's tested endpoints at a point sd (8 pilot seeds)."""
    ends = {"dropout": [("heldout_fraction", 0.01, "greater"), ("gap", -0.01, "less")],
            "smoothing_generalisation": [("heldout_fraction", 0.01, "greater")],
            "pre_ln_warmup": [("log2_excess", 0.5, "less")]}[claim]  # fmt: skip
    return {"arms": {"pre_ln_warmup": ["deep_pre_flat_1", "deep_pre"],
                     "dropout": ["shared", "no_dropout"],
                     "smoothing_generalisation": ["shared", "no_smoothing"]}[claim],
            "correlation": corr, "endpoints": [
                {"metric": m, "margin": g, "direction": d, "sd": sd,
                 "planned_sd": power.sd_upper(sd, 8)} for m, g, d in ends]}  # fmt: skip


CPU_PER_JOB = {"deep_pre_flat_1": 400.0, "deep_pre": 400.0, "shared": 300.0,
               "no_dropout": 300.0, "no_smoothing": 100.0}  # fmt: skip


def test_the_budget_funds_in_order_and_a_claim_cut_below_the_floor_leaves():
    runs = {
        "pre_ln_warmup": run_for("pre_ln_warmup", 0.1),
        "dropout": run_for("dropout", 0.08, -0.5),
        "smoothing_generalisation": run_for("smoothing_generalisation", 0.02),
    }
    plans = {"pre_ln_warmup": 20, "dropout": 80, "smoothing_generalisation": 60}
    available = pilot.BUDGET_CPU_S * (1 - pilot.RESERVE)
    assert available == pytest.approx(73_440)
    funded = pilot.fund(runs, plans, CPU_PER_JOB, LEVEL)
    # pre_ln_warmup: 20 x 800 = 16,000; dropout: 80 x 600 = 48,000; smoothing: its own
    # reference alone, the shared arm's 80 seeds already paid (60 x 100 = 6,000)
    assert [funded[c]["seeds"] for c in pilot.FAMILY] == [20, 80, 60]
    assert [funded[c]["cpu_seconds"] for c in pilot.FAMILY] == [16_000, 48_000, 6_000]
    assert not any(f.get("cut") for f in funded.values())
    # dropout needs more than is left: cut to what is left (95 seeds), where its power is
    # below 0.7; it leaves, and smoothing is paid from its share (the shared arm too)
    funded = pilot.fund(runs, {**plans, "dropout": 150}, CPU_PER_JOB, LEVEL)
    assert funded["dropout"]["left"] and funded["dropout"]["verdict"] == pilot.NOT_AT_BUDGET
    assert funded["dropout"]["seeds"] == (73_440 - 16_000) // 600
    assert funded["dropout"]["power"] < pilot.POWER_FLOOR
    assert funded["smoothing_generalisation"]["cpu_seconds"] == 60 * 400
    # unreachable: funded at what is left, its power there (point sd) above the floor; then
    # smoothing is left 440 CPU-seconds: 4 seeds, which cannot reach the level, and leaves
    loud = {**runs, "dropout": run_for("dropout", 0.004, -0.5)}
    funded = pilot.fund(loud, {**plans, "dropout": None}, CPU_PER_JOB, LEVEL)
    assert funded["dropout"]["planned"] == power.UNREACHABLE and funded["dropout"]["cut"]
    assert funded["dropout"]["seeds"] == 95 and not funded["dropout"].get("left")
    assert funded["dropout"]["power"] >= pilot.POWER_FLOOR
    assert funded["smoothing_generalisation"]["left"]
    assert (funded["smoothing_generalisation"]["seeds"], funded["smoothing_generalisation"][
        "power"]) == (4, 0.0)  # fmt: skip


def test_a_job_without_cpu_seconds_is_never_priced_by_a_default(tmp_path, v4):
    jobs = pilot.read_jobs(write_run(tmp_path / "run", cpu=False))
    found, _ = pilot.report(SETTINGS, jobs)
    with pytest.raises(ValueError, match="cpu_seconds"):
        pilot.choose(found, jobs, v4)
    assert pilot.main(["report", "--results", str(tmp_path / "run"),
                       "--out", str(tmp_path / "out")]) == 1  # fmt: skip
    assert "Not applied: arm " in (tmp_path / "out" / "report.md").read_text()


def test_the_family_counts_the_claims_that_stay(plain, v4, monkeypatch):
    """A budget that pays for pre_ln_warmup and little else: the generalisation claims,
    cut below the floor, leave; the family is one claim, planned at alpha itself."""
    jobs, found, _ = plain
    monkeypatch.setattr(pilot, "BUDGET_CPU_S", 7_500)
    picked = pilot.choose(found, jobs, v4)
    assert picked["family"] == ["pre_ln_warmup"] and picked["level"] == pilot.ALPHA
    for claim in ("dropout", "smoothing_generalisation"):
        assert picked["claims"][claim]["verdict"] == pilot.NOT_AT_BUDGET
    assert picked["budget"]["spent"] == picked["claims"]["pre_ln_warmup"]["cpu_seconds"]


def test_the_forecast_is_assurance_over_v4s_prior(v4, picked):
    """v4's estimates and standard errors from its archived records (section 8's numbers);
    the forecast over the widened prior, its most probable verdict predicted, the power at
    the planned effects beside it; no Brier score."""
    assert {c: {m: round(e, 4) for m, (e, _) in ends.items()} for c, ends in v4.items()} == {
        "pre_ln_warmup": {"log2_excess": 0.378},
        "dropout": {"heldout_fraction": 0.0277, "gap": -0.0006},
        "smoothing_generalisation": {"heldout_fraction": -0.0034}}  # fmt: skip
    se = v4["dropout"]["heldout_fraction"][1]
    assert se == pytest.approx(0.0436 / math.sqrt(48), abs=1e-4)
    belief = pilot.prior(v4, "dropout", ["heldout_fraction", "gap"])
    assert belief[0] == (v4["dropout"]["heldout_fraction"][0], pytest.approx(math.hypot(se, 0.02)))
    assert pilot.prior(v4, "pre_ln_warmup", ["log2_excess"])[0][1] == pytest.approx(
        math.hypot(v4["pre_ln_warmup"]["log2_excess"][1], 0.1))  # fmt: skip
    for row in picked["claims"].values():
        forecast = row["forecast"]
        assert set(forecast) == {SUPPORTED, REFUTED, INCONCLUSIVE}
        assert sum(forecast.values()) == pytest.approx(1.0)
        assert row["predicted"] == max(forecast, key=forecast.get)
        assert 0 <= row["power"] <= 1
    # smoothing's prior sits below its margin: the forecast is no power target
    smoothing = picked["claims"]["smoothing_generalisation"]
    assert smoothing["forecast"][SUPPORTED] < 0.5 < smoothing["power"]
    sources = (ROOT / "tools/claims_pilot.py").read_text() + (
        ROOT / "tools/claims_power.py").read_text()  # fmt: skip
    assert "brier" not in sources.lower()


def test_planned_effects_upper_sds_and_simulated_verdicts():
    assert power.planned_effect(0.01, "greater") == 0.02
    assert power.planned_effect(-0.01, "less") == -0.02
    assert power.planned_effect(0.5, "less") == 0.0  # v4's plan: non-inferiority at none
    assert pilot.planned_effect("dropout", "gap") == -0.02  # (+0.02, 0): the gap narrows
    with pytest.MonkeyPatch.context() as patch:  # the gap: the training gain less the held-out
        patch.setitem(pilot.PLANNED, "dropout", {"heldout_fraction": 0.03, "train_fraction": 0.01})
        assert pilot.planned_effect("dropout", "gap") == pytest.approx(-0.02)
        assert pilot.planned_effect("dropout", "heldout_fraction") == 0.03
    assert pilot.planned_effect("smoothing_generalisation", "heldout_fraction") == 0.02
    assert power.sd_upper(1.0, 8) == pytest.approx(math.sqrt(7 / 3.8223), rel=1e-4)
    assert power.sd_upper(1.0, 1000) == pytest.approx(1.0, abs=0.05)
    one = [{"margin": 0.01, "direction": "greater", "mean": 0.02, "sd": 0.03}]
    found = power.verdicts_by_simulation(60, one, 0.0, LEVEL)
    assert found[SUPPORTED] == pytest.approx(power.t_power(60, 0.01, 0.03, LEVEL), abs=0.04)
    assert sum(found.values()) == pytest.approx(1.0)
    wrong = [{**one[0], "mean": -0.01}]  # shown below the margin: refuted
    assert power.verdicts_by_simulation(60, wrong, 0.0, LEVEL)[REFUTED] > 0.9
    gap = {"margin": -0.01, "direction": "less", "mean": -0.02, "sd": 0.02}
    both = power.verdicts_by_simulation(60, [*one, gap], 0.0, LEVEL)
    alone = power.verdicts_by_simulation(60, [gap], 0.0, LEVEL)
    assert both[SUPPORTED] < min(found[SUPPORTED], alone[SUPPORTED])
    # a gain that comes with a narrower gap (their d_s correlated negatively, as v4's were)
    # is supported together more often than two independent ones, and the other way less
    together = power.verdicts_by_simulation(60, [*one, gap], -0.9, LEVEL)
    apart = power.verdicts_by_simulation(60, [*one, gap], 0.9, LEVEL)
    assert apart[SUPPORTED] < both[SUPPORTED] < together[SUPPORTED]
    with pytest.raises(ValueError, match="one or two"):
        power.verdicts_by_simulation(10, [*one, gap, gap], 0.0, LEVEL)
    # a prior: each draw its own true effect; a point prior is the plain simulation
    point = power.verdicts_by_simulation(60, one, 0.0, LEVEL, prior=[(0.02, 0.0)])
    assert point[SUPPORTED] == pytest.approx(found[SUPPORTED], abs=0.04)
    wide = power.verdicts_by_simulation(60, one, 0.0, LEVEL, prior=[(0.02, 0.05)])
    assert wide[REFUTED] > found[REFUTED] + 0.1


def test_joint_seeds_are_the_fewest_that_reach_the_power_at_every_correlation(monkeypatch):
    monkeypatch.setattr(power, "SIMULATIONS", 4000)
    ends = [{"margin": 0.01, "direction": "greater", "mean": 0.02, "sd": 0.03},
            {"margin": -0.01, "direction": "less", "mean": -0.02, "sd": 0.02}]  # fmt: skip
    n = power.joint_seeds_needed(ends, [0.0], LEVEL)
    assert n > power.EXACT_UP_TO + 1
    assert power.verdicts_by_simulation(n, ends, 0.0, LEVEL)[SUPPORTED] >= power.POWER
    assert power.verdicts_by_simulation(n - 1, ends, 0.0, LEVEL)[SUPPORTED] < power.POWER
    assert n >= power.seeds_needed(0.01, "greater", 0.03, LEVEL)
    assert power.joint_seeds_needed(ends, [-0.9, 0.0], LEVEL) >= n
    assert power.joint_seeds_needed(ends, [0.0], LEVEL, at_least=n + 5) == n + 5
