"""A whole model, end to end: ResNet-18-shaped (batch 1) on autosched, onnxruntime and PyTorch, in one run.

    python benchmarks/bench_e2e.py [--image 224] [--threads 2] [--db tuning_logs/resnet18.jsonl]
                                   [--peers-python /tmp/autosched-peers/bin/python] [--out benchmarks/results]

The model comes from ``tests/_onnx_models.make_resnet18`` (seeded random weights, the real layer shapes).
autosched imports it with ``relay.frontend.from_onnx`` and builds it twice: untuned (every kernel with
its default schedule) and inside ``apply_history_best(--db)`` (each kernel with its best tuning record when
there is one: the shipped ``tuning_logs/resnet18.jsonl`` by default, made with ``autosched tune --model``).
onnxruntime runs in this environment; PyTorch in the peers' virtualenv (``bash ../shared/peers/setup.sh``)
through ``benchmarks/peer_torch_onnx.py``. Every latency is the median of as many runs as fit in two
seconds, one after the other on the same machine. Every autosched output is checked against onnxruntime's.
Writes ``e2e.json`` and ``e2e.png``. On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import _onnx_models  # noqa: E402
import autosched  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.codegen.target import Target  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402


def median_time(fn, seconds: float = 2.0) -> float:
    fn()
    fn()
    t = time.perf_counter()
    fn()
    one = time.perf_counter() - t
    n = max(10, min(1000, int(seconds / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def build_autosched(mod, params, db: str | None) -> tuple[GraphModule, float, int, int]:
    """(module, compile seconds, kernels, kernels tuned)."""
    t0 = time.perf_counter()
    if db:
        with autosched.apply_history_best(db):
            res = relay.build(mod, target="llvm", params=params)
    else:
        res = relay.build(mod, target="llvm", params=params)
    seconds = time.perf_counter() - t0
    graph_json, lib, built = res
    return GraphModule(graph_json, lib, built), seconds, len(res.kernels), sum(k["tuned"] for k in res.kernels)


def run_autosched(m: GraphModule, x: np.ndarray) -> tuple[float, np.ndarray]:
    m.set_input("data", x)

    def once():
        m.run()

    t = median_time(once)
    return t, m.get_output(0)


def run_onnxruntime(path: str, x: np.ndarray, threads: int) -> tuple[float, np.ndarray, str]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {"data": x}
    t = median_time(lambda: sess.run(None, feed))
    return t, sess.run(None, feed)[0], ort.__version__


def run_torch(peers_python: str, path: str, x: np.ndarray, threads: int) -> dict | None:
    if not os.path.exists(peers_python):
        print(f"PyTorch skipped: no peers' python at {peers_python} (bash ../shared/peers/setup.sh)", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "x.npy")
        np.save(inp, x)
        r = subprocess.run([peers_python, str(HERE / "peer_torch_onnx.py"), path, "--threads", str(threads),
                            "--input", inp], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        print(f"PyTorch failed: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--db", default=str(HERE.parent / "tuning_logs" / "resnet18.jsonl"),
                    help="tuning records for the tuned build (database URL, path or .jsonl log)")
    ap.add_argument("--peers-python", default="/tmp/autosched-peers/bin/python")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    logging.basicConfig(level=logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    import onnx

    model = _onnx_models.make_resnet18(batch=1, image=args.image)
    x = np.random.default_rng(0).standard_normal((1, 3, args.image, args.image)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "resnet18.onnx")
        onnx.save(model, path)
        mod, params = relay.frontend.from_onnx(model, shape={"data": x.shape})
        rows = []
        t_ort, ref, ort_version = run_onnxruntime(path, x, args.threads)
        rows.append({"name": f"onnxruntime {ort_version}", "seconds": t_ort})
        m, compile_s, n_kernels, _ = build_autosched(mod, params, None)
        t, y = run_autosched(m, x)
        err = float(np.max(np.abs(y - ref)))
        rows.append({"name": "autosched untuned", "seconds": t, "compile_s": compile_s, "kernels": n_kernels,
                     "tuned": 0, "max_abs_err": err})
        if args.db and (os.path.exists(args.db) or "://" in args.db):
            m, compile_s, n_kernels, tuned = build_autosched(mod, params, args.db)
            t, y = run_autosched(m, x)
            rows.append({"name": "autosched tuned", "seconds": t, "compile_s": compile_s, "kernels": n_kernels,
                         "tuned": tuned, "max_abs_err": float(np.max(np.abs(y - ref))), "db": args.db})
        else:
            print(f"tuned build skipped: no tuning records at {args.db}", file=sys.stderr)
        tr = run_torch(args.peers_python, path, x, args.threads)
        if tr is not None:
            rows.append({"name": f"PyTorch {tr['version']} (TorchScript, frozen)", "seconds": tr["seconds"]})
    print(f"ResNet-18-shaped, batch 1, {args.image}x{args.image}, {args.threads} threads "
          f"({Target('llvm').key})")
    for r in rows:
        extra = ""
        if "kernels" in r:
            extra = (f"  {r['tuned']}/{r['kernels']} kernels tuned, built in {r['compile_s']:.1f} s, "
                     f"max |err| vs onnxruntime {r['max_abs_err']:.1e}")
        ratio = t_ort / r["seconds"]
        print(f"  {r['name']:<40} {r['seconds'] * 1e3:8.2f} ms   speed vs onnxruntime {ratio:5.2f}x{extra}")
    (args.out / "e2e.json").write_text(json.dumps({"image": args.image, "threads": args.threads, "rows": rows},
                                                  indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    names = [r["name"] for r in rows]
    ms = [r["seconds"] * 1e3 for r in rows]
    bars = ax.barh(names, ms, color=["tab:gray" if "autosched" not in n else "tab:blue" for n in names])
    for b, v in zip(bars, ms):
        ax.annotate(f"{v:.1f} ms", (v, b.get_y() + b.get_height() / 2), va="center", fontsize=8)
    ax.set_xlabel("latency (ms, lower is better)")
    ax.set_title(f"ResNet-18-shaped, batch 1, {args.image}x{args.image}, {args.threads} threads", fontsize=10)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(args.out / "e2e.png")
    print(f"wrote {args.out / 'e2e.json'} and {args.out / 'e2e.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
