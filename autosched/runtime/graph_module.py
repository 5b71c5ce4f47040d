"""The graph executor: :class:`GraphModule` runs a built model (graph JSON, kernels library, parameters) with
numpy and ctypes only. The public module is :mod:`autosched.runtime.graph_executor` (TVM's name), which
re-exports it; this one sits below the library loader so that a loaded model library can make its executor.
"""

from __future__ import annotations

import ctypes
import functools
import json
import time
from typing import Any

import numpy as np

from autosched.runtime.cuda import CUDAModule, DeviceBuffers, PTXModule
from autosched.runtime.module_base import Module, PackedFunc, _failure, data_pointer

NOP = "__nop"  # the func_name of a node that computes nothing: its output is its input's storage reshaped


def _allocate(shapes: list, dtypes: list, storage_ids: list | None) -> list[np.ndarray]:
    """One array per entry; entries with the same storage id are views of one buffer (the plan from build)."""
    if storage_ids is None:
        return [np.zeros(tuple(s), dtype=d) for s, d in zip(shapes, dtypes)]
    nbytes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in zip(shapes, dtypes)]
    size: dict[int, int] = {}
    for sid, n in zip(storage_ids, nbytes):
        size[sid] = max(size.get(sid, 0), n)
    pools = {sid: np.zeros(max(n, 1), dtype=np.uint8) for sid, n in size.items()}
    return [pools[sid][:n].view(d).reshape(tuple(s)) for sid, n, s, d in zip(storage_ids, nbytes, shapes, dtypes)]


_PLAN_CALL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p)


class _NativeRun:
    """Consecutive kernels of a graph called by the library's run plan (``RUN_PLAN_SYMBOL``) in one ctypes
    call: a Python loop with a ctypes call per kernel costs about a microsecond each, as much as a small
    kernel's work."""

    def __init__(self, address: int, calls: list[tuple[PackedFunc, list[int]]]):
        self.funcs = [f for f, _ in calls]
        n = len(calls)
        pointers = [p for _, ps in calls for p in ps]
        self._arrays = ((ctypes.c_void_p * n)(*[f.address for f in self.funcs]),
                        (ctypes.c_int32 * n)(*[len(ps) for _, ps in calls]),
                        (ctypes.c_void_p * max(1, len(pointers)))(*pointers))
        self._failed = ctypes.c_int64(0)
        self._call = functools.partial(_PLAN_CALL(address), n, *self._arrays, ctypes.byref(self._failed))

    def __call__(self) -> None:
        rc = self._call()
        if rc != 0:
            raise _failure(self.funcs[self._failed.value].name, rc)


def _native_runs(lib: Module, calls: list) -> list:
    """``calls`` (per kernel: ``(function, pointers)`` for a kernel the run plan can call, else a callable)
    with each stretch of the former joined into one :class:`_NativeRun` of ``lib``'s plan."""
    out: list = []
    stretch: list = []
    for c in [*calls, None]:
        if isinstance(c, tuple):
            stretch.append(c)
            continue
        if stretch:
            out.append(_NativeRun(lib.run_plan_address, stretch))
            stretch = []
        if c is not None:
            out.append(c)
    return out


def is_cuda_library(lib: Module) -> bool:
    if isinstance(lib, CUDAModule):
        if any(not isinstance(m, PTXModule) for m in lib.imported_modules):
            raise ValueError("GraphModule: a CUDA library with imported CPU modules cannot run as one graph")
        return True
    return False


def _device_storage(shapes: list, dtypes: list, storage_ids: list | None) -> tuple[Any, list[int]]:
    """Device memory for a graph's entries, one allocation per storage id: ``(buffers, pointer per entry)``."""
    nbytes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in zip(shapes, dtypes)]
    sids = storage_ids if storage_ids is not None else list(range(len(shapes)))
    size: dict[int, int] = {}
    for sid, n in zip(sids, nbytes):
        size[sid] = max(size.get(sid, 0), n)
    order = sorted(size)
    bufs = DeviceBuffers([max(1, size[sid]) for sid in order])
    ptr = dict(zip(order, bufs.ptrs))
    return bufs, [ptr[sid] for sid in sids]


class OutputArray(np.ndarray):
    """A numpy array that also answers TVM's NDArray calls (``.numpy()``, ``.asnumpy()``): what
    :meth:`GraphModule.get_output` returns, so that both numpy code and TVM's tutorials read it."""

    def numpy(self) -> np.ndarray:
        return self.view(np.ndarray)

    asnumpy = numpy


