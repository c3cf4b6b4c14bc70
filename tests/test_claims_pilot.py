"""The claims' pilot (workflow/claims/config/claims_pilot.yaml, tools/claims_pilot.py): fresh
seeds, a job for every candidate setup's arms, and a report that reads each endpoint's spread
as the decision code does and picks setups by the design's rule, never by a pilot's mean;
the plan's arithmetic (tools/claims_power.py) for a pilot's spreads and joint endpoints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from tcrclaims.kinds import INCONCLUSIVE, REFUTED, SUPPORTED

from conftest import ROOT
from tools import claims_pilot as pilot
from tools import claims_power as power

SETTINGS = pilot.pilot_settings()
LEVEL = pilot.ALPHA / pilot.EXPERIMENTS  # the plan's worst Holm step


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
    # three arms a generalisation setup (both regularisers, one without each); Pre-LN deep
    # with and without warm-up, the excess on 5,000 strings at every 20th step from 1,000
    setups = {c.test["arm"] for c in SETTINGS.claims if c.test["metric"] == "heldout_fraction"}
    assert len(setups) == 5 and "set1000_steps1500" not in setups  # v4's own: no room
    for arm in setups:
        assert {f"{arm}_no_dropout", f"{arm}_no_smoothing"} <= set(SETTINGS.tested_arms())
        assert SETTINGS.arms[f"{arm}_no_dropout"].dropout == 0
        assert SETTINGS.arms[f"{arm}_no_smoothing"].label_smoothing == 0
    assert SETTINGS.excess_strings_of("deep_pre") == 5000
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

ROOMY = {"set500_steps3000": 0.12, "set250_steps3000": 0.15}  # the others leave 0.02
NOISY = {"set250_steps3000": 4.0}  # its spread, times the others'


def arm_records(rng, arm: str, seeds) -> dict[int, dict]:
    setup = arm.removesuffix("_no_dropout").removesuffix("_no_smoothing")
    without = arm != setup
    n_train = min(SETTINGS.arms[arm].train_set, 1000)
    gap = ROOMY.get(setup, 0.02) * (1.0 if without else 0.5)
    spread = 15 * NOISY.get(setup, 1.0)
    rows = {}
    for s in seeds:
        held = int(np.clip(700 + (0 if without else 20) + rng.normal(0, spread), 0, 1000))
        train = int(np.clip(round((held / 1000 + gap) * n_train), 0, n_train))
        rows[s] = {
            "heldout_exact": held,
            "heldout_total": 1000,
            "heldout_fraction": held / 1000,
            "train_exact": train,
            "train_total": n_train,
            "train_fraction": train / n_train,
            "gap": train / n_train - held / 1000,
        }
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


def write_run(folder: Path, shift: dict[str, int] | None = None) -> Path:
    """results/<run> of a pilot run: every job's metrics.json; `shift` adds strings to one
    arm's held-out exact in every seed (a different mean effect, the same spread)."""
    rng = np.random.default_rng(0)
    for arm in SETTINGS.tested_arms():
        seeds = SETTINGS.seeds_of(arm)
        made = excess_records(rng, arm, seeds) if arm.startswith("deep") else arm_records(
            rng, arm, seeds)  # fmt: skip
        for s, row in made.items():
            if shift and arm in shift:
                row = {**row, "heldout_exact": row["heldout_exact"] + shift[arm]}
            job = folder / "claims" / "arms" / arm / f"seed{s}"
            job.mkdir(parents=True, exist_ok=True)
            (job / "metrics.json").write_text(json.dumps(row))
    return folder


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(power, "SIMULATIONS", 1000)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A synthetic pilot run's jobs and report (fewer simulations: the spreads are exact)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(power, "SIMULATIONS", 1000)
        jobs = pilot.read_jobs(write_run(tmp_path_factory.mktemp("pilot") / "claims_pilot"))
        return jobs, pilot.report(SETTINGS, jobs, LEVEL)


