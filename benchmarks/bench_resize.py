"""Resizing against onnxruntime, side by side in one run: ONNX Resize (imported: gathers at import-time indices
and weights) and the same resize written with TVM's ``relay.image.resize2d`` (indices and weights computed per
output row and column at run time).

    python benchmarks/bench_resize.py [--threads 2] [--rounds 4] [--seconds 1.0]

Rows: a segmentation head's bilinear x4 upsampling of 21 class maps (DeepLab's 1x21x56x56 to 224x224), a
super-resolution model's bicubic x2 of an image (1x3x256x256 to 512x512) and a feature map's bicubic x2 with
exclude_outside (1x64x28x28). Each is imported or built for this CPU with default schedules and checked against
onnxruntime once; the sides are then timed in alternating rounds (benchmarks/_timing.py), each keeping its best
median. Prints the CPU. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _onnx_sides import compare, onnx_sides  # noqa: E402

from autosched import relay  # noqa: E402
from autosched.runtime.graph_module import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402

# row -> (input shape, output H and W, ONNX Resize attributes)
ROWS = {
    "linear_x4_seg_head": ((1, 21, 56, 56), (224, 224), dict(mode="linear")),
    "cubic_x2_image": ((1, 3, 256, 256), (512, 512), dict(mode="cubic")),
    "cubic_x2_exclude": ((1, 64, 28, 28), (56, 56), dict(mode="cubic", exclude_outside=1)),
}


def model(shape: tuple, size: tuple, attrs: dict):
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [*shape[:2], *size])
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[sizes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def relay_side(shape: tuple, size: tuple, attrs: dict, x: np.ndarray, ref: np.ndarray) -> tuple:
    """The same resize as ``relay.image.resize2d`` (ONNX's defaults: half_pixel, cubic a = -0.75), built and
    checked: (run, largest difference relative to the largest reference value)."""
    v = relay.var("x", shape=shape)
    y = relay.image.resize2d(v, size, method=attrs["mode"], cubic_alpha=-0.75,
                             cubic_exclude=attrs.get("exclude_outside", 0))
    gm = GraphModule(*relay.build(relay.Function([v], y), target="llvm"))
    gm.set_input("x", x)
    gm.run()
    return gm.run, float(np.abs(np.asarray(gm.get_output(0)) - ref).max() / np.abs(ref).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    os.environ.setdefault("AUTOSCHED_NUM_THREADS", str(args.threads))
    print(f"{args.threads} threads, default schedules, on {Target('llvm').cpu.name}, onnxruntime {ort.__version__}")
    runs = {}
    for name, (shape, size, attrs) in ROWS.items():
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        runs[f"{name} (ONNX import)"] = side = onnx_sides(model(shape, size, attrs), {"x": x}, args.threads, "llvm")
        ref = np.asarray(side["onnxruntime"]()[0])
        fn, err = relay_side(shape, size, attrs, x, ref)
        runs[f"{name} (relay.image)"] = {"autosched": fn, "onnxruntime": side["onnxruntime"], "rel_err": err}
    for name, ours, theirs, err in compare(runs, args.rounds, args.seconds):
        print(f"{name:36s} autosched {ours * 1e3:8.3f} ms, onnxruntime {theirs * 1e3:8.3f} ms, "
              f"{ours / theirs:.2f}x (largest difference {err:.1e} of the largest output)")


if __name__ == "__main__":
    main()