class GraphModule:
    """An executor of one graph: inputs by name, ``run()``, outputs by index. Made from ``(graph_json, lib,
    params)``, or as TVM writes it, ``GraphModule(factory["default"](dev))`` (the same executor)."""

    def __init__(self, graph_json: str | dict | GraphModule, lib: Module | None = None,
                 params: dict[str, Any] | None = None):
        if isinstance(graph_json, GraphModule):  # TVM's GraphModule(lib["default"](dev)): that executor
            if lib is not None or params:
                raise TypeError("GraphModule(executor) takes no library or parameters: the executor has them")
            self.__dict__ = graph_json.__dict__
            return
        if lib is None:
            raise TypeError("GraphModule takes (graph_json, lib, params), or the executor that a built model makes: "
                            "GraphModule(relay.build(...)['default'](dev))")
        self.graph = json.loads(graph_json) if isinstance(graph_json, str) else graph_json
        self.lib = lib
        g = self.graph
        self._nodes = g["nodes"]
        self._row = g["node_row_ptr"]
        shapes = g["attrs"]["shape"][1]
        dtypes = g["attrs"]["dltype"][1]
        storage_ids = g["attrs"].get("storage_id", [None, None])[1]
        self._entries = _allocate(shapes, dtypes, storage_ids)
        # a CUDA library: every entry also lives in device memory, where the kernels read and write it
        self._device = _device_storage(shapes, dtypes, storage_ids) if is_cuda_library(lib) else None
        self._input_index = {self._nodes[n]["name"]: n for n in g["arg_nodes"]}
        self._ops = []  # a call of each kernel, in order (profile times them one by one)
        self._op_nodes: list[int] = []  # the node of each entry of _ops
        planned: list = []  # the same kernels, as the run plan takes them where it can (run)
        for nid, node in enumerate(self._nodes):
            if node["op"] != "tvm_op" or node["attrs"]["func_name"] == NOP:
                continue
            f = lib.get_function(node["attrs"]["func_name"])
            index = [self._row[e[0]] + e[1] for e in node["inputs"]]
            index += [self._row[nid] + k for k in range(int(node["attrs"].get("num_outputs", 1)))]
            arrays = [self._entries[k] for k in index]
            self._op_nodes.append(nid)
            if self._device is not None:  # the kernel launched on the entries' device memory
                env = f.check_args(tuple(arrays))
                self._ops.append(f.launcher([self._device[1][k] for k in index], env))
            elif type(f).__call__ is PackedFunc.__call__:  # a CPU kernel: check its buffers once, call it directly
                env = f.check_args(tuple(arrays))
                pointers = [data_pointer(a)[0] for a in arrays]
                self._ops.append(functools.partial(f.raw_call, pointers + env))
                if lib.in_run_plan(f.name) and not env:
                    planned.append((f, pointers))
                    continue
            else:
                self._ops.append(functools.partial(f, *arrays))
            planned.append(self._ops[-1])
        self._runs = _native_runs(lib, planned)
        # checked before the first run: whether this CPU runs the kernels' instructions (a plan calls them raw)
        self._isa_checks = [c[0] for c in planned if isinstance(c, tuple) and c[0].isa_check is not None]
        self._heads = [self._row[h[0]] + h[1] for h in g["heads"]]
        if params:
            for k, v in params.items():
                self.set_input(k, v)

    def set_input(self, key: str | int | None = None, value: Any = None, **inputs: Any) -> None:
        """Copy an input (or a parameter) into the graph: ``set_input("data", x)`` or ``set_input(data=x)``."""
        if key is not None:
            inputs = {key: value, **inputs}
        for name, val in inputs.items():
            if isinstance(name, int):
                name = self._nodes[self.graph["arg_nodes"][name]]["name"]
            nid = self._input_index.get(name)
            if nid is None:
                raise KeyError(f"the graph has no input {name!r} (its inputs: "
                               f"{', '.join(n for n in self._input_index if not n.startswith('p'))} and "
                               f"{sum(1 for n in self._input_index if n.startswith('p'))} parameters)")
            dst = self._entries[self._row[nid]]
            arr = np.asarray(val.numpy() if hasattr(val, "numpy") else val)
            if arr.shape != dst.shape:
                raise ValueError(f"input {name!r} has shape {arr.shape}, the graph expects {dst.shape}")
            if arr.dtype != dst.dtype:
                raise TypeError(f"input {name!r} has dtype {arr.dtype}, the graph expects {dst.dtype}")
            np.copyto(dst, arr)
            if self._device is not None:
                self._device[0].upload(self._device[1][self._row[nid]], dst)

    def _fetch(self, entry: int) -> OutputArray:
        """Entry ``entry``'s value as a new array (copied from the device for a CUDA graph)."""
        out = self._entries[entry].copy()
        if self._device is not None:
            self._device[0].download(self._device[1][entry], out)
        return out.view(OutputArray)

    def get_input(self, name: str) -> OutputArray:
        if name not in self._input_index:
            raise KeyError(f"the graph has no input {name!r}")
        return self._fetch(self._row[self._input_index[name]])

    def __getitem__(self, name: str) -> Any:
        """TVM's executor functions by name: ``m["set_input"]``, ``m["run"]``, ``m["get_output"]``, ..."""
        if name not in _FUNCTIONS:
            raise AttributeError(f"the graph executor has no function {name!r} (it has: {', '.join(_FUNCTIONS)})")
        return getattr(self, name)

    def run(self, **inputs: Any) -> None:
        """Run every kernel once, in order (inputs given here are set first); on a GPU, the kernels are
        launched back to back and waited for at the end."""
        if inputs:
            self.set_input(**inputs)
        if self._device is None:
            if self._isa_checks:
                for f in self._isa_checks:
                    f._check_isa()
                self._isa_checks = []
            for call in self._runs:
                call()
            return
        for call in self._ops:
            call(sync=False)
        self._device[0].synchronize()

    def profile(self, number: int = 20) -> list[dict]:
        """Per kernel of the graph, in execution order: ``{"name", "node", "seconds"}`` (the median of
        ``number`` calls of that kernel alone, after a warm-up run of the whole graph), as TVM's debug
        executor reports. Where the time of a model goes, kernel by kernel (on a GPU, each call waits)."""
        self.run()
        out = []
        for call, nid in zip(self._ops, self._op_nodes):
            call()
            ts = []
            for _ in range(max(1, number)):
                t0 = time.perf_counter()
                call()
                ts.append(time.perf_counter() - t0)
            ts.sort()
            node = self._nodes[nid]
            out.append({"name": node["attrs"]["func_name"], "node": nid, "seconds": ts[len(ts) // 2]})
        return out

    def get_num_outputs(self) -> int:
        return len(self._heads)

    def get_num_inputs(self) -> int:
        return len(self._input_index)

    def get_output(self, index: int, out: Any = None) -> Any:
        """Output ``index`` of the last run, as a new numpy array (which also has TVM's ``.numpy()``); with
        ``out`` (an NDArray or numpy array of its shape), copied into ``out``, which is returned."""
        if not 0 <= index < len(self._heads):
            raise IndexError(f"output {index} out of range: the graph has {len(self._heads)} outputs")
        value = self._fetch(self._heads[index])
        if out is None:
            return value
        if tuple(out.shape) != value.shape:
            raise ValueError(f"get_output({index}, out): out has shape {tuple(out.shape)}, the output {value.shape}")
        if hasattr(out, "copyfrom"):
            out.copyfrom(value.view(np.ndarray))
        else:
            np.copyto(out, value)
        return out

    def benchmark(self, device: Any = None, number: int = 10, repeat: int = 3,
                  min_repeat_ms: float = 0.0) -> BenchmarkResult:
        """Seconds per run of the whole graph over ``repeat`` repeats of ``number`` runs (after one warm-up
        run; a repeat runs at least ``min_repeat_ms``; on a GPU each run waits for its kernels). ``device`` is
        accepted for TVM's spelling (the library decides where the graph runs)."""
        if number < 1 or repeat < 1:
            raise ValueError(f"benchmark: number and repeat must be >= 1, got {number} and {repeat}")
        self.run()
        results = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            n = 0
            while True:
                for _ in range(number):
                    self.run()
                n += number
                if (time.perf_counter() - t0) * 1e3 >= min_repeat_ms:
                    break
            results.append((time.perf_counter() - t0) / n)
        return BenchmarkResult(results)


_FUNCTIONS = ("set_input", "run", "get_output", "get_input", "get_num_outputs", "get_num_inputs", "benchmark")


class BenchmarkResult:
    """Per-repeat seconds per run, with ``mean``, ``median``, ``min``, ``max``, ``std`` (also as ``r["mean"]``)."""

    def __init__(self, results: list[float]):
        arr = np.array(results, dtype=float)
        self.results = list(results)
        self.mean = float(arr.mean())
        self.median = float(np.median(arr))
        self.min = float(arr.min())
        self.max = float(arr.max())
        self.std = float(arr.std())

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __repr__(self) -> str:
        return (f"BenchmarkResult(mean={self.mean * 1e3:.4f} ms, median={self.median * 1e3:.4f} ms, "
                f"min={self.min * 1e3:.4f} ms, max={self.max * 1e3:.4f} ms, std={self.std * 1e3:.4f} ms, "
                f"{len(self.results)} repeats)")
