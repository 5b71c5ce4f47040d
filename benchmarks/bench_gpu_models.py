"""Whole models on a GPU: ResNet-50 (batch 1, 224 x 224), a BERT-base-shaped encoder (12 layers, d_model 768,
sequence 128, padding mask) and a GPT-2-small-shaped decoder (12 layers, sequence 64, causal mask, cache-free)
built by ``relay.build(target="cuda")`` with the default GPU schedules (untuned), against PyTorch eager on the
same GPU.

    python benchmarks/bench_gpu_models.py [--models resnet50 bert_base gpt2_small] [--rounds 4] [--seconds 0.75]
                                          [--arch sm_90] [--json out.json] [--profile K]
                                          [--database tuned.db] [--save-onnx DIR]

``--database`` builds with the records of ``autosched tune --model M.onnx --target cuda`` (``--save-onnx``
writes the ONNX files to tune).

The models are the ones ``benchmarks/bench_e2e.py`` times on the CPU (``tests/_onnx_models.make_resnet50``,
``tests/_transformer_models`` with ``BERT_BASE`` / ``GPT2_SMALL``: seeded random weights, fp32). autosched's
output is checked against onnxruntime on the CPU (largest difference relative to the output's largest
magnitude, within 1e-4). PyTorch runs its own module of the same architecture and shapes (torchvision's
resnet50; ``torch.nn.TransformerEncoderLayer`` stacks: post-norm with GELU and a key-padding mask for BERT,
pre-norm with tanh-GELU, a causal mask and a tied 50257-token head for GPT-2) with seeded random weights, in
eval mode under ``torch.inference_mode()``, TF32 off. Both sides read inputs already on the GPU and wait for the
GPU after each call; they are timed in alternating rounds, each block after a 0.3 s pause, and each side's
best round median is kept (``benchmarks/_timing.py``). Each model's part takes well under a minute on an H100
(BERT-base's ONNX graph takes most of it). Without a CUDA device it exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from _timing import alternating_medians  # noqa: E402

import autosched  # noqa: E402

MODELS = ("resnet50", "bert_base", "gpt2_small")


# ----------------------------------------------------------------------------------------- the ONNX models
def onnx_model(name: str):
    """(model, inputs) of the CPU benchmark's models."""
    import _onnx_models
    import _transformer_models as T

    if name == "resnet50":
        model = _onnx_models.make_resnet50(image=224)
        return model, {"data": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")}
    make, sizes = (T.make_encoder, T.BERT_BASE) if name == "bert_base" else (T.make_decoder, T.GPT2_SMALL)
    model = make(**sizes)
    return model, T.token_inputs(model, sizes["seq"], sizes["vocab"])


# ----------------------------------------------------------------------------------------- PyTorch's side
def torch_model(name: str, torch):
    """PyTorch's module of the same architecture and shapes (seeded random weights) and its call on
    ``inputs`` (numpy) moved to the GPU once; None and the reason when it cannot be built here."""
    import _transformer_models as T

    torch.manual_seed(0)
    nn = torch.nn
    if name == "resnet50":
        try:
            import torchvision
        except ImportError:
            return None, "torchvision is not installed"
        return torchvision.models.resnet50(weights=None), None
    sizes = T.BERT_BASE if name == "bert_base" else T.GPT2_SMALL
    d, heads, ffn, layers, vocab, seq = (sizes[k] for k in ("d_model", "heads", "ffn", "layers", "vocab", "seq"))
    gpt = name == "gpt2_small"

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            act = (lambda x: nn.functional.gelu(x, approximate="tanh")) if gpt else "gelu"
            layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation=act, batch_first=True,
                                               norm_first=gpt)
            self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            if not gpt:
                self.pool = nn.Linear(d, d)
                self.cls = nn.Linear(d, 2)

        def forward(self, ids, mask=None):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.tok(ids) + self.pos(pos)[None]
            if gpt:
                causal = torch.triu(torch.full((ids.shape[1], ids.shape[1]), float("-inf"), device=ids.device), 1)
                x = self.norm(self.layers(x, mask=causal, is_causal=True))
                return x @ self.tok.weight.T
            x = self.layers(self.norm(x), src_key_padding_mask=mask == 0)
            return self.cls(torch.tanh(self.pool(x[:, 0])))

    return Model(), None


def torch_call(name: str, inputs: dict, torch):
    model, why = torch_model(name, torch)
    if model is None:
        return None, why
    model = model.cuda().eval()
    xs = [torch.from_numpy(v).cuda() for v in inputs.values()]

    def call():
        with torch.inference_mode():
            model(*xs)
        torch.cuda.synchronize()

    call()
    return call, None


