"""What the cuda space's row-padding rule does, counted without a GPU: for sampled candidates of a few
workloads, how many the rule pads, their shared-memory passes (``autosched.tir.banks``) with and without the
padding, and what the rule costs the generation of a candidate.

    python benchmarks/bench_gpu_banks.py [--samples 60] [--arch sm_90]

The passes are the static model's (the first warp of a block, a few sampled iterations), counted on the
loops before partitioning as the rule counts them; whether a padding pays on a GPU is measured there
(``benchmarks/bench_gpu.py`` times a tuned kernel with its padding removed).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import autosched
from autosched.space.gpu_rules import GPU_RULES, GPUPadSharedRows
from autosched.space.sketch import GeneratedSpace
from autosched.te.trace import Trace
from autosched.tir.banks import shared_passes
from autosched.tir.lower import lower

WORKLOADS = {
    "matmul 1024": ("matmul", dict(M=1024, N=1024, K=1024)),
    "conv2d NHWC 256x14x14": ("conv2d", dict(H=14, W=14, CI=256, CO=256, layout="NHWC")),
    "conv2d NCHW 64x56x56": ("conv2d", dict(H=56, W=56, CI=64, CO=64, layout="NCHW")),
    "conv2d NCHW 256x14x14": ("conv2d", dict(H=14, W=14, CI=256, CO=256, layout="NCHW")),
}


def generation_ms(space, points: list) -> float:
    t = time.perf_counter()
    for p in points:
        space.generate(p)
    return (time.perf_counter() - t) / len(points) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    print("| workload | padded | passes unpadded | padded | conflict-free | ms per candidate without the rule | "
          "with |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, (name, params) in WORKLOADS.items():
        task = autosched.Task(name, params, target=f"cuda -arch={args.arch}")
        space = task.space("generated")
        traces = space.sample(args.samples, np.random.default_rng(0))
        padded, before, after, best = 0, 0, 0, 0
        for trace in traces:
            if not any(step.kind == "storage_align" for step in trace.steps):
                continue
            padded += 1
            bare = Trace([step for step in trace.steps if step.kind != "storage_align"])
            a = shared_passes(lower(*task.apply(bare), partition=False), task.target.gpu)
            b = shared_passes(lower(*task.apply(trace), partition=False), task.target.gpu)
            before += sum(p for p, _ in a.values())
            after += sum(p for p, _ in b.values())
            best += sum(q for _, q in a.values())
        points = [space.point_of(t) for t in traces[:20]]
        without = GeneratedSpace(task, rules=[r for r in GPU_RULES if not isinstance(r, GPUPadSharedRows)])
        ms_without, ms_with = generation_ms(without, points), generation_ms(space, points)
        print(f"| {label} | {padded} of {len(traces)} | {before} | {after} | {best} | {ms_without:.1f} | "
              f"{ms_with:.1f} |", flush=True)


if __name__ == "__main__":
    main()
