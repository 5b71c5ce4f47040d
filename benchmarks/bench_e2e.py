"""Whole models, end to end: ResNet-18, ResNet-50 and MobileNetV2 (batch 1), and the transformers
BERT-base (12 layers, d_model 768, sequence 128) and GPT-2 small (12 layers, sequence 64, cache-free) on
autosched, onnxruntime and PyTorch, in one run.

    python benchmarks/bench_e2e.py [--models resnet18 resnet50 mobilenet_v2 bert_base gpt2_small] [--image 224]
                                   [--threads 2] [--db tuning.db] [--layers]
                                   [--peers-python /tmp/autosched-peers/bin/python] [--out benchmarks/results]

The transformers come from ``tests/_transformer_models`` (seeded random weights, PyTorch's opset-17 export
patterns; building BERT-base's ONNX model takes about 25 s, most of it the checker): autosched and onnxruntime
are timed in alternating rounds, each block after a pause (both libraries' worker threads spin after a call),
and each side's best round median is kept; PyTorch is skipped with the reason when it is not importable.

The models come from ``tests/_onnx_models`` (seeded random weights, the real layer shapes). autosched imports
each with ``relay.frontend.from_onnx`` and builds it twice: untuned (every kernel with its default schedule)
and inside ``apply_history_best(--db)`` (each kernel with its best record there; make them with
``autosched tune --model M.onnx --time-budget 20m --db tuning.db``: ``--save-models DIR`` writes the ONNX
files). The tuning time spent on a model is read from the database's tuning runs. onnxruntime runs in this
environment (all graph optimisations, its weights as initializers); PyTorch in the peers' virtualenv
(``bash ../shared/peers/setup.sh``) through ``benchmarks/peer_torch_onnx.py``. Every autosched output is
checked against onnxruntime's first; then onnxruntime, each autosched build and PyTorch are timed in
alternating rounds, each block after a pause, and each keeps its best round median (``benchmarks/_timing.py``),
as for the transformers. PyTorch's process is kept alive for the rounds and times one block whenever its turn
comes (``benchmarks/_peers.py``). ``--layers`` adds a per-layer table: each convolution kernel's time and
GFLOPS in the model (the kernel alone on the model's buffers, as ``GraphModule.profile`` times it) next to
onnxruntime's on the same convolution as a one-node model, the two timed in their own alternating rounds
(``LAYER_ROUNDS`` of ``LAYER_SECONDS``, ``LAYER_PAUSE`` before each block) with the same rule.
Prints the CPU and the number of layout_transform kernels; writes ``e2e.json`` and ``e2e.png``.
On a 2-core machine run it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _peers import PeerError, PeerProcess  # noqa: E402
from _peers import timer as peer_aware_timer  # noqa: E402
from _timing import alternating_medians  # noqa: E402

import _onnx_models  # noqa: E402
import _transformer_models  # noqa: E402
import autosched  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402
from autosched.target import Target  # noqa: E402

MODELS = {
    "resnet18": _onnx_models.make_resnet18,
    "resnet50": _onnx_models.make_resnet50,
    "mobilenet_v2": _onnx_models.make_mobilenet_v2,
}
TRANSFORMERS = {
    "bert_base": (_transformer_models.make_encoder, _transformer_models.BERT_BASE),
    "gpt2_small": (_transformer_models.make_decoder, _transformer_models.GPT2_SMALL),
}
#: --layers: each convolution and onnxruntime's alternate in rounds of their own, shorter than the models'
#: (a ResNet-50 has 50-odd convolutions per build): about 2 x 3 x 0.6 s a layer
LAYER_ROUNDS, LAYER_SECONDS, LAYER_PAUSE = 3, 0.3, 0.3
GOALS = {"resnet18": 0.9, "resnet50": 1.0, "mobilenet_v2": 1.0, "bert_base": 1.0, "gpt2_small": 1.0}


def build_autosched(mod, params, db: str | None):
    """(GraphModule, build result, compile seconds)."""
    t0 = time.perf_counter()
    if db:
        with autosched.apply_history_best(db):
            res = relay.build(mod, target="llvm", params=params)
    else:
        res = relay.build(mod, target="llvm", params=params)
    return GraphModule(*res), res, time.perf_counter() - t0


def ort_session(model_bytes: bytes, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def torch_process(peers_python: str, path: str, inp: str, threads: int) -> PeerProcess | None:
    """PyTorch on the model at ``path`` (input ``inp``, a .npy) in the peers' virtualenv, ready to time
    blocks; None (and why, on stderr) without it."""
    if not os.path.exists(peers_python):
        print(f"PyTorch skipped: no peers' python at {peers_python} (bash ../shared/peers/setup.sh)", file=sys.stderr)
        return None
    try:
        return PeerProcess(peers_python, str(HERE / "peer_torch_onnx.py"),
                           [path, "--threads", str(threads), "--input", inp], timeout=900)
    except PeerError as e:
        print(f"PyTorch failed: {e}", file=sys.stderr)
        return None


def tuning_seconds(db: str) -> float | None:
    """Seconds spent in the tuning runs stored in ``db`` (one database per model tuned, as
    ``autosched tune --model M.onnx --db`` makes it); None when it does not say."""
    from autosched.database.database import open_database

    try:
        database, own = open_database(db, create=False)
    except Exception:  # noqa: BLE001 - a log file or a missing database: no run history
        return None
    try:
        return sum(r.ended_at - r.started_at for r in database.runs() if r.ended_at and r.started_at) or None
    finally:
        if own:
            database.close()


def conv_layers(res) -> list[dict]:
    """The convolution kernels of a build: name, logical shapes and attributes from their descriptions."""
    out = []
    for k in res.kernels:
        task = k.get("task")
        if task is None:
            continue
        desc = json.loads(task.args["graph"])
        node = next((n for n in desc["nodes"] if "conv2d" in n[0]), None)
        if node is None:
            continue
        op, attrs, _ = node
        d, w = desc["inputs"][0][0], desc["inputs"][1][0]
        ci = d[1] * d[4] if len(d) == 5 else d[1]
        if op == "nn.conv2d_winograd_nchwc":
            co, kh, kw, groups, strides = w[2] * w[4], 3, 3, 1, [1, 1]
        elif op == "nn.depthwise_conv2d_nchwc":
            co, kh, kw, groups, strides = ci, w[2], w[3], ci, attrs["strides"]
        else:
            co, kh, kw, groups, strides = w[0] * w[5], w[2], w[3], attrs.get("groups", 1), attrs["strides"]
        out.append({"name": k["name"], "label": task.label, "flop": task.flop if op != "nn.conv2d_winograd_nchwc"
                    else 2 * co * ci * 9 * _out_pixels(d, attrs), "N": d[0], "CI": ci, "H": d[2], "W": d[3],
                    "CO": co, "KH": kh, "KW": kw, "groups": groups, "strides": strides, "pads": attrs["padding"]})
    return out


def _out_pixels(d: list[int], attrs: dict) -> int:
    pt, pl, pb, pr = attrs["padding"]
    return (d[2] + pt + pb - 2) * (d[3] + pl + pr - 2)


def kernel_calls(m: GraphModule) -> dict[str, Callable[[], object]]:
    """Each kernel of a built model, callable alone on the model's own buffers, by its function name (the
    names of ``GraphModule.profile``, which times the same calls)."""
    return {m._nodes[nid]["attrs"]["func_name"]: call for call, nid in zip(m._ops, m._op_nodes)}


def ort_conv(layer: dict, threads: int) -> Callable[[], object]:
    """onnxruntime on the same convolution as a one-node model (weights as initializer), ready to time."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((layer["N"], layer["CI"], layer["H"], layer["W"])).astype("float32")
    w = rng.standard_normal((layer["CO"], layer["CI"] // layer["groups"], layer["KH"], layer["KW"])).astype("float32")
    pt, pl, pb, pr = layer["pads"]
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[layer["KH"], layer["KW"]],
                            strides=layer["strides"], pads=[pt, pl, pb, pr], group=layer["groups"])
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    s = ort_session(m.SerializeToString(), threads)
    return lambda: s.run(None, {"x": x})


def bench_model(name: str, args, db: str | None) -> dict:
    import onnx

    model = MODELS[name](batch=1, image=args.image)
    x = np.random.default_rng(0).standard_normal((1, 3, args.image, args.image)).astype(np.float32)
    out: dict = {"model": name, "rows": []}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{name}.onnx")
        onnx.save(model, path)
        if args.save_models:
            Path(args.save_models).mkdir(parents=True, exist_ok=True)
            onnx.save(model, os.path.join(args.save_models, f"{name}.onnx"))
        mod, params = relay.frontend.from_onnx(model, shape={"data": x.shape})
        sess = ort_session(model.SerializeToString(), args.threads)
        ref = sess.run(None, {"data": x})[0]
        fns = {"onnxruntime": lambda: sess.run(None, {"data": x})}
        rows = {}
        builds = [("autosched untuned", None)]
        if db:
            builds.append(("autosched tuned", db))
        for label, db in builds:
            m, res, compile_s = build_autosched(mod, params, db)
            m.set_input("data", x)
            m.run()
            y = m.get_output(0)
            row = {"name": label, "compile_s": compile_s, "kernels": len(res.kernels),
                   "tuned": sum(k["tuned"] for k in res.kernels),
                   "layout_transforms": sum("layout_transform" in k["name"] for k in res.kernels),
                   "max_rel_err": float(np.abs(y - ref).max() / np.abs(ref).max())}
            if db:
                row["tuning_seconds"] = tuning_seconds(db)
            if args.layers:  # each kernel against onnxruntime's convolution, in rounds of their own
                kernels = kernel_calls(m)  # after m.run(): each kernel's inputs hold the model's values
                row["layers"] = []
                for layer in conv_layers(res):
                    best = alternating_medians({"autosched": kernels[layer["name"]],
                                                "onnxruntime": ort_conv(layer, args.threads)},
                                               LAYER_ROUNDS, LAYER_SECONDS, LAYER_PAUSE)
                    row["layers"].append({**layer, "seconds": best["autosched"], "ort_seconds": best["onnxruntime"]})
            rows[label] = row
            fns[label] = m.run
        inp = os.path.join(d, "x.npy")
        np.save(inp, x)
        peer = torch_process(args.peers_python, path, inp, args.threads)
        torch_name = f"PyTorch {peer.hello['version']}" if peer else None
        try:
            best = alternating_medians({**fns, **({torch_name: peer.sides()["torch"]} if peer else {})},
                                       timer=peer_aware_timer)
        except PeerError as e:
            print(f"PyTorch failed: {e}", file=sys.stderr)
            torch_name = None
            best = alternating_medians(fns)
        finally:
            if peer:
                peer.close()
        out["rows"].append({"name": "onnxruntime", "seconds": best["onnxruntime"]})
        for label, row in rows.items():
            out["rows"].append({**row, "seconds": best[label]})
        if torch_name:
            out["rows"].append({"name": torch_name, "seconds": best[torch_name]})
    return out


def torch_transformer_seconds() -> tuple[float | None, str]:
    """PyTorch eager on the same transformer: not measured unless torch imports here (the reason otherwise)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None, "PyTorch skipped: torch is not installed in this environment (pip install torch)"
    return None, ("PyTorch skipped: the transformer models are built as ONNX graphs; an eager PyTorch module of "
                  "the same weights is not written yet")


def bench_transformer(name: str, args, db: str | None) -> dict:
    """A transformer: import, build untuned (and tuned with --db), check against onnxruntime, then time both
    sides in alternating rounds."""
    make, sizes = TRANSFORMERS[name]
    t0 = time.perf_counter()
    model = make(**sizes)
    build_model_s = time.perf_counter() - t0
    inputs = _transformer_models.token_inputs(model, sizes["seq"], sizes["vocab"])
    out: dict = {"model": name, "rows": [], "onnx_build_s": build_model_s}
    if args.save_models:
        import onnx

        Path(args.save_models).mkdir(parents=True, exist_ok=True)
        onnx.save(model, os.path.join(args.save_models, f"{name}.onnx"))
    sess = ort_session(model.SerializeToString(), args.threads)
    ref = sess.run(None, inputs)[0]
    mod, params = relay.frontend.from_onnx(model)
    del model
    fns = {"onnxruntime": lambda: sess.run(None, inputs)}
    rows = {}
    builds = [("autosched untuned", None)] + ([("autosched tuned", db)] if db else [])
    for label, d in builds:
        m, res, compile_s = build_autosched(mod, params, d)
        m.set_input(**inputs)
        m.run()
        y = m.get_output(0)
        rows[label] = {"name": label, "compile_s": compile_s, "kernels": len(res.kernels),
                       "tuned": sum(k["tuned"] for k in res.kernels), "layout_transforms": 0,
                       "max_rel_err": float(np.abs(y - ref).max() / np.abs(ref).max())}
        if d:
            rows[label]["tuning_seconds"] = tuning_seconds(d)
        if args.layers:
            prof: dict = {}
            for p in m.profile(10):
                prof[p["name"]] = prof.get(p["name"], 0.0) + p["seconds"]
            rows[label]["kernel_ms"] = {k: v * 1e3 for k, v in sorted(prof.items(), key=lambda kv: -kv[1])[:10]}
        fns[label] = m.run
    best = alternating_medians(fns)
    out["rows"].append({"name": "onnxruntime", "seconds": best["onnxruntime"]})
    for label, row in rows.items():
        out["rows"].append({**row, "seconds": best[label]})
    t_torch, why = torch_transformer_seconds()
    if t_torch is None:
        print(why, file=sys.stderr)
        out["torch_skipped"] = why
    return out


def plot(results: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), dpi=100, squeeze=False)
    for ax, r in zip(axes[0], results):
        names = [row["name"] for row in r["rows"]]
        ms = [row["seconds"] * 1e3 for row in r["rows"]]
        bars = ax.barh(names, ms, color=["tab:blue" if "autosched" in n else "tab:gray" for n in names])
        for b, v in zip(bars, ms):
            ax.annotate(f"{v:.1f}", (v, b.get_y() + b.get_height() / 2), va="center", fontsize=8)
        ax.set_title(r["model"], fontsize=10)
        ax.set_xlabel("ms (lower is better)")
        ax.invert_yaxis()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS) + list(TRANSFORMERS),
                    choices=list(MODELS) + list(TRANSFORMERS))
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--db", nargs="+", default=None,
                    help="tuning records for the tuned builds: one database, or one per model (in --models order)")
    ap.add_argument("--layers", action="store_true", help="a per-layer table of the convolutions")
    ap.add_argument("--save-models", default=None, metavar="DIR", help="also write the ONNX models here")
    ap.add_argument("--peers-python", default="/tmp/autosched-peers/bin/python")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)
    logging.basicConfig(level=logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    cpu = Target("llvm").cpu
    print(f"CPU: {cpu}\nbatch 1, {args.image}x{args.image} (CNNs), {args.threads} threads")
    results = []
    dbs = args.db or []
    if len(dbs) not in (0, 1, len(args.models)):
        ap.error(f"--db: give one database, or one per model ({len(args.models)})")
    for k, name in enumerate(args.models):
        bench = bench_transformer if name in TRANSFORMERS else bench_model
        r = bench(name, args, dbs[k] if len(dbs) > 1 else (dbs[0] if dbs else None))
        results.append(r)
        t_ort = r["rows"][0]["seconds"]
        print(f"\n{name}")
        for row in r["rows"]:
            extra = ""
            if "kernels" in row:
                extra = (f"  {row['tuned']}/{row['kernels']} kernels tuned, {row['layout_transforms']} layout "
                         f"transforms, built in {row['compile_s']:.1f} s, rel err vs onnxruntime "
                         f"{row['max_rel_err']:.1e}")
                if row.get("tuning_seconds"):
                    extra += f", tuned for {row['tuning_seconds'] / 60:.1f} min"
            print(f"  {row['name']:<28} {row['seconds'] * 1e3:8.2f} ms  {row['seconds'] / t_ort:5.2f}x onnxruntime's"
                  f" latency{extra}")
        for row in r["rows"]:
            if row.get("kernel_ms"):
                print(f"  slowest kernels ({row['name']}), ms per run: "
                      + ", ".join(f"{k} {v:.2f}" for k, v in row["kernel_ms"].items()))
            if row.get("layers"):
                print(f"  per-layer ({row['name']}): kernel time and GFLOPS in the model, onnxruntime's on the same "
                      "convolution alone (alternating rounds)")
                print(f"  {'layer':<64} {'us':>8} {'GFLOPS':>7} {'ort us':>8} {'ort GFLOPS':>10}")
                for lay in row["layers"]:
                    s, o = lay["seconds"], lay["ort_seconds"]
                    print(f"  {lay['label'][:64]:<64} {s * 1e6:8.1f} {lay['flop'] / s / 1e9:7.1f} {o * 1e6:8.1f} "
                          f"{lay['flop'] / o / 1e9:10.1f}")
    (args.out / "e2e.json").write_text(json.dumps({"cpu": str(cpu), "image": args.image, "threads": args.threads,
                                                    "results": results}, indent=1, default=str))
    plot(results, args.out / "e2e.png", f"{cpu.name}, batch 1, {args.image}x{args.image}, {args.threads} threads")
    print(f"wrote {args.out / 'e2e.json'} and {args.out / 'e2e.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
