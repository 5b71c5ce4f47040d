"""GPU kernels (``cuda`` target) tuned by autosched next to PyTorch (cuBLAS / cuDNN, fp32, TF32 off), in one run.

    python benchmarks/bench_gpu.py [--trials 200] [--workloads matmul1024 conv2d matmul1024_fp16]
                                   [--policy evolutionary] [--out benchmarks/results]

``matmul1024_fp16`` is the tensor-core case (``matmul_mixed``: float16 operands, float32 sums and result)
against PyTorch's float16 matmul (cuBLAS on tensor cores, reduced-precision reductions off); it is not in
the default list.

Needs a CUDA GPU (and ``ptxas``); PyTorch is optional (without it only autosched's figures are printed).
For each workload: ``autosched.tune`` on the GPU for ``--trials`` candidates (generated space, local
workers, a fresh database), then the best kernel built again, checked against the CPU build and timed on
device-resident arrays, and the same operation through PyTorch timed the same way: batches of launches
back to back with one wait each, the median over a second, in three alternating rounds with a pause before
each block (each side's best median). The tuned kernel is also timed, in the same rounds, with its double
buffering turned the other way and its shared rows unpadded (where it has them), so that each structure's
worth on this GPU is a figure. The GPU's fp32 peak is measured by
``autosched.measure.peak.measure_gpu_peak``. Prints a table and writes ``gpu.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import alternating_medians

import autosched
from autosched.errors import ScheduleError
from autosched.runtime.cuda import cuda_available, device_info
from autosched.space.base import SpaceError
from autosched.te.trace import Trace

HERE = Path(__file__).resolve().parent
WORKLOADS = {
    "matmul1024": ("matmul", dict(M=1024, N=1024, K=1024)),
    "conv2d": ("conv2d", {}),  # 1x64x56x56, 64 filters 3x3, stride 1, padding 1
    "matmul1024_fp16": ("matmul_mixed", dict(M=1024, N=1024, K=1024)),  # tensor cores
}
DEFAULT_WORKLOADS = ["matmul1024", "conv2d"]


def median_time(fn, seconds: float = 1.0) -> float:
    """Median seconds per launch: ``fn(n)`` launches ``n`` times back to back and waits once; repeats of
    batches of about 10 ms, as many as fit in ``seconds``."""
    fn(3)
    t = time.perf_counter()
    fn(10)
    one = (time.perf_counter() - t) / 10
    number = max(1, int(0.01 / max(one, 1e-7)))
    ts = []
    for _ in range(max(10, int(seconds / max(one * number, 1e-6)))):
        t = time.perf_counter()
        fn(number)
        ts.append((time.perf_counter() - t) / number)
    return statistics.median(ts)


def torch_caller(name: str, ins: list[np.ndarray], params: dict):
    """The same operation through PyTorch on the GPU (fp32, TF32 off), as ``call(number)`` (that many
    launches and one wait), or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False  # float32 sums, as ours
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    xs = [torch.from_numpy(a).cuda() for a in ins]
    if name in ("matmul", "matmul_mixed"):
        op = lambda: torch.matmul(xs[0], xs[1])
    elif name == "conv2d":
        stride, padding = params.get("stride", 1), params.get("padding", 1)
        op = lambda: torch.nn.functional.conv2d(xs[0], xs[1], stride=stride, padding=padding)
    else:
        return None

    def call(number: int) -> None:
        for _ in range(number):
            op()
        torch.cuda.synchronize()

    return call