def test_the_report_reads_each_endpoint_as_the_decision_code_and_picks_by_the_rule(plain):
    jobs, rows = plain
    by_id = {r["id"]: r for r in rows if "strings" not in r}
    row = by_id["dropout_set500_steps3000"]
    held = np.array([jobs["metrics"]["set500_steps3000"][s]["heldout_exact"]
                     - jobs["metrics"]["set500_steps3000_no_dropout"][s]["heldout_exact"]
                     for s in SETTINGS.seeds]) / 1000  # fmt: skip
    gain, gap = row["endpoints"]
    assert (gain["metric"], gap["metric"]) == ("heldout_fraction", "gap")
    assert gain["sd"] == pytest.approx(np.std(held, ddof=1))
    assert gain["planned_sd"] == pytest.approx(power.sd_upper(gain["sd"], 8))
    assert (gain["planned_effect"], gap["planned_effect"]) == (0.02, -0.02)
    assert row["room"]["median_gap"] == pytest.approx(0.12, abs=0.01)
    assert by_id["dropout_set250_steps1500"]["room"]["median_gap"] < pilot.ROOM
    # both endpoints together need about as many seeds as the harder one alone, or more
    # (1,000 simulations: within their error)
    assert row["plan_seeds"] >= 0.95 * max(gain["plan_seeds"], gap["plan_seeds"])
    assert set(row["forecast"]) == {SUPPORTED, REFUTED, INCONCLUSIVE}
    assert row["forecast"][SUPPORTED] >= power.POWER - 0.05
    # the excess: each count of strings, each window; the rule takes at least 2,000 strings,
    # the fewest seeds, then the fewer strings and snapshots
    excess = [r for r in rows if "strings" in r]
    assert {(r["strings"], len(r["snapshots"])) for r in excess} == {
        (k, n) for k in (200, 500, 1000, 2000, 5000) for n in (11, 5)}  # fmt: skip
    sd = {(r["strings"], len(r["snapshots"])): r["sd"] for r in excess}
    assert sd[(5000, 11)] < sd[(200, 11)]  # more strings, less spread
    assert all(r["step_to_step_sd"] > 0 for r in excess)
    picked = pilot.choose(rows, jobs)
    assert picked["generalisation"]["setup"] == "set500_steps3000"  # roomy, and the quieter
    assert picked["excess"]["strings"] >= pilot.MIN_STRINGS
    best = min(r["plan_seeds"] for r in excess if r["strings"] >= pilot.MIN_STRINGS)
    assert picked["excess"]["plan_seeds"] == best
    text = pilot.markdown(rows, picked, LEVEL)
    assert "`dropout_set500_steps3000`" in text and "Picked by the rule" in text


def test_the_rule_reads_no_mean_effect(plain, tmp_path, quick):
    """A pilot whose arms gain 100 strings more in the noisy roomy setup picks as before."""
    jobs, rows = plain
    shifted = pilot.read_jobs(write_run(tmp_path / "shifted", {"set250_steps3000": 100}))
    again = pilot.report(SETTINGS, shifted, LEVEL)
    assert pilot.choose(rows, jobs) == pilot.choose(again, shifted)


def test_without_room_the_rule_says_so(plain, monkeypatch):
    monkeypatch.setattr(pilot, "ROOM", 0.5)
    picked = pilot.choose(plain[1], plain[0])["generalisation"]
    assert picked == {"setup": "set250_steps3000", "no_room": True}  # the most room


def test_the_command_reports_a_run_and_refuses_an_empty_one(tmp_path, quick, capsys):
    run = write_run(tmp_path / "claims_pilot")
    assert pilot.main(["report", "--results", str(run), "--json", str(tmp_path / "p.json")]) == 0
    assert "Picked by the rule" in capsys.readouterr().out
    assert json.loads((tmp_path / "p.json").read_text())["level"] == pytest.approx(LEVEL)
    (tmp_path / "empty").mkdir()
    assert pilot.main(["report", "--results", str(tmp_path / "empty")]) == 1


# The plan's arithmetic --------------------------------------------------------------------------


def test_planned_effects_upper_sds_and_simulated_verdicts():
    assert power.planned_effect(0.01, "greater") == 0.02
    assert power.planned_effect(-0.01, "less") == -0.02
    assert power.planned_effect(0.5, "less") == 0.0  # non-inferiority: planned at none
    assert power.sd_upper(1.0, 8) == pytest.approx(math.sqrt(7 / 3.8223), rel=1e-4)
    assert power.sd_upper(1.0, 1000) == pytest.approx(1.0, abs=0.05)
    one = [{"margin": 0.01, "direction": "greater", "mean": 0.02, "sd": 0.03}]
    found = power.verdicts_by_simulation(60, one, 0.0, LEVEL)
    assert found[SUPPORTED] == pytest.approx(power.t_power(60, 0.01, 0.03, LEVEL), abs=0.015)
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


def test_joint_seeds_are_the_fewest_that_reach_the_power_at_every_correlation(monkeypatch):
    monkeypatch.setattr(power, "SIMULATIONS", 4000)
    ends = [{"margin": 0.01, "direction": "greater", "mean": 0.02, "sd": 0.02},
            {"margin": -0.01, "direction": "less", "mean": -0.02, "sd": 0.015}]  # fmt: skip
    n = power.joint_seeds_needed(ends, [0.0], LEVEL)
    assert power.verdicts_by_simulation(n, ends, 0.0, LEVEL)[SUPPORTED] >= power.POWER
    assert power.verdicts_by_simulation(n - 1, ends, 0.0, LEVEL)[SUPPORTED] < power.POWER
    assert n >= power.seeds_needed(0.01, "greater", 0.02, LEVEL)
    assert power.joint_seeds_needed(ends, [-0.9, 0.0], LEVEL) >= n
    loud = [{**e, "sd": 10.0} for e in ends]
    assert power.joint_seeds_needed(loud, [0.0], LEVEL) == power.MAX_SEEDS
