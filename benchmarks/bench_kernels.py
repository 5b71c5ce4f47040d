"""autosched's default (untuned) CPU kernels against numpy, PyTorch and onnxruntime, side by side in one run.

    python benchmarks/bench_kernels.py [--threads 1 2] [--rows conv_a dw ...] [--database tuning.db]
                                       [--rounds 3] [--seconds 1] [--pause 0.5]
                                       [--peers-python /tmp/autosched-peers/bin/python] [--out benchmarks/results]

For each kernel (matmul 1024; the convolutions of a ResNet: 3x3 at 64x56x56 and 256x14x14, direct and by
Winograd's F(4, 3), 1x1 stride 2, the 7x7 stride-2 stem; depthwise 256x28x28; dense 512->1000 at batch 1;
max pool 3x3/2; softmax over 1000)
and thread count: autosched's default schedule for this CPU and the vendor libraries on the same kernel
(``benchmarks/peer_kernels.py`` in the peers' virtualenv, ``bash ../shared/peers/setup.sh``), timed in
``--rounds`` alternating rounds, each block (the median of as many calls as fit in ``--seconds``) after a
``--pause`` so that the worker threads of the side timed before have parked; each side keeps its best
median (``benchmarks/_timing.py``). The vendors run in one peer process per kernel and thread count, kept
alive for the rounds and asked to time one block at a time (``benchmarks/_peers.py``), so their blocks
alternate with autosched's as if they ran in this process. Each build's output is checked against numpy
once before it is timed. Convolutions,
pooling and dense run in autosched's blocked layouts (NCHW[x]c data, weights packed ahead of time, as in a
built model); the vendors get NCHW tensors and weights as initializers, so onnxruntime converts its input and
output to its own blocked layout on every call: the ``+layout`` column adds what autosched's own
NCHW <-> NCHW[x]c transforms of input and output cost, for a like-for-like single-kernel figure.

Compute-bound rows report the share of ``autosched peak``; memory-bound ones the share of the bandwidth of a
copy with the same bytes moved (``autosched.measure.peak.measure_bandwidth``). On an AVX-512 host the AVX2
build (``llvm -mcpu=haswell``) is timed too, against the same vendor figures (which use the host's ISA).
``--database`` also builds each kernel from its best tuning record there, timed in the same rounds
(``autosched tune --workload ...``; ``--tune 200`` runs that first for every row).
Prints the CPU; writes ``kernels.json`` and ``kernels.png`` (the ratio to the best vendor library per row).
On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from _peers import PeerError, PeerProcess
from _peers import timer as peer_aware_timer
from _timing import alternating_medians, median_time

import autosched
from autosched import te
from autosched.relay.op.schedules import layout_transform
from autosched.target import Target

HERE = Path(__file__).resolve().parent

# name -> (autosched workload, params, vendor kernel for peer_kernels.py, bound, goal: the ratio to the best
# vendor library for compute-bound rows, to onnxruntime for memory-bound ones)
ROWS = {
    "matmul": ("matmul", dict(M=1024, N=1024, K=1024), dict(op="matmul", M=1024, N=1024, K=1024), "compute", 0.8),
    "conv_a": ("conv2d_nchwc", dict(CI=64, H=56, W=56, CO=64, KH=3, KW=3, stride=1, padding=1),
               dict(op="conv", N=1, CI=64, H=56, W=56, CO=64, KH=3, KW=3, stride=1, padding=1), "compute", 0.8),
    "conv_a_winograd": ("conv2d_winograd_nchwc", dict(CI=64, H=56, W=56, CO=64, padding=1, tile=4),
                        dict(op="conv", N=1, CI=64, H=56, W=56, CO=64, KH=3, KW=3, stride=1, padding=1),
                        "compute", 0.8),
    "conv_c": ("conv2d_nchwc", dict(CI=256, H=14, W=14, CO=256, KH=3, KW=3, stride=1, padding=1),
               dict(op="conv", N=1, CI=256, H=14, W=14, CO=256, KH=3, KW=3, stride=1, padding=1), "compute", 0.8),
    "conv_c_winograd": ("conv2d_winograd_nchwc", dict(CI=256, H=14, W=14, CO=256, padding=1, tile=4),
                        dict(op="conv", N=1, CI=256, H=14, W=14, CO=256, KH=3, KW=3, stride=1, padding=1),
                        "compute", 0.8),
    "conv_1x1s2": ("conv2d_nchwc", dict(CI=256, H=28, W=28, CO=512, KH=1, KW=1, stride=2, padding=0),
                   dict(op="conv", N=1, CI=256, H=28, W=28, CO=512, KH=1, KW=1, stride=2, padding=0),
                   "compute", 0.8),
    "stem": ("conv2d_nchwc", dict(CI=3, H=224, W=224, CO=64, KH=7, KW=7, stride=2, padding=3),
             dict(op="conv", N=1, CI=3, H=224, W=224, CO=64, KH=7, KW=7, stride=2, padding=3), "compute", 0.8),
    "dw": ("depthwise_conv2d_nchwc", dict(C=256, H=28, W=28, KH=3, KW=3, stride=1, padding=1),
           dict(op="conv", N=1, CI=256, H=28, W=28, CO=256, KH=3, KW=3, stride=1, padding=1, groups=256),
           "memory", 1.0),
    "dense": ("dense_pack", dict(N=1, CI=512, CO=1000), dict(op="dense", N=1, CI=512, CO=1000), "memory", 1.0),
    "maxpool": ("pool2d_nchwc", dict(C=64, H=112, W=112, KH=3, KW=3, stride=2, padding=1),
                dict(op="maxpool", N=1, C=64, H=112, W=112, K=3, stride=2, padding=1), "memory", 1.0),
    "softmax": ("softmax", dict(M=1, N=1000), dict(op="softmax", M=1, N=1000), "memory", 1.0),
}
LAYOUT_ROWS = {"conv2d_nchwc", "conv2d_winograd_nchwc", "depthwise_conv2d_nchwc", "pool2d_nchwc"}
# Winograd's GFLOPS and share of peak count the direct convolution's multiply-adds (its own are about a quarter)
DIRECT_FLOP = {"conv2d_winograd_nchwc": lambda a: 2 * a["CO"] * a["CI"] * 9 * (a["H"] + 2 * a["padding"] - 2)
               * (a["W"] + 2 * a["padding"] - 2)}


def _arrays(tensors, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype) for t in tensors[:-1]]
    return out + [np.zeros([int(d) for d in tensors[-1].shape], tensors[-1].dtype)]


def build_task(task: autosched.Task, database: str | None):
    """The module of ``task``: its best record in ``database`` when given and present, else its default."""
    if database:
        sch, args = task.apply_best(database)
    else:
        sch, args = task.default_schedule()
    return autosched.build(sch, args, target=task.target), args


def autosched_kernel(task: autosched.Task, threads: int, database: str | None = None):
    """A call of the kernel, checked against its numpy reference once, and the bytes it moves."""
    from autosched.workloads.reference import get_reference

    mod, args = build_task(task, database)
    mod.set_num_threads(threads)
    arrays = _arrays(args)
    mod(*arrays)
    ref = get_reference(task.name)
    if ref is not None:
        want = ref(arrays[:-1], **task.args)
        err = float(np.abs(arrays[-1] - want).max() / max(np.abs(want).max(), 1e-30))
        if err > 1e-4:
            raise SystemExit(f"{task}: result differs from numpy by {err:.1e} (relative): not benchmarking it")
    nbytes = sum(a.nbytes for a in arrays)
    return (lambda: mod(*arrays)), nbytes


def layout_transform_time(shape_nchw: tuple[int, ...], block: int, threads: int, to_blocked: bool,
                          pause: float) -> float:
    """Seconds of an NCHW -> NCHW[block]c (or back) transform of one tensor by autosched: relay's
    ``layout_transform`` op with its schedule (rows in parallel, transposed in registers), as a model runs it."""
    n, c, h, w = shape_nchw
    if to_blocked:
        src = te.placeholder((n, c, h, w), name="src")
        dst = te.compute((n, c // block, h, w, block), lambda a, cb, y, x, b: src[a, cb * block + b, y, x],
                         name="layout_transform", tag="layout_transform")
    else:
        src = te.placeholder((n, c // block, h, w, block), name="src")
        dst = te.compute((n, c, h, w), lambda a, ch, y, x: src[a, ch // block, y, x, ch % block],
                         name="layout_transform", tag="layout_transform")
    sch = te.create_schedule(dst.op)
    layout_transform(sch, dst)
    mod = autosched.build(sch, [src, dst])
    mod.set_num_threads(threads)
    arrays = _arrays([src, dst])
    time.sleep(pause)
    return median_time(lambda: mod(*arrays), seconds=0.3)


def vendor_process(peers_python: str | None, kernel: dict, threads: int) -> PeerProcess | None:
    """The vendor libraries on ``kernel`` in a peer process ready to time blocks, or None without one."""
    if not peers_python or not os.path.exists(peers_python):
        return None
    try:
        return PeerProcess(peers_python, str(HERE / "peer_kernels.py"), [json.dumps(kernel), "--threads",
                                                                          str(threads)])
    except PeerError as e:
        print(f"  peer_kernels.py failed on {kernel['op']}: {e}", file=sys.stderr)
        return None


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    builds = sorted({b for r in rows for b in r["ratios"]})
    labels = [f"{r['row']}\n{r['threads']} thr" for r in rows]
    fig, ax = plt.subplots(figsize=(max(9, 0.9 * len(rows)), 4.8))
    width = 0.8 / max(1, len(builds))
    for k, b in enumerate(builds):
        vals = [r["ratios"].get(b, 0.0) for r in rows]
        ax.bar([i + (k - len(builds) / 2 + 0.5) * width for i in range(len(rows))], vals, width, label=b)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(0.8, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("speed / best vendor library")
    ax.set_title(f"autosched default kernels vs numpy, PyTorch, onnxruntime ({rows[0]['cpu']}, same run)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--database", default=None, help="also build each kernel from its best record here")
    ap.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                    help="first tune each kernel (this CPU) for TRIALS new trials into --database, as "
                         "`autosched tune --workload W --trials TRIALS` would (default policy, expert schedule first)")
    ap.add_argument("--peers-python", default=os.environ.get("AUTOSCHED_PEERS_PYTHON",
                                                             "/tmp/autosched-peers/bin/python"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of autosched and the vendors")
    ap.add_argument("--seconds", type=float, default=1.0, help="the length of each timed block")
    ap.add_argument("--pause", type=float, default=0.5, help="seconds of rest before each block")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from autosched.measure.peak import get_peak, measure_bandwidth, measure_peak

    if a.tune:
        if not a.database:
            ap.error("--tune needs --database")
        for name in a.rows:
            wl, params, *_ = ROWS[name]
            task = autosched.Task(wl, params)
            t0 = time.time()
            autosched.tune(task, a.tune, database=a.database, measure_default=True, seed=0)
            print(f"tuned {task.label} for {a.tune} trials in {time.time() - t0:.0f} s", flush=True)
    host = Target("llvm")
    targets = {"native": "llvm"}
    if host.cpu.vector_bytes > 32:
        targets["avx2"] = "llvm -mcpu=haswell"
    if a.database:
        targets["tuned"] = "llvm"
    print(f"CPU: {host.cpu}")
    if not os.path.exists(a.peers_python):
        print(f"no peers virtualenv at {a.peers_python}: run `bash ../shared/peers/setup.sh` (vendor columns "
              "stay empty)", file=sys.stderr)
    # the peak each build can reach here: an AVX2 build's FMAs are half as wide
    peaks = {(label, t): (get_peak(t).gflops if tgt == "llvm" else measure_peak(t, target=tgt).gflops)
             for label, tgt in targets.items() for t in a.threads}
    print("peak: " + ", ".join(f"{label} {t} thr {g:.0f} GFLOPS" for (label, t), g in peaks.items()))
    rows = []
    for name in a.rows:
        wl, params, kernel, bound, goal = ROWS[name]
        for threads in a.threads:
            tasks, fns, nbytes = {}, {}, 0
            for label, tgt in targets.items():
                tasks[label] = autosched.Task(wl, params, target=tgt)
                fns[label], nbytes = autosched_kernel(tasks[label], threads,
                                                      a.database if label == "tuned" else None)
            peer = vendor_process(a.peers_python, kernel, threads)
            try:
                sides = peer.sides("vendor:") if peer else {}
                best = alternating_medians({**fns, **sides}, a.rounds, a.seconds, a.pause, timer=peer_aware_timer)
            except PeerError as e:
                print(f"  peer_kernels.py failed on {kernel['op']}: {e}; timing autosched alone", file=sys.stderr)
                best = alternating_medians(fns, a.rounds, a.seconds, a.pause)
            finally:
                if peer:
                    peer.close()
            vendor = {k.removeprefix("vendor:"): v for k, v in best.items() if k.startswith("vendor:")}
            best_vendor = min(vendor.values()) if vendor else None
            row = {"row": name, "threads": threads, "bound": bound, "goal": goal, "cpu": host.cpu.name,
                   "vendor_s": vendor, "autosched_s": {}, "ratios": {}, "share": {}}
            for label in targets:
                task = tasks[label]
                t = best[label]
                row["autosched_s"][label] = t
                if best_vendor:
                    row["ratios"][label] = best_vendor / t
                flop = DIRECT_FLOP[wl](task.args) if wl in DIRECT_FLOP else task.flop
                if bound == "compute":
                    row["share"][label] = flop / t / 1e9 / peaks[label, threads]
                else:
                    row["share"][label] = nbytes / t / 1e9 / measure_bandwidth(nbytes, threads)
                if label == "native":
                    t_native = t
                if label == "native" and wl in LAYOUT_ROWS:
                    d = task.tensors()[0]
                    o = task.tensors()[-1]
                    nchw = lambda s: (int(s[0]), int(s[1]) * int(s[4]), int(s[2]), int(s[3]))  # noqa: E731
                    extra = (layout_transform_time(nchw(d.shape), int(d.shape[4]), threads, True, a.pause)
                             + layout_transform_time(nchw(o.shape), int(o.shape[4]), threads, False, a.pause))
                    row["autosched_s"]["native+layout"] = t + extra
                    if best_vendor:
                        row["ratios"]["native+layout"] = best_vendor / (t + extra)
                row["flop"] = flop
            rows.append(row)
            vend = "  ".join(f"{p} {s * 1e3:.3f}" for p, s in vendor.items())
            ours = "  ".join(f"{lab} {s * 1e3:.3f} ms ({row['ratios'].get(lab, float('nan')):.2f}x"
                             + (f", {row['share'][lab]:.0%} of {'peak' if bound == 'compute' else 'bandwidth'})"
                                if lab in row["share"] else ")")
                             for lab, s in row["autosched_s"].items())
            # the goals: >= 0.8x the best vendor (compute-bound), >= 1.0x onnxruntime (memory-bound)
            ref = vendor.get("onnxruntime") if bound == "memory" else best_vendor
            ok = "" if not ref else (
                "  [goal met]" if ref / t_native >= goal else
                f"  [below the goal: {goal}x {'onnxruntime' if bound == 'memory' else 'the best vendor'}]")
            print(f"{name:10s} {threads} thr | autosched {ours} | vendor ms: {vend}{ok}", flush=True)
    result = {"cpu": str(host.cpu), "peaks": {f"{k[0]}/{k[1]}": v for k, v in peaks.items()}, "rows": rows}
    (a.out / "kernels.json").write_text(json.dumps(result, indent=1))
    plot(rows, a.out / "kernels.png")
    print(f"wrote {a.out / 'kernels.json'} and {a.out / 'kernels.png'}")


if __name__ == "__main__":
    main()
