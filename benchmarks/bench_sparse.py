"""Pruned weights: a transformer's feed-forward block (``x @ W1 -> relu -> @ W2``, BERT-base's 768 -> 3072 ->
768, 128 tokens) whose weights keep a fraction of their 16 x 1 blocks, run by autosched as sparse layers
(``relay.data_dep_optimization``: ``simplify_fc_transpose`` then ``bsr_dense.convert``), by autosched as the
dense model, and by onnxruntime (dense: it has no sparse kernel for this), side by side in one run.

    python benchmarks/bench_sparse.py [--density 0.05 0.1 0.2 0.3] [--block 16 1] [--threads 2] [--rounds 3]
                                      [--seconds 1]

Each model is one ONNX graph (seeded weights); the three sides are checked against each other and timed in
alternating rounds (benchmarks/_timing.py), each keeping its best median. Untuned: default schedules. Prints
a markdown table and the CPU; run it with nothing else running.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _timing import alternating_medians  # noqa: E402

from autosched import relay  # noqa: E402
from autosched.relay import data_dep_optimization as ddo  # noqa: E402
from autosched.relay.ir.expr import IRModule  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402

TOKENS, HIDDEN, INNER = 128, 768, 3072


def pruned(rng: np.random.Generator, shape: tuple[int, int], density: float, block: tuple[int, int]) -> np.ndarray:
    """A [in, out] MatMul weight whose [out, in] transpose keeps about ``density`` of its ``block`` blocks."""
    out, inp = shape[1], shape[0]
    keep = rng.random((out // block[0], inp // block[1])) < density
    mask = np.repeat(np.repeat(keep, block[0], axis=0), block[1], axis=1).T
    return (rng.standard_normal(shape) * mask / np.sqrt(inp * density)).astype(np.float32)


def ffn_model(w1: np.ndarray, w2: np.ndarray):
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W2"], ["y"])]
    graph = helper.make_graph(
        nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [TOKENS, HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [TOKENS, HIDDEN])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def runner(mod: IRModule, params: dict, x: np.ndarray) -> tuple[GraphModule, np.ndarray]:
    gm = GraphModule(*relay.build(mod, target="llvm", params=params))
    gm.set_input(x=x)
    gm.run()
    return gm, np.asarray(gm.get_output(0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--density", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.3])
    ap.add_argument("--block", type=int, nargs=2, default=[16, 1])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    import onnxruntime as ort

    logging.getLogger("autosched").setLevel(logging.WARNING)  # (each build's summary line)
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    block = tuple(args.block)
    print(f"feed-forward {TOKENS}x{HIDDEN} -> {INNER} -> {HIDDEN}, {block[0]}x{block[1]} blocks, on "
          f"{Target('llvm').cpu.name}, onnxruntime {ort.__version__}, {args.threads} thread(s), untuned", flush=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
    fns, errors = {}, {}
    for density in args.density:
        model = ffn_model(pruned(rng, (HIDDEN, INNER), density, block), pruned(rng, (INNER, HIDDEN), density, block))
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": x})[0]
        mod, params = relay.frontend.from_onnx(model, {"x": x.shape})
        dense, dense_out = runner(mod, params, x)
        func, sparams = ddo.simplify_fc_transpose.convert(mod["main"], params)
        func, sparams = ddo.bsr_dense.convert(func, sparams, block, sparsity_threshold=1.0 - 2 * density)
        sparse, sparse_out = runner(IRModule.from_expr(func), sparams, x)
        scale = float(np.abs(ref).max())
        errors[density] = max(float(np.abs(o - ref).max()) for o in (dense_out, sparse_out)) / scale
        fns[f"sparse {density}"] = sparse.run
        fns[f"dense {density}"] = dense.run
        fns[f"onnxruntime {density}"] = lambda sess=sess: sess.run(None, {"x": x})
    best = alternating_medians(fns, rounds=args.rounds, seconds=args.seconds)
    print("\n| blocks kept | autosched sparse (ms) | autosched dense (ms) | onnxruntime dense (ms) "
          "| sparse / onnxruntime | sparse / dense | output error |")
    print("|---|---|---|---|---|---|---|")
    for density in args.density:
        s, d, o = (best[f"{k} {density}"] for k in ("sparse", "dense", "onnxruntime"))
        print(f"| {density:.0%} | {s * 1e3:.2f} | {d * 1e3:.2f} | {o * 1e3:.2f} | {s / o:.2f}x | {s / d:.2f}x "
              f"| {errors[density]:.1e} |", flush=True)


if __name__ == "__main__":
    main()
