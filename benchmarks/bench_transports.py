"""What a measurement transport costs: start-up and per-candidate overhead of the local process pool and of Ray.

    python benchmarks/bench_transports.py                        # both backends, 2 fresh processes each
    python benchmarks/bench_transports.py --backend local --rounds 1

Each round runs in a fresh Python process (so Ray's start-up is counted) and, with a Builder and a Runner of
the backend, measures 32 trivial candidates of a 64x64 matmul (distinct tilings, one thread, 3 short
repeats), then 32 more on the warm workers. It prints, per round: seconds from creating the builder to the
first timed result, seconds for the whole first batch, candidates per second of the warm batch, and the
runner's overhead per candidate (its wall time less what its worker spent from loading to the end of timing).
Waits for another process's measurement turn on this machine are counted ("turn waits"): a round with
many was slowed by other tuners, not by the transport.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROUND = r"""
import json, sys, time
t0 = time.perf_counter()
import autosched
from autosched.measure import MeasureInput, RunConfig
backend = sys.argv[1]
task = autosched.Task("matmul", args={"M": 64, "N": 64, "K": 64})

def trace(ti, tj, vec):
    sch, (A, B, C) = task.schedule()
    i, j = C.op.axis
    io, jo, ii, ji = sch[C].tile(i, j, ti, tj)
    if vec:
        sch[C].vectorize(ji)
    return sch.trace

sizes = (1, 2, 4, 8, 16, 32)
inputs = [MeasureInput(task, trace(a, b, v)) for v in (False, True) for a in sizes for b in sizes][:64]
cfg = RunConfig(number=1, repeat=3, min_repeat_ms=1.0, timeout=5.0, num_threads=1)
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
if backend == "ray":
    from autosched.measure.ray_backend import RayBuilder, RayRunner
    b, r = RayBuilder(timeout=30.0), RayRunner(cfg)
else:
    from autosched.measure import LocalBuilder, LocalRunner
    b, r = LocalBuilder(timeout=30.0), LocalRunner(cfg)
first = []
batch1 = inputs[:32]
res = r.run(batch1, b.build(batch1), on_result=lambda i, m: first or first.append(time.perf_counter() - t0))
t_batch1 = time.perf_counter() - t0
assert sum(x.ok for x in res) == len(res), [x.error_msg for x in res if not x.ok][:3]
batch2 = inputs[32:64]
t1 = time.perf_counter()
builds = b.build(batch2)
t2 = time.perf_counter()
res = r.run(batch2, builds)
t3 = time.perf_counter()
assert sum(x.ok for x in res) == len(res), [x.error_msg for x in res if not x.ok][:3]
b.close(); r.close()
# one runner: the wall time of the run phase less what the worker spent from load to the end of timing (turn
# waits included) is what the engine and the transport cost per candidate
run_overhead = (t3 - t2 - sum(x.run_seconds for x in res)) / len(res)
print(json.dumps({"backend": backend, "import_s": t_import, "first_result_s": first[0], "batch1_s": t_batch1,
                  "warm_cands_per_s": len(batch2) / (t3 - t1), "warm_build_s": t2 - t1, "warm_run_s": t3 - t2,
                  "run_overhead_ms": 1e3 * run_overhead, "turn_waits": r.turn_waits, "builders": b.parallelism}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["local", "ray", "both"], default="both")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", help="write the rows here too")
    args = p.parse_args()
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    print(f"cpu {llvm.get_host_cpu_name()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}", flush=True)
    backends = ["local", "ray"] if args.backend == "both" else [args.backend]
    rows = []
    for _ in range(args.rounds):
        for backend in backends:  # alternating, so load that comes and goes falls on both
            out = subprocess.run([sys.executable, "-c", ROUND, backend], capture_output=True, text=True, check=False)
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"{backend} round failed")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{backend:5s} first result {row['first_result_s']:6.2f} s  first 32 {row['batch1_s']:6.2f} s"
                  f"  warm {row['warm_cands_per_s']:5.1f} candidates/s (build {row['warm_build_s']:.2f} s, run"
                  f" {row['warm_run_s']:.2f} s, run overhead {row['run_overhead_ms']:.1f} ms/candidate,"
                  f" {row['turn_waits']} turn waits)  load {os.getloadavg()[0]:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t:.0f} s")
