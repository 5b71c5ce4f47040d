"""A Llama-style decoder as onnxruntime's model builder writes it (GroupQueryAttention with rotary and a KV cache,
SimplifiedLayerNormalization, a SiLU MLP; tests/_llm_models.py, 4 layers of hidden 512, 8 query heads on 2
key/value heads), on autosched and onnxruntime side by side in one run: the prompt (``--prompt`` tokens) and one
generation step after a cache of ``--prompt - 1`` tokens, with fp32 weights and with 4-bit weights (MatMulNBits,
``accuracy_level`` 4 as the builder writes it).

    python benchmarks/bench_llm.py [--prompt 128] [--threads 2] [--rounds 6] [--seconds 1] [--target llvm]

autosched builds each model with default schedules (static shapes: one build per phase) and checks its logits
against onnxruntime's (the largest difference relative to the largest logit; with 4-bit weights onnxruntime
quantizes the activations to int8 at accuracy_level 4, autosched dequantizes the 4-bit weights in its kernels
and computes in fp32, so they sit ~1e-2 apart); then both are timed in alternating rounds
(benchmarks/_timing.py), each keeping its best median. Prints the CPU. Run it with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _onnx_sides import compare, onnx_sides  # noqa: E402

from _llm_models import LLAMA_SMALL, llm_inputs, make_llama  # noqa: E402
from autosched.target import Target  # noqa: E402


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
        models = {phase: make_llama(**LLAMA_SMALL, **shape, **extra) for phase, shape in phases.items()}
        runs = {phase: onnx_sides(m, llm_inputs(m), args.threads, args.target) for phase, m in models.items()}
        for phase, a, o, err in compare(runs, args.rounds, args.seconds):
            print(f"{weights} {phase:6s}: autosched {a * 1e3:8.3f} ms, onnxruntime {o * 1e3:8.3f} ms, {a / o:.2f}x "
                  f"(largest difference {err:.1e} of the largest logit)", flush=True)


if __name__ == "__main__":
    main()
