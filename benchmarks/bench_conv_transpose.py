"""Transposed convolutions (ONNX ConvTranspose, the upsampling of decoders and U-Nets) against onnxruntime,
side by side in one run.

    python benchmarks/bench_conv_transpose.py [--threads 2] [--rounds 4] [--seconds 1.0]

Each row is one ConvTranspose node with a bias, imported, built for this CPU with default schedules and checked
against onnxruntime once; both sides are then timed in alternating rounds (benchmarks/_timing.py), each keeping
its best median. Prints the CPU. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import alternating_medians  # noqa: E402

from autosched import relay  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402

# (C_in, C_out, H = W, kernel, stride, pad): a U-Net's 2x2/2, a DCGAN- or segmentation-decoder's 4x4/2 pad 1,
# a 3x3/2 pad 1 with output_padding 1 (PyTorch's ConvTranspose2d(..., 3, 2, 1, output_padding=1))
ROWS = {"unet_2x2_s2": (256, 128, 28, 2, 2, 0, 0), "decoder_4x4_s2": (128, 64, 56, 4, 2, 1, 0),
        "decoder_3x3_s2": (64, 32, 112, 3, 2, 1, 1)}


def model(cin: int, cout: int, hw: int, k: int, s: int, p: int, a: int):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cin, cout, k, k)) * 0.05).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[s, s],
                            pads=[p] * 4, output_padding=[a, a])
    graph = helper.make_graph([node], "conv_transpose",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # (what onnxruntime releases of the last years all read)
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    os.environ.setdefault("AUTOSCHED_NUM_THREADS", str(args.threads))
    import onnxruntime as ort

    print(f"batch 1, {args.threads} threads, default schedules, on {Target('llvm').cpu.name}, onnxruntime "
          f"{ort.__version__}")
    for name, shape in ROWS.items():
        m = model(*shape)
        mod, params = relay.frontend.from_onnx(m)
        gm = GraphModule(*relay.build(mod, target="llvm", params=params))
        x = np.random.default_rng(1).standard_normal((1, shape[0], shape[2], shape[2])).astype(np.float32)
        gm.set_input("x", x)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        gm.run()
        np.testing.assert_allclose(gm.get_output(0), sess.run(None, {"x": x})[0], rtol=1e-3, atol=1e-3)
        best = alternating_medians({"autosched": gm.run, "onnxruntime": lambda: sess.run(None, {"x": x})},
                                   rounds=args.rounds, seconds=args.seconds)
        cin, cout, hw, k, s, p, a = shape
        print(f"{name:16s} {cin}->{cout} at {hw}x{hw}, {k}x{k}/{s} pad {p} output_padding {a}: autosched "
              f"{best['autosched'] * 1e3:.3f} ms, onnxruntime {best['onnxruntime'] * 1e3:.3f} ms, "
              f"{best['autosched'] / best['onnxruntime']:.2f}x")


if __name__ == "__main__":
    main()
