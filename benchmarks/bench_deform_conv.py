"""Deformable convolutions (ONNX DeformConv, opset 19) against onnxruntime, side by side in one run.

    python benchmarks/bench_deform_conv.py [--threads 2] [--rounds 4] [--seconds 1.0]

Each row is one DeformConv node with a bias (and, for the DCNv2 rows, a mask), imported, built for this CPU with
the default schedule and checked against onnxruntime once (benchmarks/_onnx_sides.py); both sides are then
timed in alternating rounds (benchmarks/_timing.py), each keeping its best median. Offsets are a few pixels
(samples off the image too). Prints the CPU. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _onnx_sides import compare, onnx_sides  # noqa: E402

from autosched.target import Target  # noqa: E402

# (C, O, H = W, kernel, offset groups, mask): the size of the task's check, a ResNet stage-3 DCN layer (v2, as
# DCNv2 places them) and a stage-4 one
ROWS = {"dcn_64_28": (64, 64, 28, 3, 1, False), "dcnv2_256_14": (256, 256, 14, 3, 1, True),
        "dcnv2_512_7_og4": (512, 512, 7, 3, 4, True)}


def model(c: int, o: int, hw: int, k: int, og: int, mask: bool):
    """One DeformConv (3x3, pads 1) with a seeded weight and bias; inputs x, offset (and mask)."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((o, c, k, k)) * 0.05).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw]),
           helper.make_tensor_value_info("offset", TensorProto.FLOAT, [1, 2 * og * k * k, hw, hw])]
    if mask:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, og * k * k, hw, hw]))
    node = helper.make_node("DeformConv", ["x", "w", "offset", "b"] + (["mask"] if mask else []), ["y"],
                            kernel_shape=[k, k], pads=[1, 1, 1, 1], offset_group=og)
    graph = helper.make_graph([node], "deform_conv", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9  # (what onnxruntime wants with opset 19)
    return m


def feeds(c: int, o: int, hw: int, k: int, og: int, mask: bool) -> dict[str, np.ndarray]:
    """The data, offsets of a few pixels (samples off the image too) and the mask (DCNv2 rows)."""
    rng = np.random.default_rng(1)
    out = {"x": rng.standard_normal((1, c, hw, hw)).astype(np.float32),
           "offset": (rng.standard_normal((1, 2 * og * k * k, hw, hw)) * 2).astype(np.float32)}
    if mask:
        out["mask"] = rng.uniform(0, 1, (1, og * k * k, hw, hw)).astype(np.float32)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    os.environ.setdefault("AUTOSCHED_NUM_THREADS", str(args.threads))
    print(f"batch 1, {args.threads} threads, default schedules, on {Target('llvm').cpu.name}, onnxruntime "
          f"{ort.__version__}")
    runs = {name: onnx_sides(model(*shape), feeds(*shape), args.threads, "llvm") for name, shape in ROWS.items()}
    for name, ours, theirs, err in compare(runs, args.rounds, args.seconds):
        c, o, hw, k, og, mask = ROWS[name]
        print(f"{name:16s} {c}->{o} at {hw}x{hw}, {k}x{k}, offset_group {og}{', mask' if mask else ''}: autosched "
              f"{ours * 1e3:.3f} ms, onnxruntime {theirs * 1e3:.3f} ms, {ours / theirs:.2f}x (largest difference "
              f"{err:.1e} of the largest output)")


if __name__ == "__main__":
    main()
