"""Run a built relay model: the graph JSON from ``relay.build``, its kernels library and its parameters (TVM's
``tvm.contrib.graph_executor``, also importable as ``autosched.contrib.graph_executor``).

Needs only numpy and ctypes (the library may be an exported ``.so`` loaded with ``load_module``), so a
deployed model runs where llvmlite is not installed:

    m = GraphModule(relay.build(mod, "llvm", params)["default"](dev))   # TVM's spelling
    m = GraphModule(graph_json, lib, params)     # or graph_executor.load("out/")
    m.set_input("data", x); m.run(); y = m.get_output(0)

The graph JSON follows TVM's layout: ``nodes`` (``"null"`` for inputs and parameters, ``"tvm_op"`` for
kernel calls with ``attrs.func_name``, ``"__nop"`` the name of a reshape that shares its input's storage),
``arg_nodes``, ``heads``, ``node_row_ptr`` and ``attrs`` with ``shape``, ``dltype`` and ``storage_id`` per
entry. A deployable folder holds ``deploy_graph.json``, ``deploy_lib.so`` and ``deploy_params.npz``
(``numpy.savez`` of name -> array); ``export_library`` of a built model writes the three as one library.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from autosched.runtime.graph_factory import GraphExecutorFactoryModule
from autosched.runtime.graph_module import NOP, BenchmarkResult, GraphModule, OutputArray
from autosched.runtime.module import Module, load_module

GRAPH_FILE = "deploy_graph.json"
LIB_FILE = "deploy_lib.so"
PARAMS_FILE = "deploy_params.npz"


def create(graph_json: str | dict, lib: Module, params: dict[str, Any] | None = None) -> GraphModule:
    """TVM's spelling of ``GraphModule(graph_json, lib, params)``."""
    return GraphModule(graph_json, lib, params)


def save_params(params: dict[str, Any], path: str | os.PathLike) -> None:
    """Write parameters as a ``.npz`` (numpy only)."""
    np.savez(os.fspath(path), **{k: np.asarray(v) for k, v in params.items()})


def load_params(path: str | os.PathLike) -> dict[str, np.ndarray]:
    with np.load(os.fspath(path), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def export(folder: str | os.PathLike, graph_json: str, lib: Module, params: dict[str, Any]) -> dict[str, str]:
    """Write a deployable folder (graph JSON, shared library, parameters); returns the three paths."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    paths = {"graph": os.path.join(folder, GRAPH_FILE), "lib": os.path.join(folder, LIB_FILE),
             "params": os.path.join(folder, PARAMS_FILE)}
    with open(paths["graph"], "w") as f:
        f.write(graph_json)
    lib.export_library(paths["lib"])
    save_params(params, paths["params"])
    return paths


def load(folder: str | os.PathLike) -> GraphModule:
    """A GraphModule from a folder written by :func:`export` (or ``autosched build -o``)."""
    folder = os.fspath(folder)
    with open(os.path.join(folder, GRAPH_FILE)) as f:
        graph = f.read()
    lib = load_module(os.path.join(folder, LIB_FILE))
    return GraphModule(graph, lib, load_params(os.path.join(folder, PARAMS_FILE)))


__all__ = ["NOP", "BenchmarkResult", "GraphExecutorFactoryModule", "GraphModule", "OutputArray", "create", "export",
           "load", "load_params", "save_params"]
