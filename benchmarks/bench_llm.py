"""A Llama-style decoder as onnxruntime's model builder writes it (GroupQueryAttention with rotary and a KV cache,
SimplifiedLayerNormalization, a SiLU MLP; tests/_llm_models.py, 4 layers of hidden 512, 8 query heads on 2
key/value heads), on autosched and onnxruntime side by side in one run: the prompt (``--prompt`` tokens) and one
generation step after a cache of ``--prompt - 1`` tokens, with fp32 weights and with 4-bit weights (MatMulNBits,
``accuracy_level`` 4 as the builder writes it).

    python benchmarks/bench_llm.py [--prompt 128] [--threads 2] [--rounds 6] [--seconds 1] [--target llvm]

autosched builds each model with default schedules (static shapes: one build per phase) and checks its logits
against onnxruntime's (the largest difference relative to the largest logit; with 4-bit weights onnxruntime
quantizes the activations to int8 at accuracy_level 4, autosched dequantizes the weights and computes in fp32,
so they sit ~1e-2 apart); then both are timed in alternating rounds (benchmarks/_timing.py), each keeping its
best median. Prints the CPU. Run it with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _timing import alternating_medians  # noqa: E402

from _llm_models import LLAMA_SMALL, llm_inputs, make_llama  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402


def sides(model, threads: int, target: str) -> dict:
    import onnxruntime as ort

    inputs = llm_inputs(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3  # (its shape inference takes the cache's length for present's: a warning per output)
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)[0]
    mod, params = relay.frontend.from_onnx(model)
    gm = GraphModule(*relay.build(mod, target=target, params=params))
    gm.set_input(**inputs)
    gm.run()
    err = float(np.abs(gm.get_output(0) - ref).max() / np.abs(ref).max())
    return {"autosched": gm.run, "onnxruntime": lambda: sess.run(None, inputs), "rel_err": err}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--target", default="llvm")
    args = ap.parse_args()
    import onnxruntime as ort

    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    print(f"default schedules for {args.target!r} on {Target('llvm').cpu.name}, onnxruntime {ort.__version__}, "
          f"{args.threads} thread(s); {LLAMA_SMALL}")
    phases = {"prompt": {"seq": args.prompt, "past": 0}, "step": {"seq": 1, "past": args.prompt - 1}}
    for weights, extra in (("fp32", {}), ("int4", {"bits": 4, "accuracy_level": 4})):
        runs = {phase: sides(make_llama(**LLAMA_SMALL, **shape, **extra), args.threads, args.target)
                for phase, shape in phases.items()}
        fns = {f"{lib} {phase}": run[lib] for phase, run in runs.items() for lib in ("autosched", "onnxruntime")}
        best = alternating_medians(fns, rounds=args.rounds, seconds=args.seconds)
        for phase, run in runs.items():
            a, o = best[f"autosched {phase}"], best[f"onnxruntime {phase}"]
            print(f"{weights} {phase:6s}: autosched {a * 1e3:8.3f} ms, onnxruntime {o * 1e3:8.3f} ms, {a / o:.2f}x "
                  f"(largest difference {run['rel_err']:.1e} of the largest logit)", flush=True)


if __name__ == "__main__":
    main()
