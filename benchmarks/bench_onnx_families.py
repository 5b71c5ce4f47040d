"""The CNN families of tests/test_onnx_families.py (classifiers, a U-Net, a YOLO-style detector, ESPCN) on
autosched (untuned) and onnxruntime, side by side.

    python benchmarks/bench_onnx_families.py [--threads 2] [--families resnet50,vgg11] [--rounds 5] [--seconds 1]
                                             [--pause 0.5]

Each family (tests/_onnx_models.FAMILIES: batch 1, 3x224x224, seeded random weights) is imported with
``relay.frontend.from_onnx`` and built with ``relay.build`` (every kernel with its default schedule; the build
time is measured), then the graph executor and an onnxruntime session (``--threads`` intra-op threads, all graph
optimisations) run it; the outputs are compared (max|diff| / max|ref|). The two are timed in ``--rounds``
alternating rounds, each block (the median of as many runs as fit in ``--seconds``, at least 10) after a
``--pause`` so that the other library's worker threads have parked, and each keeps its best block
(``benchmarks/_timing.py``). Prints a markdown table; on a 2-core machine run
it with nothing else running. ``--per-kernel`` also times each kernel alone (``GraphModule.profile``) and prints,
per family, where the time goes by kernel kind (the fused op names, e.g. ``concatenate_batch_norm_relu``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _timing import alternating_medians  # noqa: E402

import _onnx_models  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402


def by_kind(profile: list[dict], top: int = 5) -> list[tuple[str, int, float]]:
    """``(kind, kernels, total ms)`` of the ``top`` kernel kinds taking most time: a kind is a kernel's name
    without its ``fused_`` prefix and index suffix."""
    total: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for p in profile:
        kind = p["name"].removeprefix("fused_").rsplit("_", 1)[0]
        total[kind] += p["seconds"] * 1e3
        count[kind] += 1
    return [(k, count[k], ms) for k, ms in total.most_common(top)]


def bench(name: str, threads: int, rounds: int, seconds: float, pause: float, per_kernel: bool = False,
          target: str = "llvm") -> dict:
    """Build and time one family on both; returns a row of the table."""
    import onnxruntime as ort

    model = _onnx_models.FAMILIES[name]()
    ops = sorted(Counter(n.op_type for n in model.graph.node))
    x = _onnx_models.random_inputs(model)["data"]
    t0 = time.perf_counter()
    mod, params = relay.frontend.from_onnx(model, shape={"data": x.shape})
    res = relay.build(mod, target=target, params=params)
    build_s = time.perf_counter() - t0
    n_kernels = len(res.kernels)
    m = GraphModule(*res)
    m.set_input("data", x)
    m.run()
    y = m.get_output(0)
    y = np.asarray(y.numpy() if hasattr(y, "numpy") else y)
    del res, mod, params

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {"data": x}
    ref = sess.run(None, feed)[0]
    err = float(np.abs(y.astype(np.float64) - ref).max() / np.abs(ref).max())
    best = alternating_medians({"autosched": m.run, "onnxruntime": lambda: sess.run(None, feed)}, rounds, seconds,
                               pause)
    t_as, t_ort = best["autosched"], best["onnxruntime"]
    time.sleep(pause)
    kinds = by_kind(m.profile(20)) if per_kernel else []
    return {"family": name, "ops": ops, "nodes": len(model.graph.node), "kernels": n_kernels,
            "build_s": build_s, "autosched_ms": t_as * 1e3, "ort_ms": t_ort * 1e3, "rel_err": err,
            "ort_version": ort.__version__, "kinds": kinds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--families", default=",".join(_onnx_models.FAMILIES),
                    help=f"comma-separated subset of {', '.join(_onnx_models.FAMILIES)}")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of autosched and onnxruntime")
    ap.add_argument("--seconds", type=float, default=1.0, help="the length of each timed block")
    ap.add_argument("--pause", type=float, default=0.5, help="seconds of rest before each block")
    ap.add_argument("--target", default="llvm",
                    help="what autosched builds for, e.g. 'llvm -mcpu=haswell' (AVX2) on an AVX-512 host; onnxruntime "
                         "uses the host's ISA")
    ap.add_argument("--per-kernel", action="store_true",
                    help="also time each kernel alone and print where each family's time goes, by kernel kind")
    args = ap.parse_args()
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    logging.basicConfig(level=logging.WARNING)
    names = [n.strip() for n in args.families.split(",") if n.strip()]
    unknown = [n for n in names if n not in _onnx_models.FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; known: {', '.join(_onnx_models.FAMILIES)}")
    rows = []
    for name in names:
        r = bench(name, args.threads, args.rounds, args.seconds, args.pause, args.per_kernel, args.target)
        rows.append(r)
        print(f"{name}: built in {r['build_s']:.1f} s, autosched {r['autosched_ms']:.1f} ms, onnxruntime "
              f"{r['ort_ms']:.1f} ms, rel err {r['rel_err']:.1e}", file=sys.stderr, flush=True)
    print(f"batch 1, 3x224x224, {args.threads} threads, {Target(args.target).key} on {Target('llvm').cpu.name}, "
          f"onnxruntime {rows[0]['ort_version']}")
    print()
    print("| family | operators | nodes / kernels | build (s) | autosched untuned (ms) | onnxruntime (ms) | "
          "autosched / onnxruntime | output error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {', '.join(r['ops'])} | {r['nodes']} / {r['kernels']} | {r['build_s']:.1f} | "
              f"{r['autosched_ms']:.1f} | {r['ort_ms']:.1f} | {r['autosched_ms'] / r['ort_ms']:.2f}x | "
              f"{r['rel_err']:.1e} |")
    for r in rows:
        if r["kinds"]:
            print(f"\n{r['family']}, kernels alone (ms, sum by kind; the {len(r['kinds'])} largest):")
            for kind, n, ms in r["kinds"]:
                print(f"  {ms:8.2f}  {n:4d} x {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
