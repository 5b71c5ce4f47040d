"""Row kernels of transformers (Softmax, LayerNormalization over the last axis) against onnxruntime, side by side in
one run.

    python benchmarks/bench_rows.py [--threads 1 2] [--rounds 6] [--seconds 0.5] [--target "llvm -mcpu=haswell"]

Each row is one ONNX node, imported, built with its default schedule and checked against onnxruntime once; both
sides are then timed in alternating rounds (benchmarks/_timing.py), each keeping its best median. The shapes:
BERT-base's attention scores (12 heads x 128 x 128), GPT-2's at 256 tokens, a classifier's 1000 classes over 128
rows, and layer norm over BERT's 768 features. ``--target`` builds for another ISA of this host (onnxruntime
keeps the host's). Prints the CPU. Run it on a quiet machine.
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

ROWS: dict[str, tuple[str, tuple[int, ...]]] = {
    "softmax_bert_scores": ("Softmax", (12, 128, 128)),
    "softmax_gpt2_scores_256": ("Softmax", (12, 256, 256)),
    "softmax_1000_classes": ("Softmax", (128, 1000)),
    "softmax_768": ("Softmax", (64, 768)),
    "layer_norm_bert_128x768": ("LayerNormalization", (128, 768)),
}


def model(op: str, shape: tuple[int, ...]):
    """One node over the last axis (layer norm with random scale and bias initializers)."""
    from onnx import TensorProto, helper

    width = shape[-1]
    rng = np.random.default_rng(0)
    inits = []
    if op == "LayerNormalization":
        inits = [helper.make_tensor(n, TensorProto.FLOAT, [width], rng.standard_normal(width).astype("float32"))
                 for n in ("g", "b")]
        node = helper.make_node(op, ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)
    else:
        node = helper.make_node(op, ["x"], ["y"], axis=-1)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--target", default="llvm")
    args = ap.parse_args()
    import onnxruntime as ort

    print(f"default schedules for {args.target!r} on {Target('llvm').cpu.name}, onnxruntime {ort.__version__}")
    for threads in args.threads:
        os.environ["AUTOSCHED_NUM_THREADS"] = str(threads)
        for name, (op, shape) in ROWS.items():
            m = model(op, shape)
            mod, params = relay.frontend.from_onnx(m)
            gm = GraphModule(*relay.build(mod, target=args.target, params=params))
            x = (np.random.default_rng(1).standard_normal(shape) * 3).astype("float32")
            gm.set_input("x", x)
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            gm.run()
            np.testing.assert_allclose(gm.get_output(0), sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
            best = alternating_medians({"autosched": gm.run, "onnxruntime": lambda: sess.run(None, {"x": x})},
                                       rounds=args.rounds, seconds=args.seconds)
            print(f"{threads} thread(s) {name:26s} {list(shape)}: autosched {best['autosched'] * 1e6:8.1f} us, "
                  f"onnxruntime {best['onnxruntime'] * 1e6:8.1f} us, {best['autosched'] / best['onnxruntime']:.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()