# ----------------------------------------------------------------------------------------- one model
def bench(name: str, args, torch) -> dict:
    import onnxruntime as ort

    from autosched import relay
    from autosched.runtime.graph_executor import GraphModule

    t0 = time.perf_counter()
    model, inputs = onnx_model(name)
    t_onnx = time.perf_counter() - t0
    if args.save_onnx:
        args.save_onnx.mkdir(parents=True, exist_ok=True)
        (args.save_onnx / f"{name}.onnx").write_bytes(model.SerializeToString())
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)[0]
    del sess
    mod, params = relay.frontend.from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    del model
    t1 = time.perf_counter()
    target = f"cuda -arch={args.arch}" if args.arch else "cuda"
    if args.database:  # each kernel with its best record there (autosched tune --model ... --target cuda)
        with autosched.apply_history_best(args.database):
            graph_json, lib, params = relay.build(mod, target=target, params=params)
    else:
        graph_json, lib, params = relay.build(mod, target=target, params=params)
    t_build = time.perf_counter() - t1
    m = GraphModule(graph_json, lib, params)
    for k, v in inputs.items():
        m.set_input(k, v)  # copied to the GPU once: every timed run reads it there
    m.run()
    y = np.asarray(m.get_output(0))
    err = float(np.abs(y - ref).max() / np.abs(ref).max())
    row = {"model": name, "kernels": len(lib.function_names), "onnx_s": round(t_onnx, 1),
           "build_s": round(t_build, 1), "max_rel_err": err, "matches": bool(err <= 1e-4 and y.shape == ref.shape)}
    fns = {"autosched": m.run}
    if torch is not None:
        call, why = torch_call(name, inputs, torch)
        if call is None:
            row["torch_skipped"] = why
        else:
            fns["torch"] = call
    best = alternating_medians(fns, args.rounds, args.seconds, pause=0.3)
    row["autosched_ms"] = best["autosched"] * 1e3
    if "torch" in best:
        row["torch_ms"] = best["torch"] * 1e3
        row["vs_torch"] = best["autosched"] / best["torch"]
    if args.profile:
        prof: dict = {}
        for p in m.profile(10):
            prof[p["name"]] = prof.get(p["name"], 0.0) + p["seconds"]
        row["kernel_ms"] = {k: round(v * 1e3, 4) for k, v in sorted(prof.items(), key=lambda kv: -kv[1])}
        for k, v in list(row["kernel_ms"].items())[:args.profile]:
            print(f"  {name} {k}: {v:.3f} ms (summed over its calls; each call waits for the GPU)")
    row["total_s"] = round(time.perf_counter() - t0, 1)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=0.75, help="seconds per timed block (default 0.75)")
    ap.add_argument("--arch", default=None, help="the PTX's architecture (default: the cuda target's)")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    ap.add_argument("--database", default=None, metavar="DB",
                    help="build with the tuning records of this database (default: untuned)")
    ap.add_argument("--save-onnx", type=Path, default=None, metavar="DIR",
                    help="also write each model's ONNX file here (for `autosched tune --model`)")
    ap.add_argument("--profile", type=int, default=0, metavar="K",
                    help="also time each kernel alone and print the K slowest (and all in --json)")
    args = ap.parse_args()

    from autosched.runtime.cuda import cuda_available

    if not cuda_available():
        print("bench_gpu_models: no CUDA device here; run it on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError("torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        gpu = torch.cuda.get_device_name(0)
        print(f"GPU: {gpu}; PyTorch {torch.__version__}, TF32 off", flush=True)
    except ImportError as e:
        torch = None
        print(f"PyTorch skipped: {e}", file=sys.stderr)
    rows = []
    ok = True
    for name in args.models:
        row = bench(name, args, torch)
        rows.append(row)
        ok &= row["matches"]
        theirs = f"PyTorch eager {row['torch_ms']:.3f} ms, autosched / PyTorch {row['vs_torch']:.2f}x" \
            if "torch_ms" in row else f"PyTorch skipped: {row.get('torch_skipped', 'not installed')}"
        how = "tuned" if args.database else "untuned"
        print(f"{name}: autosched {how} {row['autosched_ms']:.3f} ms; {theirs}; {row['kernels']} kernels, "
              f"build {row['build_s']} s; max relative error vs onnxruntime {row['max_rel_err']:.1e} "
              f"({'ok' if row['matches'] else 'MISMATCH'}); {row['total_s']} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
