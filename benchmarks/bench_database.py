"""Benchmark of the tuning database on SQLite: ``best()`` among 1,000,000 records, and the size per record.

    python benchmarks/bench_database.py                      # 1,000,000 records, 200 workloads
    python benchmarks/bench_database.py --records 100000 --keep /tmp/bench.db

It fills an SQLite file with records of real workload keys (matmul, batch_matmul, dense, conv2d and
depthwise conv2d of many shapes), two target CPUs (90% of the records on the first), realistic traces
(10-16 steps, 200-400 bytes) and 5% failed candidates, in bulk (``commit_records`` batches of 20,000).
Then it times, each as the median of many calls on random tasks:

- ``best(task, k=1)`` and ``best(task, k=10)`` with the database already open (the tuning loop, a model
  build), and a lookup on a freshly opened ``Database`` (a CLI call);
- ``commit()`` of one new record into the full database, and ``has_measured``;
- ``measured_traces(task)`` (what a resumed run reads once per task).

and prints the file size per record (after a WAL checkpoint). Nothing here runs in the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import autosched
from autosched.database import Database, TuningRecord, producer_info
from autosched.measure import ErrorKind, MeasureResult

TARGETS = ("llvm -mcpu=sapphirerapids", "llvm -mcpu=znver4")


def make_tasks(n: int, rng: random.Random) -> list:
    """``n`` distinct tasks of the built-in workloads with shapes like those of real models."""
    sizes = [16, 32, 49, 64, 96, 128, 196, 256, 384, 512, 768, 1024, 2048]
    chans = [16, 32, 64, 96, 128, 256, 512]
    seen, tasks = set(), []
    while len(tasks) < n:
        kind = rng.choice(["matmul", "batch_matmul", "dense", "conv2d", "depthwise_conv2d"])
        if kind == "matmul":
            args = dict(M=rng.choice(sizes), N=rng.choice(sizes), K=rng.choice(sizes))
        elif kind == "batch_matmul":
            args = dict(B=rng.choice([4, 8, 12, 16]), M=rng.choice(sizes[:8]), N=rng.choice(sizes[:8]),
                        K=rng.choice([32, 64, 128]))
        elif kind == "dense":
            args = dict(N=rng.choice([1, 8, 32]), CI=rng.choice(sizes), CO=rng.choice(sizes + [1000]))
        elif kind == "conv2d":
            hw = rng.choice([7, 14, 28, 56])
            args = dict(H=hw, W=hw, CI=rng.choice(chans), CO=rng.choice(chans), KH=3, KW=3)
        else:
            hw = rng.choice([7, 14, 28, 56, 112])
            args = dict(C=rng.choice(chans), H=hw, W=hw)
        ident = (kind, tuple(sorted(args.items())))
        if ident in seen:
            continue
        seen.add(ident)
        tasks.append(autosched.Task(kind, args, target=TARGETS[0]))
    return tasks


_TRACE = ('[["cache_write",2,"local"],["split",3,0,{},null],["split",3,2,{},null],["split",3,1,{},null],'
          '["split",3,3,{},null],["reorder",3,[0,2,1,3,4,5]],["fuse",3,[0,1]],["annotate",3,0,"parallel"],'
          '["annotate",3,4,"vectorize"],["compute_at",2,3,{}],["split",2,2,{},null],["reorder",2,[2,0,1,3]],'
          '["annotate",2,1,"unroll"],["annotate",2,3,"vectorize"]{}]')
_FACTORS = [1, 2, 4, 8, 16, 32, 64]


def make_trace(rng: random.Random) -> str:
    """A realistic trace (tiling, reorder, fuse, annotations, compute_at) as canonical JSON text, 14 or 16
    steps (what Trace.dumps() gives; formatted directly so that filling is bounded by the database)."""
    f = [_FACTORS[int(rng.random() * 7)] for _ in range(6)]
    tail = f',["split",2,0,{f[5]},null],["annotate",2,0,"unroll"]' if rng.random() < 0.5 else ""
    return _TRACE.format(f[0], f[1], f[2], f[3], 1 + int(rng.random() * 3), f[4], tail)


def fill(db: Database, tasks: list, n: int, rng: random.Random, batch: int = 20_000) -> float:
    prod = producer_info()
    per_task = [set() for _ in tasks]
    t0 = time.perf_counter()
    done = 0
    ts = 1_790_000_000.0
    while done < n:
        recs = []
        for _ in range(min(batch, n - done)):
            i = rng.randrange(len(tasks))
            task = tasks[i]
            target = TARGETS[0] if rng.random() < 0.9 else TARGETS[1]
            while True:
                text = make_trace(rng)
                if (target, text) not in per_task[i]:
                    per_task[i].add((target, text))
                    break
            ts += 0.37
            if rng.random() < 0.05:
                kind = rng.choice([ErrorKind.COMPILE_ERROR, ErrorKind.RUN_TIMEOUT])
                res = dict(costs=[], error_kind=kind,
                           error_msg="llvm: cannot select vector shuffle for <16 x float> in stage C.local")
            else:
                c = 10 ** rng.uniform(-5, -2)
                res = dict(costs=[c * (1 + 0.05 * rng.random()) for _ in range(3)], error_kind=None,
                           error_msg="")
            recs.append(TuningRecord(
                workload_key=task.workload_key, workload_name=task.name, workload_args=task.args,
                target=target, trace_json=text, build_seconds=rng.uniform(0.01, 0.1),
                run_seconds=rng.uniform(0.05, 0.5), timestamp=ts, autosched_version=prod["autosched"],
                llvm_version=prod["llvm"], host_cpu=target.split("=")[1], **res))
        db.commit_records(recs, on_conflict="skip")
        done += len(recs)
        rate = done / (time.perf_counter() - t0)
        print(f"\r  filled {done:>9,} records ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - t0


def timed(fn, reps: int) -> float:
    """Median seconds of ``reps`` calls of fn(i)."""
    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--workloads", type=int, default=200)
    ap.add_argument("--lookups", type=int, default=2000, help="best() calls timed (median reported)")
    ap.add_argument("--keep", default=None, help="write the database here and keep it (default: a temp dir)")
    ap.add_argument("--reuse", action="store_true", help="with --keep: time an existing file, do not fill")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = None
    if a.keep:
        path = Path(a.keep)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="autosched-bench-")
        path = Path(tmp.name) / "bench.db"

    t0 = time.perf_counter()
    tasks = make_tasks(a.workloads, rng)
    print(f"{len(tasks)} workloads, keys in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    fill_s = None
    if not (a.reuse and path.exists()):
        if path.exists():
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        with Database(path) as db:
            fill_s = fill(db, tasks, a.records, rng)

    db = Database(path, create=False)
    n = db.count()
    with db.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    size = sum(os.path.getsize(str(path) + s) for s in ("", "-wal") if os.path.exists(str(path) + s))

    picks = [(rng.choice(tasks), rng.choice(TARGETS)) for _ in range(a.lookups)]
    for t, tg in picks[:200]:  # warm the page cache and the workload-id cache, as a tuning loop would have
        db.best(t, tg)
    best1 = timed(lambda i: db.best(picks[i][0], picks[i][1], k=1), a.lookups)
    best10 = timed(lambda i: db.best(picks[i][0], picks[i][1], k=10), a.lookups)
    found = sum(1 for t, tg in picks[:200] if db.best(t, tg))

    def cold(i: int) -> None:
        with Database(path, create=False) as d:
            d.best(picks[i][0], picks[i][1])

    cold_s = timed(cold, 50)
    t = tasks[0]
    commit_s = timed(lambda i: db.commit(t, make_trace(random.Random(10**9 + i)),
                                         MeasureResult(costs=[1e-3])), 200)
    has_s = timed(lambda i: db.has_measured(t, make_trace(random.Random(i))), 500)
    mt_s = timed(lambda i: db.measured_traces(tasks[i % len(tasks)]), 50)
    per_task = db.count(tasks[0])
    db.close()

    print(f"SQLite {path} ({'kept' if a.keep else 'temporary'}), autosched {autosched.__version__}")
    print(f"records: {n:,} in {len(tasks)} workloads x {len(TARGETS)} targets"
          + (f", filled in {fill_s:.0f} s ({n / fill_s:,.0f} records/s)" if fill_s else ""))
    print(f"size: {size / 2**20:,.1f} MiB, {size / n:,.0f} bytes per record")
    print(f"best(k=1):  median {best1 * 1e3:.3f} ms over {a.lookups} lookups ({found}/200 found)")
    print(f"best(k=10): median {best10 * 1e3:.3f} ms")
    print(f"best() on a freshly opened Database: median {cold_s * 1e3:.2f} ms (open + lookup)")
    print(f"commit() of one record: median {commit_s * 1e3:.3f} ms; has_measured: {has_s * 1e3:.3f} ms")
    print(f"measured_traces(task) (~{per_task:,} records a task): median {mt_s * 1e3:.1f} ms")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
