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
from typing import Any

from autosched.isa import check_runs_here
from autosched.runtime.cuda import PTX_SYMBOL, CUDAModule, PTXModule
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

__all__ = ["IMPORTS_METADATA_SYMBOL", "ISA_SYMBOL", "METADATA_SYMBOL", "NUM_THREADS_SYMBOL", "DSOModule", "Module",
           "PackedFunc", "ProfileResult", "data_pointer", "load_module"]


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

    def export_library(self, path: str | os.PathLike) -> None:
        if self.imported_modules:
            raise ValueError(f"export_library: a library loaded from {self.path} cannot take imported modules; "
                             "import them into the module before exporting it")
        shutil.copyfile(self.path, os.fspath(path))


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


def load_module(path: str | os.PathLike) -> Module:
    """Load a library written by ``Module.export_library`` (a ``.so``; needs only ctypes and numpy; a CUDA host
    library comes back with its embedded PTX imported), a CUDA device module saved by ``PTXModule.save`` (a
    ``.ptx``), or a CUDA host and device module saved together by ``CUDAModule.save`` (a ``.cuda.json``)."""
    path = os.fspath(path)
    if path.endswith(".cuda.json") or path.endswith(".ptx"):
        return CUDAModule.load(path) if path.endswith(".cuda.json") else PTXModule.load(path)
    lib = _open_library(path)
    meta = _library_string(lib, METADATA_SYMBOL, path)
    if meta.get("device") == "cuda":
        return CUDAModule.from_metadata(meta, _library_string(lib, PTX_SYMBOL, path, required=False) or [])
    return DSOModule(path, lib)
