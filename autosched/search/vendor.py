"""The vendor library on a tuned kernel's own shape: what the user would run without autosched.

``autosched tune`` closes with how its best kernel compares with it, timed in the same process, on the
same inputs and thread count, so the comparison never mixes machines or moments. The libraries are timed in
alternating rounds, each block after a pause, and each keeps its best block median
(:mod:`autosched.measure.alternating`): every library's worker threads spin for a while after a call, so one
timed right after another (or right after autosched's own re-measure) would pay for it. The library is
onnxruntime (a one-node model per workload, weights as initializers, as they are in a real model, so it
may pre-pack them), and for matrix products numpy's BLAS too; the faster of those installed is the
reference. A workload they do not express (a user's own) has none.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autosched.measure.alternating import alternating_medians, median_time
from autosched.measure.data import make_inputs
from autosched.measure.machine import MeasureTurn
from autosched.measure.peak import cache_dir

#: alternating rounds of the libraries, and the pause (seconds) before each block: the final comparison of
#: every ``autosched tune`` waits ROUNDS * PAUSE per library
ROUNDS = 3
PAUSE = 0.3
#: seconds of timing per library, over all the rounds (ROUNDS blocks of BUDGET / ROUNDS, each after two
#: warm-up calls)
BUDGET = 0.45


@dataclass(frozen=True)
class VendorFigure:
    """One library's median time on the task's computation."""

    library: str  #: name and version, e.g. "onnxruntime 1.31.1"
    seconds: float
    gflops: float


def vendor_figures(task: Any, threads: int, budget: float = BUDGET, only: str | None = None,
                   pause: float = PAUSE) -> list[VendorFigure]:
    """Every installed library that expresses ``task``'s computation, timed now at ``threads`` threads (none
    when the task is not float32 on a CPU); ``only``: that library alone (its name, "numpy"). The libraries
    are set up together, then timed in ``ROUNDS`` alternating rounds of ``budget / ROUNDS`` seconds each, a
    ``pause`` before each block (the first too: what ran just before, autosched's re-measure, has its
    threads parked), and each keeps its best block median. Takes the machine's measurement turn while it
    times, as a candidate would."""
    if task.target.kind != "llvm" or task.args.get("dtype", "float32") != "float32":
        return []
    inputs = make_inputs(task, seed=0)[:-1]
    with contextlib.ExitStack() as scope:  # what the libraries set up for their timing ends with it
        fns = {}
        for library, make in _LIBRARIES:
            if only is not None and library.split(" ", 1)[0] != only:
                continue
            try:
                fn = make(task, inputs, threads, scope)
            except ImportError:
                continue
            if fn is not None:
                fns[library] = fn
        if not fns:
            return []
        with MeasureTurn():
            best = alternating_medians(fns, ROUNDS, budget / ROUNDS, pause, timer=median_time)
    return [VendorFigure(library, seconds, task.flop / seconds / 1e9) for library, seconds in best.items()]


def vendor_reference(task: Any, threads: int, budget: float = BUDGET, pause: float = PAUSE) -> VendorFigure | None:
    """The vendor library to compare ``task``'s kernels with, timed now: the fastest of
    :func:`vendor_figures` the first time it is asked on this machine, then that same library every time
    (remembered in the cache directory, per computation, target and threads), so that the summary of
    ``autosched tune`` and ``autosched report`` compare with one library and say which. None when no
    installed library expresses ``task`` (:func:`missing_vendor` says what to install). ``budget`` and ``pause``
    as for :func:`vendor_figures`."""
    key = f"{task.workload_key}|{task.target.key}|{threads}"
    chosen = _remembered().get(key)
    if chosen is not None:
        figures = vendor_figures(task, threads, budget, only=chosen.split(" ", 1)[0], pause=pause)
        if figures:
            return figures[0]
    figures = vendor_figures(task, threads, budget, pause=pause)
    best = min(figures, key=lambda f: f.seconds, default=None)
    if best is not None:
        _remember(key, best.library)
    return best


def missing_vendor(task: Any) -> str | None:
    """What to install to have a vendor library to compare ``task`` with ("pip install onnxruntime onnx"),
    or None when one is installed or none would express it."""
    if task.target.kind != "llvm" or task.args.get("dtype", "float32") != "float32":
        return None
    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    if task.name in ("matmul", "batch_matmul"):
        return None  # numpy's BLAS is there
    if task.name not in ("dense", "conv2d", "depthwise_conv2d", "pool2d", "softmax", "elementwise"):
        return None
    return "pip install " + " ".join(missing)


def _vendor_file() -> Any:
    return cache_dir() / "vendor.json"


def _remembered() -> dict[str, str]:
    try:
        return json.loads(_vendor_file().read_text())
    except (OSError, ValueError):
        return {}


def _remember(key: str, library: str) -> None:
    data = _remembered()
    data[key] = library.split(" ", 1)[0]  # the library, whatever its version
    path = _vendor_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)  # whole or not at all, for a reader in another process
    except OSError:
        pass  # a read-only cache: chosen again next time


def _version(dist: str) -> str:
    try:
        return f"{dist} {importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        return dist


# ---------------------------------------------------------------------------
# onnxruntime: one small ONNX graph per built-in workload
# ---------------------------------------------------------------------------


def onnx_graph(task: Any, inputs: list[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]] | None:
    """(ONNX model, feeds) computing ``task`` on ``inputs`` (its arrays, output excluded), or None when the
    workload has no ONNX form here. Weights become initializers; an NHWC convolution runs as NCHW, the
    layout onnxruntime computes in (the same arithmetic)."""
    from onnx import TensorProto, helper, numpy_helper

    a = task.args
    name = task.name
    nodes: list[Any] = []
    feeds: dict[str, np.ndarray] = {}
    weights: dict[str, np.ndarray] = {}
    out_shape = tuple(int(d) for d in task.tensors()[-1].shape)
    layout_back = None  # a transpose of the output back to the task's layout
    if name == "matmul":
        feeds["A"], weights["B"] = inputs
        nodes.append(helper.make_node("MatMul", ["A", "B"], ["y"]))
    elif name == "batch_matmul":
        feeds["X"], feeds["Y"] = inputs
        nodes.append(helper.make_node("MatMul", ["X", "Y"], ["y"]))
    elif name == "dense":
        feeds["data"], weights["weight"] = inputs[:2]
        args = ["data", "weight"]
        if a.get("bias", True):
            weights["bias"] = inputs[2]
            args.append("bias")
        relu = a.get("relu", False)
        nodes.append(helper.make_node("Gemm", args, ["g" if relu else "y"], transB=1))
        if relu:
            nodes.append(helper.make_node("Relu", ["g"], ["y"]))
    elif name in ("conv2d", "depthwise_conv2d"):
        data, weight = inputs
        if a.get("layout", "NCHW") == "NHWC":
            data, weight = data.transpose(0, 3, 1, 2), weight.transpose(3, 2, 0, 1)
            n, h, w, c = out_shape
            out_shape, layout_back = (n, c, h, w), (0, 2, 3, 1)
        feeds["data"], weights["weight"] = np.ascontiguousarray(data), np.ascontiguousarray(weight)
        p, s = a.get("padding", 1), a.get("stride", 1)
        group = weight.shape[0] if name == "depthwise_conv2d" else 1
        nodes.append(helper.make_node("Conv", ["data", "weight"], ["c" if layout_back else "y"],
                                      kernel_shape=list(weight.shape[2:]), pads=[p, p, p, p], strides=[s, s],
                                      group=group))
    elif name == "pool2d":
        (feeds["data"],) = inputs
        op = {"max": "MaxPool", "avg": "AveragePool"}[a.get("pool_type", "max")]
        p, s = a.get("padding", 1), a.get("stride", 2)
        extra = {"count_include_pad": 0} if op == "AveragePool" else {}
        nodes.append(helper.make_node(op, ["data"], ["y"], kernel_shape=[a.get("KH", 3), a.get("KW", 3)],
                                      pads=[p, p, p, p], strides=[s, s], **extra))
    elif name == "softmax":
        (feeds["X"],) = inputs
        nodes.append(helper.make_node("Softmax", ["X"], ["y"], axis=-1))
    elif name == "elementwise":
        feeds["a"], feeds["b"] = inputs
        op = a.get("op", "add_relu")
        if op in ("add", "mul"):
            nodes.append(helper.make_node(op.capitalize(), ["a", "b"], ["y"]))
        elif op == "add_relu":
            nodes += [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
        elif op == "sigmoid_mul":
            nodes += [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["s", "b"], ["y"])]
        else:
            return None
    else:
        return None
    if layout_back is not None:
        nodes.append(helper.make_node("Transpose", ["c"], ["y"], perm=list(layout_back)))
        out_shape = tuple(out_shape[i] for i in layout_back)
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        [numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model, {k: np.ascontiguousarray(v) for k, v in feeds.items()}


def _onnxruntime(task: Any, inputs: list[np.ndarray], threads: int,
                 scope: contextlib.ExitStack) -> Callable[[], Any] | None:
    import onnxruntime as ort

    made = onnx_graph(task, inputs)
    if made is None:
        return None
    model, feeds = made
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)


def _numpy_blas(task: Any, inputs: list[np.ndarray], threads: int,
                scope: contextlib.ExitStack) -> Callable[[], Any] | None:
    """numpy's matrix product (its BLAS) for the matrix-product workloads, when its threads can be limited to
    ``threads`` (threadpoolctl), or already are (its default, one per CPU)."""
    if task.name not in ("matmul", "batch_matmul"):
        return None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        if threads != os.cpu_count():
            return None
        threadpool_limits = None
    x, y = inputs
    out = np.empty(task.tensors()[-1].shape, np.float32)
    if threadpool_limits is not None:
        scope.enter_context(threadpool_limits(threads, user_api="blas"))
    return lambda: np.matmul(x, y, out=out)


_LIBRARIES: list[tuple[str, Callable[..., Callable[[], Any] | None]]] = [
    (_version("onnxruntime"), _onnxruntime),
    (f"numpy {np.__version__}", _numpy_blas),
]

__all__ = ["VendorFigure", "missing_vendor", "onnx_graph", "vendor_figures", "vendor_reference"]
