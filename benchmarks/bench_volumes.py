"""3-D models (volumes and video) on autosched, untuned, and onnxruntime side by side in one run: one 3x3x3
convolution, a 3-D U-Net in nnU-Net's form and a video ResNet in R3D-18's form (tests/_volume_models.py, seeded
random weights, batch 1).

    python benchmarks/bench_volumes.py [--models conv3d unet3d r3d] [--threads 2] [--rounds 3] [--seconds 1]
                                       [--target llvm]

autosched runs a 3-D convolution as one 2-D convolution over the depth-unfolded data and a 3-D pool as a depth
reduction then a 2-D pool (``autosched/relay/op/nn/conv3d.py``). Each model is imported, built with default
schedules and checked against onnxruntime (the largest difference relative to the largest output); then all are
timed in alternating rounds (benchmarks/_timing.py), each side keeping its best median. Prints a markdown table
and the CPU; run it with nothing else running.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _onnx_sides import compare, onnx_sides  # noqa: E402

from _volume_models import VOLUME_MODELS  # noqa: E402
from autosched.target import Target  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(VOLUME_MODELS), choices=list(VOLUME_MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--target", default="llvm")
    args = ap.parse_args()
    import onnxruntime as ort

    logging.getLogger("autosched").setLevel(logging.WARNING)  # (each build's summary line)
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    print(f"default schedules for {args.target!r} on {Target('llvm').cpu.name}, onnxruntime {ort.__version__}, "
          f"{args.threads} thread(s)", flush=True)
    runs, builds = {}, {}
    for name in args.models:
        make, title = VOLUME_MODELS[name]
        model = make()
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        start = time.perf_counter()
        runs[title] = onnx_sides(model, {"x": x}, args.threads, args.target)
        builds[title] = time.perf_counter() - start
    print("\n| model | build (s) | autosched untuned (ms) | onnxruntime (ms) | autosched / onnxruntime "
          "| output error |")
    print("|---|---|---|---|---|---|")
    for title, a, o, err in compare(runs, args.rounds, args.seconds):
        print(f"| {title} | {builds[title]:.1f} | {a * 1e3:.1f} | {o * 1e3:.1f} | {a / o:.2f}x | {err:.1e} |",
              flush=True)


if __name__ == "__main__":
    main()
