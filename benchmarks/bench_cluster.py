"""Candidates per second of a build-bound conv2d run on a loopback Ray cluster of one worker node, then two.

    python benchmarks/bench_cluster.py                      # 48 candidates on each cluster
    python benchmarks/bench_cluster.py --candidates 128 --json out.json

Each cluster (``tests/_ray_cluster.py``, in a process of its own) is a head with no CPUs for Ray, so nothing
is built or timed beside the driver, and one or two worker nodes of one CPU each, all on 127.0.0.1. A fresh
process joins it as ``autosched tune --ray-address`` would and measures the same seeded random conv2d
schedules (14x14x32, one thread per kernel) through a :class:`~autosched.measure.Measurer`, batches of 16
as a tuning run would, each timed with one short repeat so that building dominates. It prints candidates
per second on each cluster and their ratio (the goal: at least 1.7 with two nodes), with the CPU's name.

Every node lives on this machine, so give it at least three idle cores (two nodes and the driver) and run
nothing else meanwhile: the nodes' CPUs are Ray's bookkeeping, not a partition of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOLDER = HERE.parent / "tests" / "_ray_cluster.py"


def measure(address: str, n: int, batch: int, seed: int) -> dict:
    """Join the cluster at ``address`` and measure ``n`` random conv2d candidates (this process: one cluster)."""
    sys.path.insert(0, str(HERE))
    from bench_measure import SHAPES, random_conv_trace

    import autosched
    from autosched.measure import MeasureInput, Measurer, RunConfig
    from autosched.te import Trace

    task = autosched.Task("conv2d", args=SHAPES["small"])
    rng = random.Random(seed)
    inputs = [MeasureInput(task, random_conv_trace(task, rng)) for _ in range(n)]
    config = RunConfig(repeat=1, min_repeat_ms=1.0, num_threads=1)
    with Measurer(config=config, address=address, seed=seed) as m:
        m.measure([MeasureInput(task, Trace())])  # actors up, the reference computed: not part of the rate
        m.stats = type(m.stats)()
        for i in range(0, n, batch):
            m.measure(inputs[i:i + batch])
        st = m.stats
        return {"candidates": n, "measured": st.measured, "wall_s": st.wall_seconds,
                "candidates_per_s": n / st.wall_seconds, "build_wall_s": st.build_wall_seconds,
                "run_wall_s": st.run_wall_seconds, "builders": m.builder.parallelism}


def on_cluster(workers: int, n: int, batch: int, seed: int) -> dict:
    """Start a loopback cluster of ``workers`` one-CPU worker nodes, measure on it from a fresh process."""
    holder = subprocess.Popen([sys.executable, str(HOLDER), "--workers", str(workers), "--head-cpus", "0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = holder.stdout.readline().strip()
        holder.stdout.readline()  # the node ids
        if not address:
            raise SystemExit(f"the {workers}-node cluster did not start")
        out = subprocess.run([sys.executable, __file__, "--join", address, "--candidates", str(n),
                              "--batch", str(batch), "--seed", str(seed)], capture_output=True, text=True,
                             env=dict(os.environ, AUTOSCHED_NUM_THREADS="1"))
        if out.returncode != 0:
            raise SystemExit(f"measuring on {workers} node(s) failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidates", type=int, default=48)  # under 64: no builder is recycled (1-3 s)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--join", default=None, help=argparse.SUPPRESS)  # the measuring process of one cluster
    args = p.parse_args()
    if args.join:
        print(json.dumps(measure(args.join, args.candidates, args.batch, args.seed)))
        return
    from autosched.target import host_cpu_name

    print(f"CPU {host_cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"{args.candidates} conv2d candidates per cluster", flush=True)
    rows = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        rows[workers] = r = on_cluster(workers, args.candidates, args.batch, args.seed)
        print(f"{workers} worker node(s): {r['candidates_per_s']:.2f} candidates/s with {r['builders']} builder(s) "
              f"(building {r['build_wall_s']:.1f} s, timing {r['run_wall_s']:.1f} s of {r['wall_s']:.1f} s; "
              f"{r['measured']} timed; {time.perf_counter() - t0:.0f} s with the cluster's start)", flush=True)
    ratio = rows[2]["candidates_per_s"] / rows[1]["candidates_per_s"]
    print(f"two nodes / one node: {ratio:.2f}x (goal >= 1.7)")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": host_cpu_name(), "rows": rows, "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
