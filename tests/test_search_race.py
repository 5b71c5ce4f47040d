"""``autosched race``: two policies, one seed, a few trials, from the command line as a researcher runs it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

import autosched
from autosched.cost_model import XGBCostModel
from autosched.search.race import RaceRun, Reference, race, seconds_to_quality, table


def test_race_two_policies_writes_its_table_and_png(tmp_path):
    png = tmp_path / "race.png"
    cmd = [sys.executable, "-m", "autosched", "race", "--policies", "random,annealing", "--workload", "matmul",
           "--param", "M=64", "--param", "N=64", "--param", "K=64", "--trials", "8", "--seeds", "0",
           "--batch-size", "4", "--backend", "local", "--plot", str(png)]
    env = dict(os.environ, AUTOSCHED_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("median best over seeds (share of the reference)")
    rows = {line.split()[0]: line.split() for line in lines[2:4]}
    assert set(rows) == {"random", "annealing"}
    for row in rows.values():
        assert 0 < float(row[3]) and float(row[1]) <= float(row[2]) <= float(row[3])  # best so far only grows
    assert "reference: " in lines[-1] and "timed in this run" in lines[-1]
    assert lines[4].startswith("time to quality: seconds from the shell (start-up")
    ttq = {line.split()[0]: line for line in lines[6:8]}
    assert set(ttq) == {"random", "annealing"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # for scripts: the same run as JSON (one policy, 4 trials: the form is what is checked here), its start-up
    # given rather than measured again
    json_cmd = [*cmd[:cmd.index("--policies") + 1], "random", *cmd[cmd.index("--workload"):]]
    json_cmd[json_cmd.index("--trials") + 1] = "4"
    r = subprocess.run([*json_cmd, "--json", "--startup", "2.5"], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    assert [(x["policy"], x["seed"]) for x in data["runs"]] == [("random", 0)]
    assert all(x["curve"][-1][0] == 4 and not x["error"] for x in data["runs"])
    assert all(x["startup"] == 2.5 for x in data["runs"])


def test_an_unknown_policy_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "autosched", "race", "--policies", "random,nosuch", "--workload",
                        "matmul"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "autosched race: error: unknown search policy 'nosuch'")


def test_the_table_reads_medians_and_the_spread_over_seeds():
    runs = [RaceRun("p", s, [(4, 1.0, 10.0 * (s + 1)), (8, 2.0, 20.0 * (s + 1))], seconds=2.0) for s in range(3)]
    text = table(runs, 8, Reference("lib", 40.0))
    row = text.splitlines()[2].split()
    # at 2 trials no batch had ended (0); at 4: 10, 20, 30 -> 20; at 8: 20, 40, 60 -> 40; of a reference of 40
    assert row == ["p", "0.00", "0.50", "1.00", "[0.50,", "1.50]", "2.0", "4.00"]
    assert text.splitlines()[-1].startswith("reference: lib, 40.0 GFLOPS")


def test_time_to_quality_counts_from_the_shell_and_says_never():
    # seeds reach 0.9 x 40 = 36 GFLOPS at 2.0 s, 1.0 s and never; 1.0x (40) at 2.0 s (seed 1) only
    curves = [[(4, 1.0, 20.0), (8, 2.0, 36.0)], [(4, 1.0, 37.0), (8, 2.0, 40.0)], [(4, 1.0, 10.0), (8, 2.0, 30.0)]]
    runs = [RaceRun("p", s, c, seconds=2.0, startup=1.5) for s, c in enumerate(curves)]
    assert [r.seconds_to(36.0) for r in runs] == [3.5, 2.5, None]
    assert seconds_to_quality(runs, 36.0) == (3.5, 2.5, math.inf)
    assert seconds_to_quality(runs, 40.0) == (math.inf, 3.5, math.inf)
    lines = table(runs, 8, Reference("lib", 40.0)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("time to quality"))
    assert "start-up 1.5 s included" in lines[at]
    assert lines[at + 1].split() == ["policy", "to", "0.9x", "to", "1.0x"]
    assert lines[at + 2].split() == ["p", "4", "[2,", "never]", "never", "[4,", "never]"]


def test_best_over_time_finds_the_first_batch_at_a_share_of_a_reference():
    from types import SimpleNamespace

    from autosched.search.callbacks import BestOverTime

    hist = BestOverTime()
    task = "t"
    for trials, best in ((16, 2.0), (32, 1.05), (48, 0.95)):
        hist(SimpleNamespace(task=task, trials_done=trials, best_cost=best), [], [])
    # a reference kernel of 1.0 s: 0.9x its speed needs <= 1.11 s (trial 32), 1.0x needs <= 1.0 s (trial 48)
    assert hist.time_to(task, 1.0, 0.9)[1] == 32
    assert hist.time_to(task, 1.0, 1.0)[1] == 48
    assert hist.time_to(task, 0.5, 1.0) is None and hist.time_to("other", 1.0) is None
    assert hist.points[task][0][0] <= hist.points[task][-1][0]  # wall-clock times, in order


def test_race_entrants_can_be_cost_models_and_start_from_the_search_alone(tmp_path):
    task = autosched.Task("matmul", {"M": 64, "N": 64, "K": 64})
    made = []

    def mine(seed: int) -> XGBCostModel:
        made.append(seed)
        return XGBCostModel(seed=seed)

    runs = race(task, ["evolutionary"], 8, [3], backend="local", batch_size=4, startup=0.0, workdir=str(tmp_path),
                cost_models={"cold": "xgb", "mine": mine}, measure_default=False)
    assert [(r.policy, r.seed) for r in runs] == [("evolutionary (cold)", 3), ("evolutionary (mine)", 3)]
    assert made == [3] and all(r.curve[-1][0] == 8 and not r.error for r in runs)
    with pytest.raises(TypeError, match="function of the seed"):  # one instance would learn across the runs
        race(task, ["evolutionary"], 8, [0], cost_models={"x": XGBCostModel()}, startup=0.0)


def test_an_unknown_cost_model_in_a_race_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "autosched", "race", "--policies", "evolutionary", "--cost-models",
                        "xgb,nosuch", "--workload", "matmul"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "autosched race: error: unknown cost model 'nosuch'; use xgb, pretrained, transfer, random")
