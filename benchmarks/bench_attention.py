"""ONNX Attention (opset 23, what torch.onnx writes for scaled_dot_product_attention) against onnxruntime, side by
side in one run.

    python benchmarks/bench_attention.py [--threads 2] [--rounds 4] [--seconds 1.0]

Each row is one Attention node, imported, built for this CPU with default schedules and checked against
onnxruntime once; both sides are then timed in alternating rounds (benchmarks/_timing.py), each keeping its best
median. Prints the CPU. Run it on a quiet machine.
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

# name -> (graph inputs as (name, shape), attributes): BERT-base self-attention over 128 tokens (4-D heads); a
# GPT-2 block's causal attention over 256; a grouped-query prefill (16 query heads over 4 key/value heads, 3-D
# inputs); one LLaMA-style decode step (32 over 8 heads of 128) against a KV cache of 511 tokens
ROWS: dict[str, tuple[list[tuple[str, tuple[int, ...]]], dict]] = {
    "bert_base_128": ([("q", (1, 12, 128, 64)), ("k", (1, 12, 128, 64)), ("v", (1, 12, 128, 64))], {}),
    "gpt2_causal_256": ([("q", (1, 12, 256, 64)), ("k", (1, 12, 256, 64)), ("v", (1, 12, 256, 64))],
                        {"is_causal": 1}),
    "gqa_prefill_128": ([("q", (1, 128, 16 * 64)), ("k", (1, 128, 4 * 64)), ("v", (1, 128, 4 * 64))],
                        {"is_causal": 1, "q_num_heads": 16, "kv_num_heads": 4}),
    "gqa_decode_cache_511": ([("q", (1, 32, 1, 128)), ("k", (1, 8, 1, 128)), ("v", (1, 8, 1, 128)),
                              ("", ()), ("pk", (1, 8, 511, 128)), ("pv", (1, 8, 511, 128))], {"is_causal": 1}),
}


def model(inputs: list[tuple[str, tuple[int, ...]]], attrs: dict):
    """One Attention node; with a KV cache it also returns the updated cache (onnxruntime requires it)."""
    from onnx import TensorProto, helper

    outs = ["y", "present_key", "present_value"] if any(n == "pk" for n, _ in inputs) else ["y"]
    node = helper.make_node("Attention", [n for n, _ in inputs], outs, **attrs)
    graph = helper.make_graph([node], "attention",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs if n],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
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
    for name, (inputs, attrs) in ROWS.items():
        m = model(inputs, attrs)
        mod, params = relay.frontend.from_onnx(m)
        gm = GraphModule(*relay.build(mod, target="llvm", params=params))
        rng = np.random.default_rng(1)
        feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in inputs if n}
        for n, x in feeds.items():
            gm.set_input(n, x)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        gm.run()
        np.testing.assert_allclose(gm.get_output(0), sess.run(None, feeds)[0], rtol=1e-4, atol=1e-5)
        best = alternating_medians({"autosched": gm.run, "onnxruntime": lambda: sess.run(None, feeds)},
                                   rounds=args.rounds, seconds=args.seconds)
        print(f"{name:22s} {' '.join(f'{n}{list(s)}' for n, s in inputs if n)}: autosched "
              f"{best['autosched'] * 1e3:.3f} ms, onnxruntime {best['onnxruntime'] * 1e3:.3f} ms, "
              f"{best['autosched'] / best['onnxruntime']:.2f}x")


if __name__ == "__main__":
    main()
