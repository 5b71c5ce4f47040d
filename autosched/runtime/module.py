"""Compiled modules: host libraries (:class:`DSOModule`, an exported ``.so``) and :func:`load_module`, which
loads any kind (host libraries, CUDA host and device modules); needs only ctypes and numpy (no llvmlite).

The interface every module implements (``Module``, ``PackedFunc``, the metadata symbols) is in
:mod:`autosched.runtime.module_base`, below the kinds of modules; it is re-exported here under its old names.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from typing import Any

from autosched.isa import check_runs_here
from autosched.runtime.cc import TAR_MEMBER, write_tar
from autosched.runtime.cuda import PTX_SYMBOL, CUDAModule, PTXModule
from autosched.runtime.graph_factory import GraphExecutorFactoryModule, embedded_model
from autosched.runtime.module_base import (
    IMPORTS_METADATA_SYMBOL,
    ISA_SYMBOL,
    METADATA_SYMBOL,
    NUM_THREADS_SYMBOL,
    RUN_PLAN_SYMBOL,
    Module,
    PackedFunc,
    ProfileResult,
    data_pointer,
)

__all__ = ["IMPORTS_METADATA_SYMBOL", "ISA_SYMBOL", "METADATA_SYMBOL", "NUM_THREADS_SYMBOL", "DSOModule",
           "GraphExecutorFactoryModule", "Module", "PackedFunc", "ProfileResult", "data_pointer", "load_module"]


class DSOModule(Module):
    """A module loaded from an exported shared library."""

    def __init__(self, path: str, lib: ctypes.CDLL | None = None):
        """Load ``path``, or wrap ``lib`` when the caller has already opened it (one ``dlopen`` per module:
        each is a reference that must be closed before the library can leave memory)."""
        self.path = os.fspath(path)
        if lib is None:
            lib = _open_library(self.path)
        self._lib = lib
        meta = _library_string(self._lib, METADATA_SYMBOL, self.path)
        isa = _library_string(self._lib, ISA_SYMBOL, self.path, required=False) or {}
        #: the CPU the library was built for and the instruction-set extensions its code uses (libraries
        #: exported before these were recorded say nothing, and are not checked)
        self.cpu: str | None = isa.get("cpu")
        self.features: list[str] = list(isa.get("features", []))
        check_runs_here(self.features, self.cpu or "another CPU", f"kernel library {self.path}")
        try:
            self.num_threads_address = ctypes.addressof(ctypes.c_int32.in_dll(self._lib, NUM_THREADS_SYMBOL))
        except ValueError:
            self.num_threads_address = 0
        try:
            self.run_plan_address = ctypes.cast(getattr(self._lib, RUN_PLAN_SYMBOL), ctypes.c_void_p).value or 0
            self._plan_names = frozenset(s["name"] for s in meta["functions"] if not s.get("vars"))
        except AttributeError:  # (a library exported before plans existed)
            self.run_plan_address = 0
        env = os.environ.get("AUTOSCHED_NUM_THREADS")
        if env:
            self.set_num_threads(int(env))
        try:  # functions of imported modules (external codegens' C source) linked into the same library
            raw = ctypes.c_char.in_dll(self._lib, IMPORTS_METADATA_SYMBOL)
            meta["functions"] = meta["functions"] + json.loads(ctypes.string_at(ctypes.addressof(raw)).decode())[
                "functions"]
        except ValueError:
            pass
        funcs = {}
        for sig in meta["functions"]:
            addr = ctypes.cast(getattr(self._lib, sig["name"]), ctypes.c_void_p).value
            funcs[sig["name"]] = PackedFunc(sig, addr, self)
        super().__init__(funcs, meta.get("entry"))

    def export_library(self, path: str | os.PathLike, extra_objects: Sequence[str] = ()) -> None:
        """A copy of the library (in a ``.tar`` when ``path`` ends so); it cannot be linked again."""
        if self.imported_modules or extra_objects:
            raise ValueError(f"export_library: a library loaded from {self.path} is copied as it is, so it cannot "
                             f"take {'imported modules' if self.imported_modules else 'more objects'}; export the "
                             f"module these came from instead")
        path = os.fspath(path)
        if path.endswith(".tar"):
            write_tar(self.path, path)
        else:
            shutil.copyfile(self.path, path)


def _open_library(path: str) -> ctypes.CDLL:
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such library: {path}")
    try:
        return ctypes.CDLL(os.path.abspath(path))
    except OSError as e:
        raise OSError(f"cannot load {path}: {e}") from e


def _library_string(lib: ctypes.CDLL, symbol: str, path: str, required: bool = True) -> Any:
    """The JSON string ``symbol`` of a loaded library, decoded (None when absent and not ``required``)."""
    try:
        raw = ctypes.c_char.in_dll(lib, symbol)
    except ValueError:
        if not required:
            return None
        raise ValueError(f"{path} is not an autosched library (no {symbol} symbol)") from None
    return json.loads(ctypes.string_at(ctypes.addressof(raw)).decode())


def load_module(path: str | os.PathLike) -> Module | GraphExecutorFactoryModule:
    """Load a library written by ``export_library`` (a ``.so``, or a ``.tar`` holding one; needs only ctypes and
    numpy; a CUDA host library comes back with its embedded PTX imported; a whole model exported by relay.build's
    result comes back as that: ``load_module(path)["default"](dev)`` runs it), a CUDA device module saved by
    ``PTXModule.save`` (a ``.ptx``), or a CUDA host and device module saved by ``CUDAModule.save`` (a
    ``.cuda.json``)."""
    path = os.fspath(path)
    if path.endswith(".cuda.json") or path.endswith(".ptx"):
        return CUDAModule.load(path) if path.endswith(".cuda.json") else PTXModule.load(path)
    if path.endswith(".tar"):
        return _load_tar(path)
    lib = _open_library(path)
    meta = _library_string(lib, METADATA_SYMBOL, path)
    model = embedded_model(lib)
    if meta.get("device") == "cuda":
        mod: Module = CUDAModule.from_metadata(meta, _library_string(lib, PTX_SYMBOL, path, required=False) or [])
    else:
        mod = DSOModule(path, lib)
    if model is None:
        return mod
    mod.holds_model = True
    return GraphExecutorFactoryModule(model[0], mod, model[1])


def _load_tar(path: str) -> Module | GraphExecutorFactoryModule:
    """A library from a ``.tar`` written by ``export_library``: its one member, unpacked into a folder that
    lives as long as the module (a copy of the library exported again is taken from there)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such library: {path}")
    tmp = tempfile.TemporaryDirectory(prefix="autosched-tar-")
    try:
        with tarfile.open(path) as t:
            members = t.getmembers()
            if [m.name for m in members] != [TAR_MEMBER] or not members[0].isfile():
                raise ValueError(f"{path} is not a library written by export_library (a tar holding only "
                                 f"{TAR_MEMBER}; it holds {', '.join(t.getnames()[:5]) or 'nothing'})")
            with t.extractfile(members[0]) as src, open(os.path.join(tmp.name, TAR_MEMBER), "wb") as dst:
                shutil.copyfileobj(src, dst)
    except tarfile.TarError as e:
        tmp.cleanup()
        raise ValueError(f"cannot read {path} as a tar: {e}") from e
    except ValueError:
        tmp.cleanup()
        raise
    mod = load_module(os.path.join(tmp.name, TAR_MEMBER))
    kernels = mod.lib if isinstance(mod, GraphExecutorFactoryModule) else mod
    kernels._unpacked = tmp  # removed when the module goes
    return mod
