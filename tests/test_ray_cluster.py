"""Joining Ray clusters, and not joining them: a real two-node cluster on 127.0.0.1 (``_ray_cluster.py`` in a
process of its own), an address where nothing listens, and Ray's own environment pointing elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autosched.database import Database

HERE = Path(__file__).resolve().parent
SMALL = ["--workload", "matmul", "--param", "M=64", "--param", "N=64", "--param", "K=64", "--policy", "random",
         "--batch-size", "4", "--seed", "3"]


def autosched(*args, env=None, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autosched", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, AUTOSCHED_NUM_THREADS="1", **(env or {})))


@pytest.fixture(scope="module")
def loopback_cluster():
    """A head and a worker node, one CPU each, on 127.0.0.1; its address; torn down afterwards."""
    proc = subprocess.Popen([sys.executable, str(HERE / "_ray_cluster.py"), "2"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = proc.stdout.readline().strip()
        if not address:
            pytest.fail("the two-node Ray cluster did not start")
        yield address
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_tune_joins_a_loopback_cluster_and_builds_on_both_nodes(loopback_cluster, tmp_path):
    """Ray would replace 127.0.0.1 by the machine's network address (where nothing listens) and hang: the
    address is kept, the run finishes, and its records say which machine timed them."""
    db = tmp_path / "c.db"
    t0 = time.monotonic()
    r = autosched("tune", *SMALL, "--trials", 8, "--db", db, "--ray-address", loopback_cluster, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"workers: Ray at {loopback_cluster}" in r.stderr
    assert time.monotonic() - t0 < 120
    with Database(db, create=False) as d:
        recs = d.records()
    assert len(recs) == 8 and sum(x.result.ok for x in recs) >= 6
    timed = [x for x in recs if x.result.ok]
    assert all(x.node_id and x.host for x in timed)  # which machine measured it


def test_an_unreachable_cluster_in_the_environment_is_one_line_and_exit_2(tmp_path):
    t0 = time.monotonic()
    r = autosched("tune", *SMALL, "--trials", 4, "--db", tmp_path / "u.db",
                  env={"AUTOSCHED_RAY_ADDRESS": "127.0.0.1:1"}, timeout=60)
    assert r.returncode == 2 and time.monotonic() - t0 < 30
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("autosched tune: error: cannot reach the Ray cluster at 127.0.0.1:1"), r.stderr


def test_the_local_default_starts_its_own_ray_whatever_rays_environment_says(tmp_path):
    """RAY_ADDRESS (Ray's variable, here pointing where nothing listens) is not a request to join: only
    --ray-address or AUTOSCHED_RAY_ADDRESS is. The run starts a private Ray and says why it ignored it."""
    db = tmp_path / "l.db"
    r = autosched("tune", *SMALL, "--trials", 4, "--db", db, env={"RAY_ADDRESS": "127.0.0.1:1"}, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "workers: ray (this machine)" in r.stderr
    assert "RAY_ADDRESS=127.0.0.1:1 is set, but autosched joins a cluster only when asked" in r.stderr
    with Database(db, create=False) as d:
        assert len(d.records()) == 4
