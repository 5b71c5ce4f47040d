"""torchvision's models as users export them (``torch.onnx.export``, opset 17, random weights) on autosched
(untuned) and onnxruntime, side by side: does each import, match, and how fast is it.

    python benchmarks/bench_torchvision.py --torch-python /tmp/tv/bin/python [--models convnext_tiny,swin_t]
                                           [--threads 2] [--rounds 5] [--seconds 1] [--pause 0.5] [--dir DIR]

The project's environment has no PyTorch: ``--torch-python`` names an interpreter that has torch and torchvision
(e.g. a virtualenv made with ``pip install torch torchvision onnx --index-url https://download.pytorch.org/whl/cpu``),
which exports each model to ``--dir`` once (kept: later runs reuse the files). Then each is imported with
``relay.frontend.from_onnx``, built with ``relay.build`` (default schedules) and run by the graph executor; the
output is compared with onnxruntime's (max|diff| / max|ref|) and the two are timed in alternating rounds
(``benchmarks/_timing.py``). A model that does not import is listed with the operators it lacks. Prints a markdown
table; on a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _onnx_sides import build_or_status  # noqa: E402
from _timing import alternating_medians  # noqa: E402

from autosched.target import Target  # noqa: E402

#: name -> the torchvision expression that makes it (random weights)
MODELS = {
    "mobilenet_v3_small": "M.mobilenet_v3_small()",
    "efficientnet_b0": "M.efficientnet_b0()",
    "regnet_y_400mf": "M.regnet_y_400mf()",
    "resnext50_32x4d": "M.resnext50_32x4d()",
    "convnext_tiny": "M.convnext_tiny()",
    "vit_b_16": "M.vit_b_16()",
    "swin_t": "M.swin_t()",
    "maxvit_t": "M.maxvit_t()",
    "lraspp_mobilenet_v3_large": "S.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)",
    "deeplabv3_mobilenet_v3_large": "S.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, "
                                    "aux_loss=False)",
    "fcn_resnet50": "S.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False)",
}

EXPORT = """
import sys, torch, torchvision.models as M, torchvision.models.segmentation as S
torch.manual_seed(0)
name, expr, path = sys.argv[1:4]
model = eval(expr).eval()
class Out(torch.nn.Module):  # segmentation models return a dict
    def __init__(self, m):
        super().__init__()
        self.m = m
    def forward(self, x):
        y = self.m(x)
        return y["out"] if isinstance(y, dict) else y
if name == "vit_b_16":  # torchvision zero-initialises the head: every logit would be 0
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
torch.onnx.export(Out(model), (torch.randn(1, 3, 224, 224),), path, opset_version=17, dynamo=False,
                  input_names=["data"], output_names=["out"])
"""


def export(name: str, torch_python: str, out_dir: Path) -> Path:
    """The model's ONNX file, exported by ``torch_python`` unless it is there already."""
    path = out_dir / f"{name}.onnx"
    if not path.exists():
        run = subprocess.run([torch_python, "-c", EXPORT, name, MODELS[name], str(path)], capture_output=True,
                             text=True)
        if run.returncode != 0:
            raise RuntimeError(f"exporting {name} failed: {run.stderr.strip().splitlines()[-1]}")
    return path


def bench(path: Path, threads: int, rounds: int, seconds: float, pause: float) -> dict:
    """Import, build and time one exported model beside onnxruntime; a row of the table."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    row: dict = {"model": path.stem, "nodes": len(model.graph.node)}
    m, info = build_or_status(model, shape={"data": x.shape})
    row.update(info)
    if m is None:
        return row
    m.set_input("data", x)
    m.run()
    got = np.asarray(m.get_output(0))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    feed = {"data": x}
    ref = sess.run(None, feed)[0]
    row["err"] = float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())
    best = alternating_medians({"autosched": m.run, "onnxruntime": lambda: sess.run(None, feed)}, rounds, seconds,
                               pause)
    row.update(status="ok", autosched_ms=best["autosched"] * 1e3, ort_ms=best["onnxruntime"] * 1e3,
               ort_version=ort.__version__)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch-python", required=True, help="a Python with torch and torchvision, to export")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {', '.join(MODELS)}")
    ap.add_argument("--dir", default="/tmp/autosched-torchvision", help="where the ONNX files are kept")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--pause", type=float, default=0.5)
    args = ap.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    logging.basicConfig(level=logging.ERROR)
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        row = bench(export(name, args.torch_python, out_dir), args.threads, args.rounds, args.seconds, args.pause)
        rows.append(row)
        print(f"{name}: {row['status']}", file=sys.stderr, flush=True)
    print(f"batch 1, 3x224x224, {args.threads} threads, {Target('llvm').key} on {Target('llvm').cpu.name}")
    print()
    print("| model | nodes / kernels | build (s) | autosched untuned (ms) | onnxruntime (ms) | autosched / onnxruntime "
          "| output error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] != "ok":
            print(f"| {r['model']} | {r['nodes']} / - | - | {r['status']} | | | |")
            continue
        print(f"| {r['model']} | {r['nodes']} / {r['kernels']} | {r['build_s']:.1f} | {r['autosched_ms']:.1f} | "
              f"{r['ort_ms']:.1f} | {r['autosched_ms'] / r['ort_ms']:.2f}x | {r['err']:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
