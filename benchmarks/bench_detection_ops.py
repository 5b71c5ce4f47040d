"""The region-of-interest ops of a two-stage detector's head (ONNX RoiAlign and MaxRoiPool) against onnxruntime,
side by side in one run.

    python benchmarks/bench_detection_ops.py [--threads 2] [--rounds 4] [--seconds 1.0] [--rois 1000]

The shapes of a Faster R-CNN head at 800 x 1088: 1000 proposals pooled to 7 x 7 from the 256-channel stride-16
feature map (50 x 68). Each row is one node, imported, built for this CPU with default schedules and checked
against onnxruntime once; both sides are then timed in alternating rounds (benchmarks/_timing.py), each keeping
its best median. Prints the CPU. Run it on a quiet machine.
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

from autosched.target import Target  # noqa: E402

CHANNELS, HEIGHT, WIDTH, STRIDE = 256, 50, 68, 16
# row -> (op, attributes): torchvision's MultiScaleRoIAlign (sampling_ratio 2, aligned=False), the ONNX default
# (an adaptive grid, half_pixel), Fast R-CNN's RoIPool
ROWS = {
    "roi_align_ratio2": ("RoiAlign", dict(output_height=7, output_width=7, spatial_scale=1 / STRIDE,
                                          sampling_ratio=2, coordinate_transformation_mode="output_half_pixel")),
    "roi_align_adaptive": ("RoiAlign", dict(output_height=7, output_width=7, spatial_scale=1 / STRIDE)),
    "max_roi_pool": ("MaxRoiPool", dict(pooled_shape=[7, 7], spatial_scale=1 / STRIDE)),
}


def model(op: str, rois: int, attrs: dict):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, HEIGHT, WIDTH])]
    if op == "RoiAlign":
        inputs += [helper.make_tensor_value_info("rois", TensorProto.FLOAT, [rois, 4]),
                   helper.make_tensor_value_info("batch", TensorProto.INT64, [rois])]
    else:
        inputs.append(helper.make_tensor_value_info("rois", TensorProto.FLOAT, [rois, 5]))
    node = helper.make_node(op, [i.name for i in inputs], ["y"], **attrs)
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def inputs(op: str, rois: int) -> dict[str, np.ndarray]:
    """A feature map and proposals of 16 to 400 pixels a side inside the 1088 x 800 image."""
    rng = np.random.default_rng(0)
    x1, y1 = rng.uniform(0, WIDTH * STRIDE - 16, rois), rng.uniform(0, HEIGHT * STRIDE - 16, rois)
    boxes = np.stack([x1, y1, np.minimum(x1 + rng.uniform(16, 400, rois), WIDTH * STRIDE),
                      np.minimum(y1 + rng.uniform(16, 400, rois), HEIGHT * STRIDE)], 1).astype(np.float32)
    feed = {"x": rng.standard_normal((1, CHANNELS, HEIGHT, WIDTH)).astype(np.float32)}
    if op == "RoiAlign":
        feed.update(rois=boxes, batch=np.zeros(rois, np.int64))
    else:
        feed["rois"] = np.concatenate([np.zeros((rois, 1), np.float32), boxes], 1)
    return feed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rois", type=int, default=1000)
    args = ap.parse_args()
    os.environ.setdefault("AUTOSCHED_NUM_THREADS", str(args.threads))
    print(f"{args.rois} boxes over 1x{CHANNELS}x{HEIGHT}x{WIDTH}, 7x7 bins, {args.threads} threads, default "
          f"schedules, on {Target('llvm').cpu.name}, onnxruntime {ort.__version__}")
    runs = {name: onnx_sides(model(op, args.rois, attrs), inputs(op, args.rois), args.threads, "llvm")
            for name, (op, attrs) in ROWS.items()}
    for name, ours, theirs, err in compare(runs, args.rounds, args.seconds):
        print(f"{name:20s} autosched {ours * 1e3:8.2f} ms, onnxruntime {theirs * 1e3:8.2f} ms, "
              f"{ours / theirs:.2f}x (largest difference {err:.1e} of the largest output)")


if __name__ == "__main__":
    main()
