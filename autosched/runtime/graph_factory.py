"""A built model as one object, as TVM's ``relay.build`` returns it (its ``GraphExecutorFactoryModule``):

    lib = relay.build(mod, target, params=params)
    m = graph_executor.GraphModule(lib["default"](dev))     # an executor of the model
    lib.export_library("deploy.so")                          # one file: kernels, graph JSON and parameters
    m = graph_executor.GraphModule(runtime.load_module("deploy.so")["default"](dev))

It is also the tuple ``(graph_json, lib, params)`` that autosched's ``relay.build`` has always returned.
An exported model is an ordinary kernel library with two more read-only symbols: the graph JSON
(``GRAPH_SYMBOL``, a C string) and the parameters (``PARAMS_SYMBOL``, an uncompressed ``.npz`` of
``PARAMS_SIZE_SYMBOL`` bytes), assembled from files with ``.incbin`` so that a large model costs no C source.
"""

from __future__ import annotations

import ctypes
import io
import os
import tempfile
from typing import Any

import numpy as np

from autosched.runtime.cc import assemble
from autosched.runtime.cuda import CUDAModule
from autosched.runtime.graph_module import GraphModule, is_cuda_library
from autosched.runtime.module_base import Module, PackedFunc
from autosched.runtime.ndarray import Device

GRAPH_SYMBOL = "__autosched_graph_json"
PARAMS_SYMBOL = "__autosched_graph_params"
PARAMS_SIZE_SYMBOL = "__autosched_graph_params_size"


class GraphExecutorFactoryModule(tuple):
    """``(graph_json, lib, params)`` with TVM's factory interface: ``["default"](dev)`` makes a
    :class:`GraphModule`; ``get_graph_json()``, ``get_lib()``, ``get_params()``; ``export_library(path)``."""

    libmod_name = "default"

    def __new__(cls, graph_json: str, lib: Module, params: dict[str, Any]) -> GraphExecutorFactoryModule:
        return super().__new__(cls, (graph_json, lib, params))

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    @property
    def graph_json(self) -> str:
        return self[0]

    @property
    def lib(self) -> Module:
        return self[1]

    @property
    def params(self) -> dict[str, Any]:
        return self[2]

    def get_graph_json(self) -> str:
        return self[0]

    def get_lib(self) -> Module:
        return self[1]

    def get_params(self) -> dict[str, Any]:
        return self[2]

    def __getitem__(self, key: Any) -> Any:
        """``factory["default"]``: the function that makes an executor on a device; another name: that kernel of
        the library; an integer or a slice: the tuple's items."""
        if not isinstance(key, str):
            return super().__getitem__(key)
        if key == self.libmod_name:
            return self.create_executor
        return self.lib.get_function(key)

    def get_function(self, name: str) -> PackedFunc | Any:
        return self[name]

    def create_executor(self, device: Device | None = None) -> GraphModule:
        """A new executor of the model (its own buffers; the parameters set). ``device`` must be where the
        library runs: a CPU library on ``cpu(0)``, a cuda one on ``cuda(0)``."""
        if device is not None:
            if not isinstance(device, Device):
                raise TypeError(f"{self.libmod_name}(dev): expected a device such as autosched.cpu(0), "
                                f"got {type(device).__name__}")
            kind = "cuda" if is_cuda_library(self.lib) else "cpu"
            if device.device_type != kind:
                raise ValueError(f"the model was built for {'a cuda GPU' if kind == 'cuda' else 'the CPU'} "
                                 f"and cannot run on {device}: pass autosched.{kind}(0)")
        return GraphModule(self[0], self[1], self[2])

    def export_library(self, path: str | os.PathLike) -> None:
        """Write the whole model as one library (``.so``, or ``.tar`` holding it) that
        ``runtime.load_module`` loads back as a factory; needs a C compiler here, not where it is loaded."""
        if self.lib.holds_model and not isinstance(self.lib, CUDAModule):  # loaded from such a library: a copy
            self.lib.export_library(path)
            return
        with tempfile.TemporaryDirectory(prefix="autosched-model-") as tmp:
            self.lib.export_library(path, extra_objects=[self._model_object(tmp)])

    def _model_object(self, tmp: str) -> str:
        """An object file with the graph JSON and the parameters as read-only symbols."""
        graph = os.path.join(tmp, "graph.json")
        with open(graph, "wb") as f:
            f.write(self[0].encode() + b"\0")
        params = os.path.join(tmp, "params.npz")
        np.savez(params, **{k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in self[2].items()})
        size = os.path.getsize(params)
        asm = "\n".join([
            '\t.section .rodata.autosched_model,"a"',
            f"\t.globl {GRAPH_SYMBOL}", "\t.balign 16", f"{GRAPH_SYMBOL}:", f'\t.incbin "{graph}"',
            f"\t.globl {PARAMS_SYMBOL}", "\t.balign 64", f"{PARAMS_SYMBOL}:", f'\t.incbin "{params}"',
            f"\t.globl {PARAMS_SIZE_SYMBOL}", "\t.balign 8", f"{PARAMS_SIZE_SYMBOL}:", f"\t.quad {size}", ""])
        obj = os.path.join(tmp, "model.o")
        assemble(asm, obj, what="export_library (the graph and parameters)")
        return obj


def embedded_model(lib: ctypes.CDLL) -> tuple[str, dict[str, np.ndarray]] | None:
    """The graph JSON and parameters a library exported by :meth:`GraphExecutorFactoryModule.export_library`
    carries, or None for a library of kernels only."""
    try:
        graph = ctypes.c_char.in_dll(lib, GRAPH_SYMBOL)
    except ValueError:
        return None
    size = ctypes.c_uint64.in_dll(lib, PARAMS_SIZE_SYMBOL).value
    blob = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, PARAMS_SYMBOL)), size)
    with np.load(io.BytesIO(blob), allow_pickle=False) as f:
        params = {k: f[k] for k in f.files}
    return ctypes.string_at(ctypes.addressof(graph)).decode(), params


__all__ = ["GRAPH_SYMBOL", "PARAMS_SIZE_SYMBOL", "PARAMS_SYMBOL", "GraphExecutorFactoryModule", "embedded_model"]
