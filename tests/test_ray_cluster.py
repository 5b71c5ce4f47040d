"""Ray clusters, joined and lost: real clusters on 127.0.0.1 (``_ray_cluster.py`` in a process of its own), an
address where nothing listens, Ray's own environment pointing elsewhere, nodes of another CPU, a worker node
killed mid-run, and the head killed mid-run."""

from __future__ import annotations

import json
import os
import platform
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autosched.database import Database, DatabaseError
from autosched.measure.result import ErrorKind

HERE = Path(__file__).resolve().parent
SMALL = ["--workload", "matmul", "--param", "M=64", "--param", "N=64", "--param", "K=64", "--policy", "random",
         "--batch-size", "4", "--seed", "3"]
#: what a candidate's own faults look like: a node's death must never show as one of these
FAULTS = {ErrorKind.COMPILE_ERROR, ErrorKind.BUILD_TIMEOUT, ErrorKind.RUNTIME_CRASH, ErrorKind.RUN_TIMEOUT,
          ErrorKind.UNKNOWN}
x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="names x86-64 CPUs")


def autosched(*args, env=None, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autosched", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, AUTOSCHED_NUM_THREADS="1", **(env or {})))


def start_tune(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autosched", "tune", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, AUTOSCHED_NUM_THREADS="1"))


class LoopbackCluster:
    """A Ray cluster on 127.0.0.1 held by ``_ray_cluster.py``: its address and node ids; kills nodes on demand."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "_ray_cluster.py"), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self._lines.put(x.strip()) for x in self.proc.stdout], daemon=True).start()
        self.address = self._line(120)
        nodes = json.loads(self._line(10))
        self.head, self.workers = nodes["head"], nodes["workers"]

    def _line(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            line = ""
        if not line:
            self.close()
            pytest.fail("the loopback Ray cluster did not start or did not answer")
        return line

    def kill(self, which: str | int) -> None:
        """Kill worker ``which`` (an index) or ``"head"``: every process of that node, at once."""
        self.proc.stdin.write(f"kill {which}\n")
        self.proc.stdin.flush()
        assert self._line(60) == "killed"

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LoopbackCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def records(db: Path) -> list:
    with Database(db, create=False) as d:
        return d.records()


def wait_for_records(db: Path, n: int, proc: subprocess.Popen, timeout: float = 150) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"the tune ended before {n} records: {proc.stderr.read()[-2000:]}")
        try:
            if db.exists() and len(records(db)) >= n:
                return
        except DatabaseError:  # the tuner created the file and is creating its tables right now
            pass
        time.sleep(0.2)
    pytest.fail(f"fewer than {n} records after {timeout} s")


@pytest.fixture(scope="module")
def labelled_cluster():
    """A head and two worker nodes, one CPU each, on 127.0.0.1; worker 1 says it is an ``x86-64`` (a CPU the
    others are not), as ``ray start --resources '{"autosched-cpu:x86-64": 1}'`` would."""
    with LoopbackCluster("--workers", "2", "--label", "1=x86-64") as c:
        yield c


def test_a_tune_joins_a_loopback_cluster_and_builds_on_both_nodes(labelled_cluster, tmp_path):
    """Ray would replace 127.0.0.1 by the machine's network address (where nothing listens) and hang: the
    address is kept, the run finishes, and its records say which machine timed them."""
    db = tmp_path / "c.db"
    t0 = time.monotonic()
    r = autosched("tune", *SMALL, "--trials", 8, "--db", db, "--ray-address", labelled_cluster.address,
                  timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"workers: Ray at {labelled_cluster.address}" in r.stderr
    assert time.monotonic() - t0 < 120
    recs = records(db)
    assert len(recs) == 8 and sum(x.ok for x in recs) >= 6
    timed = [x for x in recs if x.ok]
    assert all(x.node_id and x.host for x in timed)  # which machine measured it
    # the host's CPU is not the one worker 1 names: it never times this target's candidates
    assert labelled_cluster.workers[1] not in {x.node_id for x in timed}


@x86_only
def test_timings_go_only_to_the_nodes_of_the_targets_cpu(labelled_cluster, tmp_path):
    """A target for the CPU that one node names is timed there alone; a CPU no node has is one clear line."""
    db = tmp_path / "p.db"
    r = autosched("tune", *SMALL, "--trials", 4, "--db", db, "--target", "llvm -mcpu=x86-64",
                  "--ray-address", labelled_cluster.address, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    timed = [x for x in records(db) if x.ok]
    assert timed and {x.node_id for x in timed} == {labelled_cluster.workers[1]}

    r = autosched("tune", *SMALL, "--trials", 4, "--db", tmp_path / "n.db", "--target", "llvm -mcpu=x86-64-v2",
                  "--ray-address", labelled_cluster.address, timeout=180)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1, r.stderr[-2000:]
    assert last.startswith("autosched tune: error: no node of the Ray cluster has the target's CPU x86-64-v2 "
                           "(nodes: "), last
    assert "x86-64)" in last or "x86-64," in last  # every node's CPU is named
    assert "autosched-cpu:x86-64-v2" in last  # and how to name one


@pytest.mark.slow
def test_a_worker_node_killed_mid_run_costs_no_candidate(tmp_path):
    """Builders and runners on every node; one worker node dies after the first batch: the run finishes, every
    trial is recorded, and no candidate carries the node's death as its own fault."""
    db = tmp_path / "k.db"
    with LoopbackCluster("--workers", "2") as c:
        tune = start_tune(*SMALL, "--trials", 20, "--db", db, "--ray-address", c.address)
        try:
            wait_for_records(db, 4, tune)
            c.kill(0)
            at_kill = len(records(db))
            _, err = tune.communicate(timeout=240)
        finally:
            tune.kill()
    assert tune.returncode == 0, err[-3000:]
    assert f"the Ray node {c.workers[0][:8]} is gone" in err  # it was in use after its death, and noticed
    recs = records(db)
    assert len(recs) == 20
    assert not [(x.error_kind, x.error_msg) for x in recs if x.error_kind in FAULTS]
    # once it was gone (and the batch in flight then committed), timed elsewhere
    assert c.workers[0] not in {x.node_id for x in recs[at_kill + 4:]}


@pytest.mark.slow
def test_the_head_lost_mid_run_stops_in_one_line_and_the_same_command_resumes(tmp_path):
    db = tmp_path / "h.db"
    # enough trials that the one worker node cannot finish them in the 10 s the lost head is given
    args = [*SMALL, "--trials", 40, "--db", db]
    with LoopbackCluster("--workers", "1") as c:
        tune = start_tune(*args, "--ray-address", c.address)
        try:
            wait_for_records(db, 4, tune)
            t0 = time.monotonic()
            c.kill("head")
            _, err = tune.communicate(timeout=120)
            stopped = time.monotonic() - t0
        finally:
            tune.kill()
    assert tune.returncode == 1 and stopped < 60, (stopped, err[-3000:])
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"autosched tune: error: lost the Ray cluster at {c.address}: its head has not "
                           "answered"), err[-3000:]
    assert "run the same command again" in last
    before = records(db)
    # the worker node goes on for the 10 s the head is given, but not to the end
    assert 4 <= len(before) < 40 and all(x.error_kind not in FAULTS for x in before)

    with LoopbackCluster("--workers", "1") as fresh:
        r = autosched("tune", *args, "--ray-address", fresh.address, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resuming matmul(M=64, N=64, K=64): " in r.stderr, r.stderr[-3000:]
    after = records(db)
    assert len(after) == len(before) + 40
    assert [(x.trace_json, x.costs) for x in after[:len(before)]] == \
        [(x.trace_json, x.costs) for x in before]  # what was committed is untouched
    assert len({x.trace_json for x in after}) == len(after)  # resumed: nothing measured twice


@x86_only
def test_when_the_last_node_of_the_targets_cpu_dies_the_run_stops_in_one_line(tmp_path):
    """Builders are left on the head, but no node of the target's CPU: that is an error, not a wait."""
    db = tmp_path / "r.db"
    with LoopbackCluster("--workers", "1", "--label", "0=x86-64") as c:
        tune = start_tune(*SMALL, "--trials", 12, "--db", db, "--target", "llvm -mcpu=x86-64",
                          "--ray-address", c.address)
        try:
            wait_for_records(db, 4, tune)
            c.kill(0)
            _, err = tune.communicate(timeout=120)
        finally:
            tune.kill()
    assert tune.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == f"autosched tune: error: no Ray runners for x86-64 are left: the nodes that ran them are gone " \
                   f"(nodes {c.workers[0][:8]})", err[-3000:]
    assert 4 <= len(records(db)) <= 12  # what was committed stays

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