def bench(wl: str, trials: int, policy: str, dbdir: Path, arch: str) -> dict | None:
    name, params = WORKLOADS[wl]
    target = f"cuda -arch={arch}"
    task = autosched.Task(name, params, target=target)
    db = dbdir / f"{wl}.db"
    t0 = time.time()
    best = autosched.tune(task, trials, policy=policy, database=str(db), backend="local", seed=0)
    tune_s = time.time() - t0
    if best is None:  # the tuner logged why (every candidate failed, say): the other workloads still run
        print(f"{wl}: no candidate was measured in {tune_s:.0f} s; not timed", flush=True)
        return None
    cpu_task = autosched.Task(name, params)
    sch, args = task.apply(best.trace)
    mod = autosched.build(sch, args, target=target)
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal([int(d) for d in a.shape]).astype(a.dtype) for a in args[:-1]]
    out = np.zeros([int(d) for d in args[-1].shape], args[-1].dtype)
    mod(*ins, out)
    ref_sch, ref_args = cpu_task.default_schedule()
    ref = np.zeros_like(out)
    autosched.build(ref_sch, ref_args)(*ins, ref)
    err = float(np.max(np.abs(out - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
    fns = {"autosched": mod.entry_func.device_caller(ins + [out])}
    for label, trace in ablations(task, best.trace).items():  # the same kernel without one structure
        vmod = autosched.build(*task.apply(trace), target=target)
        vout = np.zeros_like(out)
        vmod(*ins, vout)
        if not np.allclose(vout, out, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(out)))):
            print(f"{wl}: the kernel {label} differs from the tuned one; not timed", flush=True)
            continue
        fns[label] = vmod.entry_func.device_caller(ins + [vout])
    torch_call = torch_caller(name, ins, params)
    if torch_call is not None:
        fns["torch"] = torch_call
    best = alternating_medians(fns, rounds=3, seconds=1.0, pause=0.3, timer=median_time)
    ours, theirs = best["autosched"], best.get("torch")
    flop = task.flop
    return {"workload": wl, "task": task.label, "trials": trials, "policy": policy, "tune_seconds": tune_s,
            "tensor_cores": "wmma.mma.sync" in mod.get_source("ptx"), "fp32": all(a.dtype == "float32" for a in args),
            "autosched_us": ours * 1e6, "autosched_gflops": flop / ours / 1e9, "max_rel_err": err,
            "torch_us": None if theirs is None else theirs * 1e6,
            "torch_gflops": None if theirs is None else flop / theirs / 1e9,
            "ablations_us": {k: v * 1e6 for k, v in best.items() if k not in ("autosched", "torch")}}


def ablations(task, trace) -> dict:
    """The tuned trace with one of the GPU space's structures turned the other way, by label: its shared
    copies double-buffered or not (the generated space's decision), and its padded rows unpadded."""
    out = {}
    steps = list(trace.steps)
    space = task.space("generated")
    try:
        point = space.point_of(trace)
    except SpaceError:
        point = None
    keys = [k for k in point or () if k.startswith("double_buffer/") or k.endswith("/double_buffer")]  # + WMMA
    if keys:
        on = any(point[k] for k in keys)
        try:
            flipped = space.generate({**point, **{k: not on for k in keys}})[0]
        except (ScheduleError, SpaceError) as e:  # doubled tiles over the block's shared memory, say
            print(f"{task.label}: double buffering {'off' if on else 'on'} is not a kernel ({e}); not timed")
            flipped = trace
        if flipped != trace:
            out["double buffering " + ("off" if on else "on")] = flipped
    if any(st.kind == "storage_align" for st in steps):
        out["rows unpadded"] = Trace([st for st in steps if st.kind != "storage_align"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS, choices=list(WORKLOADS))
    ap.add_argument("--policy", default="evolutionary")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    if not cuda_available():
        print("bench_gpu: no CUDA device here; run it on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    from autosched.measure.peak import measure_gpu_peak

    gpu, arch = device_info()
    peak = measure_gpu_peak().gflops
    print(f"{gpu} ({arch}): measured fp32 peak {peak:.0f} GFLOPS", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="autosched-bench-gpu-") as tmp:
        for wl in args.workloads:
            r = bench(wl, args.trials, args.policy, Path(tmp), arch)
            if r is None:
                continue
            rows.append(r)
            print(f"{wl}: tuned in {r['tune_seconds']:.0f} s, {r['autosched_us']:.1f} us "
                  f"({r['autosched_gflops']:.0f} GFLOPS), max rel err {r['max_rel_err']:.1e}", flush=True)
    for r in rows:
        for label, us in r["ablations_us"].items():
            print(f"{r['workload']}: tuned kernel {r['autosched_us']:.1f} us, with {label} {us:.1f} us "
                  f"({us / r['autosched_us']:.2f}x its time)")
    print("\n| workload | trials | autosched | PyTorch | autosched / PyTorch speed | autosched % of peak |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        torch_s = "n/a" if r["torch_us"] is None else f"{r['torch_us']:.1f} us ({r['torch_gflops']:.0f} GFLOPS)"
        ratio = "n/a" if r["torch_us"] is None else f"{r['torch_us'] / r['autosched_us']:.2f}x"
        share = f"{r['autosched_gflops'] / peak:.0%}" if r["fp32"] else "n/a (fp16)"
        tc = " (tensor cores)" if r["tensor_cores"] else ""
        print(f"| {r['task']}{tc} | {r['trials']} | {r['autosched_us']:.1f} us ({r['autosched_gflops']:.0f} GFLOPS) "
              f"| {torch_s} | {ratio} | {share} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps({"gpu": gpu, "arch": arch, "peak_gflops": peak, "rows": rows},
                                                  indent=1))
    return 0 if len(rows) == len(args.workloads) else 1  # (a workload with no measured candidate)


if __name__ == "__main__":
    sys.exit(main())
