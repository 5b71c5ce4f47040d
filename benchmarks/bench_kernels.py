"""autosched's expert CPU schedules against numpy, PyTorch and onnxruntime, side by side in one run.

    python benchmarks/bench_kernels.py [--threads 1 2] [--peers-python /tmp/autosched-peers/bin/python]
                                       [--out benchmarks/results]

The peers run in their own virtualenv (``bash ../shared/peers/setup.sh``), through
``shared/peers/peers.py vendor``, right after autosched's kernel on the same workload
and thread count, so both see the same machine. Prints GFLOPS and ratios, the median
compile time of the matmul schedule, and writes ``kernels.json`` and ``kernels.png``.
On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import autosched

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent.parent / "shared" / "peers" / "peers.py"

# peers.py workload name -> (autosched workload, params)
WORKLOADS = {
    "matmul1024": ("matmul", dict(M=1024, N=1024, K=1024)),
    "conv_a": ("conv2d", dict(N=1, H=56, W=56, CI=64, CO=64, KH=3, KW=3, stride=1, padding=1)),
    "conv_c": ("conv2d", dict(N=1, H=14, W=14, CI=256, CO=256, KH=3, KW=3, stride=1, padding=1)),
    "dw_d": ("depthwise_conv2d", dict(N=1, C=256, H=28, W=28, KH=3, KW=3, stride=1, padding=1)),
}


def median_time(fn, seconds: float = 1.0) -> float:
    """The same timing rule as peers.py: warm up, then the median of as many runs as fit in ``seconds``."""
    fn()
    t = time.perf_counter()
    fn()
    one = time.perf_counter() - t
    n = max(5, min(1000, int(seconds / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def autosched_gflops(name: str, params: dict, threads: int) -> tuple[float, float]:
    task = autosched.Task(name, params)
    sch, args = task.default_schedule()
    mod = autosched.build(sch, args)
    mod.set_num_threads(threads)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype) for t in args[:-1]]
    out = np.zeros([int(d) for d in args[-1].shape], args[-1].dtype)
    t = median_time(lambda: mod(*arrays, out))
    return task.flop / t / 1e9, t


def peer_gflops(peers_python: str | None, wl: str, threads: int) -> dict[str, float]:
    if not peers_python or not os.path.exists(peers_python):
        return {}
    res = subprocess.run([peers_python, str(PEERS), "vendor", wl, "--threads", str(threads)],
                         capture_output=True, text=True, timeout=600)
    out = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[d["peer"]] = d["gflops"]
    if res.returncode != 0:
        print(f"  peers.py failed for {wl}: {res.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return out


def compile_times(n: int = 7) -> list[float]:
    from autosched.codegen.build import clear_cache

    task = autosched.Task("matmul", dict(M=1024, N=1024, K=1024))
    out = []
    for _ in range(n):
        clear_cache()
        sch, args = task.default_schedule()
        t0 = time.perf_counter()
        autosched.build(sch, args)
        out.append(time.perf_counter() - t0)
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = ["autosched", "numpy", "torch", "torch_channels_last", "onnxruntime"]
    labels = [f"{r['workload']}\n{r['threads']} thr" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(rows)), 4.5))
    width = 0.8 / len(peers)
    for k, p in enumerate(peers):
        vals = [r["gflops"].get(p, 0.0) for r in rows]
        if not any(vals):
            continue
        ax.bar([i + (k - len(peers) / 2 + 0.5) * width for i in range(len(rows))], vals, width, label=p)
    ax.set_xticks(range(len(rows)), labels)
    ax.set_ylabel("GFLOPS (fp32)")
    ax.set_title("autosched expert schedules vs vendor libraries (same machine, same run)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    default_peers = os.environ.get("AUTOSCHED_PEERS_PYTHON", "/tmp/autosched-peers/bin/python")
    ap.add_argument("--peers-python", default=default_peers)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if not os.path.exists(a.peers_python):
        print(f"no peers virtualenv at {a.peers_python}: run `bash ../shared/peers/setup.sh` for PyTorch/onnxruntime;"
              " numpy only for now", file=sys.stderr)
    rows = []
    for wl in a.workloads:
        name, params = WORKLOADS[wl]
        for threads in a.threads:
            g, t = autosched_gflops(name, params, threads)
            peers = peer_gflops(a.peers_python, wl, threads)
            if not peers and name == "matmul":
                x, y = (np.random.default_rng(0).standard_normal((1024, 1024)).astype("float32") for _ in range(2))
                peers["numpy"] = 2 * 1024**3 / median_time(lambda: x @ y) / 1e9
            row = {"workload": wl, "threads": threads, "gflops": {"autosched": g, **peers}}
            rows.append(row)
            ratios = "  ".join(f"vs {p} {g / v:.2f}x" for p, v in peers.items() if v > 0)
            print(f"{wl:11s} {threads} thr  autosched {g:7.1f} GFLOPS  "
                  + "  ".join(f"{p} {v:.1f}" for p, v in peers.items()) + f"   | {ratios}", flush=True)
    for wl in a.workloads:
        by = {r["threads"]: r["gflops"]["autosched"] for r in rows if r["workload"] == wl}
        if 1 in by and 2 in by:
            print(f"{wl:11s} parallel speed-up 1 -> 2 threads: {by[2] / by[1]:.2f}x")
    ct = compile_times()
    print(f"matmul 1024 expert schedule: median build (lower + LLVM -O3 + JIT) {statistics.median(ct) * 1e3:.0f} ms "
          f"(min {min(ct) * 1e3:.0f}, max {max(ct) * 1e3:.0f})")
    result = {"rows": rows, "compile_seconds": ct, "cpu": autosched.codegen.target.Target("llvm").key}
    (a.out / "kernels.json").write_text(json.dumps(result, indent=1))
    plot(rows, a.out / "kernels.png")
    print(f"wrote {a.out / 'kernels.json'} and {a.out / 'kernels.png'}")


if __name__ == "__main__":
    main()
