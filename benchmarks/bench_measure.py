"""How fast and how faithfully autosched measures: candidates per second and runner-vs-direct timing.

    python benchmarks/bench_measure.py                    # both backends, small and default conv2d
    python benchmarks/bench_measure.py --backend local --candidates 16 --json out.json

Part 1 measures random (legal) conv2d schedules with each backend through a
:class:`~autosched.measure.Measurer`, as a tuning loop would (batches of 8,
adaptive timeouts on), and splits each candidate's wall time into

* build: waiting for the builders (their own compile time is shown beside it),
* run: waiting for the runner (its own load + warm-up + timing time beside it),
* overhead: everything else in this process (references, bookkeeping),

so one can see whether trials/s is bounded by compiling and timing or by
Python and Ray. Part 2 times one kernel with each runner and with a plain
timing loop in this process (same number, repeat and threads), five times
each, interleaved, and prints the ratio of the medians (goal: within 5%).

Run it on a quiet machine: on 2 cores a benchmark needs both. It prints the
load average before it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

import autosched
from autosched.measure import LocalBuilder, LocalRunner, MeasureInput, Measurer, RunConfig, make_inputs
from autosched.measure.worker import aligned_copy
from autosched.te import Trace

SHAPES = {
    "small": {"H": 14, "W": 14, "CI": 32, "CO": 32},
    "default": {},  # 1x64x56x56, 3x3, 64 filters: a ResNet-18 layer
}


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def random_conv_trace(task: autosched.Task, rng: random.Random) -> Trace:
    """A random legal NCHW conv2d schedule: tiles, a loop order, maybe inlined padding, vector, parallel."""
    sch, (data, weight, out) = task.schedule()
    pad = sch.stages[1].op.output(0)
    if rng.random() < 0.5:
        sch[pad].compute_inline()
    s = sch[out]
    n, f, y, x = out.op.axis
    rc, rh, rw = out.op.reduce_axis
    CO, OH, OW = (int(d) for d in out.shape[1:])
    fo, fi = s.split(f, factor=rng.choice(_divisors(CO, 32)))
    yo, yi = s.split(y, factor=rng.choice(_divisors(OH, 8)))
    xo, xi = s.split(x, factor=rng.choice(_divisors(OW, 16)))
    inner = [fi, yi, xi]
    rng.shuffle(inner)
    if rng.random() < 0.7:  # keep a spatial axis innermost so it can be vectorised
        inner.remove(xi)
        inner.append(xi)
    reduce_order = [rc, rh, rw] if rng.random() < 0.5 else [rh, rw, rc]
    s.reorder(n, fo, yo, xo, *reduce_order, *inner)
    if inner[-1] is xi and rng.random() < 0.7:
        s.vectorize(xi)
    if rng.random() < 0.5:
        s.parallel(fo)
    return sch.trace


def bench_throughput(backend: str, shape: str, n: int, batch: int, seed: int, config: RunConfig) -> dict:
    task = autosched.Task("conv2d", args=SHAPES[shape])
    rng = random.Random(seed)
    warm = [MeasureInput(task, Trace())]
    inputs = [MeasureInput(task, random_conv_trace(task, rng)) for _ in range(n)]
    t0 = time.perf_counter()
    m = Measurer(backend=backend, config=config, seed=seed)
    startup = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        m.measure(warm)  # workers up, libraries imported, reference computed: not part of the rate
        first = time.perf_counter() - t1
        m.stats = type(m.stats)()
        results = []
        for i in range(0, n, batch):
            results += m.measure(inputs[i:i + batch])
        st = m.stats
        run_inside = sum(r.run_seconds for r in results)
        best = m.best(task)
    finally:
        m.close()
    kinds: dict[str, int] = {}
    for r in results:
        kinds[r.error_kind or "ok"] = kinds.get(r.error_kind or "ok", 0) + 1
    wall = st.wall_seconds
    other = wall - st.build_wall_seconds - st.run_wall_seconds
    return {
        "backend": backend, "shape": shape, "candidates": n, "startup_s": startup, "first_batch_s": first,
        "candidates_per_s": n / wall, "wall_s": wall,
        "build_wall_s": st.build_wall_seconds, "build_inside_s": st.build_seconds,
        "builders": m.builder.parallelism, "cached_builds": st.builds_cached,
        "run_wall_s": st.run_wall_seconds, "run_inside_s": run_inside,
        "overhead_s": other, "results": kinds,
        "best_gflops": best[1].gflops(task.flop) if best else 0.0,
    }


def _direct_seconds(path: str, arrays: list, number: int, repeat: int, threads: int) -> float:
    mod = autosched.runtime.load_module(path)
    mod.set_num_threads(threads)
    f = mod.entry_func
    f(*arrays)  # checked once, then called through ctypes directly, as the runner does
    raw, ptrs = f._cfunc, [a.ctypes.data for a in arrays]
    costs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            raw(*ptrs)
        costs.append((time.perf_counter() - t0) / number)
    return statistics.median(costs)


def bench_agreement(backends: list[str], rounds: int, threads: int) -> dict:
    """The same library timed by each runner and by a plain loop here; median of ``rounds`` medians each."""
    task = autosched.Task("conv2d", args=SHAPES["small"])
    rng = random.Random(7)
    trace = random_conv_trace(task, rng)
    with LocalBuilder(n_parallel=1) as b:
        built = b.build([MeasureInput(task, trace)])[0]
        assert built.ok, built.error_msg
        arrays = [aligned_copy(a) for a in make_inputs(task)]  # as the runner does
        t = _direct_seconds(built.artifact_path, arrays, 20, 3, threads)
        number = max(1, int(0.05 / t))  # ~50 ms per repeat
        cfg = RunConfig(number=number, repeat=5, min_repeat_ms=0, num_threads=threads)
        runners = {}
        for be in backends:
            if be == "ray":
                from autosched.measure import RayRunner

                runners[be] = RayRunner(cfg)
            else:
                runners[be] = LocalRunner(cfg)
        samples: dict[str, list[float]] = {"direct": [], **{be: [] for be in backends}}
        inp = [MeasureInput(task, trace)]
        try:
            for r in runners.values():  # warm each once
                r.run(inp, [built])
            order = ["direct", *runners]
            for k in range(rounds):  # interleaved, the order reversed every other round: the machine drifts
                for who in (order if k % 2 == 0 else order[::-1]):
                    if who == "direct":
                        samples["direct"].append(_direct_seconds(built.artifact_path, arrays, number, 5, threads))
                    else:
                        res = runners[who].run(inp, [built])[0]
                        assert res.ok, res.error_msg
                        samples[who].append(res.cost)
        finally:
            for r in runners.values():
                r.close()
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {"number": number, "threads": threads, "samples": samples, "median": med,
            "ratio": {be: med[be] / med["direct"] for be in backends}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["ray", "local", "both"], default="both")
    ap.add_argument("--shapes", default="small,default", help="comma-separated: small, default")
    ap.add_argument("--candidates", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the runner-vs-direct comparison")
    ap.add_argument("--threads", type=int, default=None, help="threads per kernel (default: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    backends = ["ray", "local"] if args.backend == "both" else [args.backend]
    threads = args.threads or os.cpu_count() or 1
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()}); "
          f"threads per kernel: {threads}")
    config = RunConfig(num_threads=threads)
    out: dict = {"throughput": [], "load_before": os.getloadavg()[0]}
    print(f"\n{'backend':7} {'shape':8} {'cand/s':>7} {'build':>16} {'run':>16} {'overhead':>9} "
          f"{'startup':>8} {'best GFLOPS':>11}  results")
    for shape in args.shapes.split(","):
        for be in backends:
            r = bench_throughput(be, shape, args.candidates, args.batch, args.seed, config)
            out["throughput"].append(r)
            n, w = r["candidates"], r["wall_s"]
            per = 1000.0 / n
            print(f"{be:7} {shape:8} {r['candidates_per_s']:7.2f} "
                  f"{r['build_wall_s'] * per:6.0f}ms ({r['build_wall_s'] / w:4.0%}) "
                  f"{r['run_wall_s'] * per:6.0f}ms ({r['run_wall_s'] / w:4.0%}) "
                  f"{r['overhead_s'] * per:5.0f}ms "
                  f"{r['startup_s']:7.1f}s {r['best_gflops']:11.1f}  {r['results']}")
            build_over = (r["build_wall_s"] - r["build_inside_s"] / r["builders"]) * per
            print(f"{'':16} inside workers per candidate: compile {r['build_inside_s'] * per:.0f} ms "
                  f"on {r['builders']} builder(s) ({r['cached_builds']} cached), "
                  f"load+check+time {r['run_inside_s'] * per:.0f} ms; "
                  + (f"builder overhead {build_over:.0f} ms, " if build_over >= 0 else
                     f"{-build_over:.0f} ms of compiling hidden behind runs, ")
                  + f"runner overhead {(r['run_wall_s'] - r['run_inside_s']) * per:.0f} ms")
    ag = bench_agreement(backends, args.rounds, threads)
    out["agreement"] = ag
    print(f"\nrunner vs direct timing loop (same library, number={ag['number']}, repeat=5, "
          f"median of {args.rounds} rounds):")
    print(f"  direct {ag['median']['direct'] * 1e3:.4f} ms")
    for be in backends:
        print(f"  {be:6} {ag['median'][be] * 1e3:.4f} ms  ratio {ag['ratio'][be]:.3f}  "
              f"({'within' if abs(ag['ratio'][be] - 1) <= 0.05 else 'NOT within'} 5%)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
