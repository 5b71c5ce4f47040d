"""An ONNX model on autosched and onnxruntime, ready to time side by side: what the model benchmarks share."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _timing import alternating_medians

from autosched import relay
from autosched.relay.frontend import OnnxImportError, OpNotImplemented
from autosched.runtime.graph_executor import GraphModule


def onnx_sides(model: Any, inputs: dict[str, np.ndarray], threads: int, target: str) -> dict:
    """autosched's and onnxruntime's run of ``model`` (a ModelProto or a path), autosched built with default
    schedules and checked against onnxruntime: ``{"autosched": fn, "onnxruntime": fn, "rel_err": float}`` (the
    largest difference of the first output relative to its largest value)."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3  # (its warnings, e.g. shape merges it recovers from, are not the benchmark's)
    source = str(model) if isinstance(model, (str, Path)) else model.SerializeToString()
    sess = ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)[0]
    mod, params = relay.frontend.from_onnx(onnx.load(model) if isinstance(model, (str, Path)) else model)
    gm = GraphModule(*relay.build(mod, target=target, params=params))
    gm.set_input(**inputs)
    gm.run()
    err = float(np.abs(np.asarray(gm.get_output(0)) - ref).max() / np.abs(ref).max())
    return {"autosched": gm.run, "onnxruntime": lambda: sess.run(None, inputs), "rel_err": err}


def build_or_status(model: Any, shape: dict | None = None) -> tuple[GraphModule | None, dict]:
    """``model`` imported and built with default schedules: ``(graph module, {"build_s", "kernels"})``, or
    ``(None, {"status": why})`` when the import stops (the operators it lacks, or the importer's error)."""
    start = time.perf_counter()
    try:
        mod, params = relay.frontend.from_onnx(model, shape=shape)
    except OpNotImplemented as e:
        return None, {"status": "unsupported: " + ", ".join(f"{k} (x{v})" for k, v in e.unsupported.items())}
    except OnnxImportError as e:
        return None, {"status": f"import error: {str(e)[:160]}"}
    res = relay.build(mod, target="llvm", params=params)
    return GraphModule(*res), {"build_s": time.perf_counter() - start, "kernels": len(res.kernels)}


def compare(runs: dict[str, dict], rounds: int, seconds: float) -> Iterator[tuple[str, float, float, float]]:
    """Every run's two sides timed in alternating rounds: ``(run, autosched s, onnxruntime s, rel_err)``."""
    fns = {f"{lib} {key}": run[lib] for key, run in runs.items() for lib in ("autosched", "onnxruntime")}
    best = alternating_medians(fns, rounds=rounds, seconds=seconds)
    for key, run in runs.items():
        yield key, best[f"autosched {key}"], best[f"onnxruntime {key}"], run["rel_err"]
