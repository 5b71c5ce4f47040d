"""Real processes on one database: a writer killed with SIGKILL mid-commit, and two concurrent writers.

Each writer is a fresh Python interpreter (subprocess) committing through ``autosched.database``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from _database_helpers import make_url
from autosched.database import Database

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[1]

# Commits batches forever: batch b holds the traces Split(2, 0, b * 1000 + j + 1) for j < size, and "b" is
# printed only after commit_many returned. Odd batches are committed record by record, so a kill lands in
# both kinds of transaction.
WRITER_FOREVER = textwrap.dedent("""
    import sys
    from autosched import Task
    from autosched.database import Database
    from autosched.measure import MeasureResult
    from autosched.te.trace import Split, Trace

    url, size = sys.argv[1], int(sys.argv[2])
    task = Task("matmul", dict(M=16, N=16, K=16), target="llvm -mcpu=skylake")
    db = Database(url)
    print("ready", flush=True)
    b = 0
    while True:
        items = [(task, Trace([Split(2, 0, b * 1000 + j + 1, None)]), MeasureResult(costs=[1e-3 + j * 1e-6]))
                 for j in range(size)]
        if b % 2 == 0:
            db.commit_many(items)
        else:
            for item in items:
                db.commit(*item)
        print(b, flush=True)
        b += 1
""")

# Waits for the start file, then opens the database (creating it if it is new) and commits n records.
WRITER_N = textwrap.dedent("""
    import os, sys, time
    from autosched import Task
    from autosched.database import Database
    from autosched.measure import MeasureResult
    from autosched.te.trace import Split, Trace

    url, wid, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    task = Task("matmul", dict(M=16, N=16, K=16), target="llvm -mcpu=skylake")
    task.workload_key
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.002)
    db = Database(url)
    for i in range(n):
        trace = Trace([Split(2, 0, wid * 100000 + i + 1, None)])
        db.commit(task, trace, MeasureResult(costs=[1e-3 + i * 1e-7]))
    db.close()
    print("done", flush=True)
""")


def _python(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _factors(db: Database) -> list[int]:
    return [rec.trace[0].factor for rec in db.iter_records()]


def test_sigkill_mid_commit_loses_nothing_committed(tmp_path):
    path = tmp_path / "killed.db"
    size = 300
    for round_ in range(2):  # the second writer finds the file as the first one left it
        proc = _python(WRITER_FOREVER, str(path), str(size))
        try:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
            acked = []
            deadline = time.monotonic() + 30
            while len(acked) < 4 + round_ and time.monotonic() < deadline:
                line = proc.stdout.readline()
                assert line, f"the writer died: {proc.stderr.read()}"
                acked.append(int(line))
            time.sleep(0.013 * (round_ + 1))  # somewhere inside the next batch's commits
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        acked += [int(x) for x in proc.stdout.read().split()]  # acknowledged just before the kill
        proc.stdout.close()
        proc.stderr.close()

        con = sqlite3.connect(path)
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        con.close()
        with Database(path) as db:
            per_batch: dict[int, int] = {}
            for f in _factors(db):
                per_batch[(f - 1) // 1000] = per_batch.get((f - 1) // 1000, 0) + 1
        for b in acked:
            assert per_batch.get(b) == size, f"batch {b} was committed but has {per_batch.get(b)} records"
        in_flight = max(acked) + 1
        if in_flight % 2 == 0:  # one transaction: all or nothing
            assert per_batch.get(in_flight, 0) in (0, size)
        else:  # record by record: a prefix
            assert 0 <= per_batch.get(in_flight, 0) <= size
        assert set(per_batch) <= set(range(in_flight + 1))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_processes_commit_concurrently(tmp_path, backend):
    url, cleanup = make_url(backend, tmp_path)  # a new, empty database: both writers race to create it
    go = tmp_path / "go"
    n = 500
    procs = [_python(WRITER_N, url, str(w), str(n), str(go)) for w in (1, 2)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        go.touch()
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0 and out.split() == ["done"], err
        with Database(url) as db:
            assert db.count() == 2 * n
            assert sorted(_factors(db)) == sorted(w * 100000 + i + 1 for w in (1, 2) for i in range(n))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        cleanup()
