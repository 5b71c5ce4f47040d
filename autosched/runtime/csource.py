"""C source from an external codegen, as a runtime module.

An external compiler (``relay.ext.NAME``) returns a ``CSourceModule``: C code defining functions with the
kernel calling convention (``int32_t f(void *arg0, ..., void *out)``, 0 for success) and their signatures
(argument names, dtypes, static shapes, which are outputs). Called in memory, it is compiled once into a
temporary shared library; exported (``import_module`` into the LLVM module of a model, then
``export_library``), its object code is linked into the same ``.so`` as the LLVM kernels.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

from autosched.runtime.cc import C_FLAGS, compile_c, link_shared
from autosched.runtime.module_base import Module, PackedFunc


def signature(name: str, args: Sequence[tuple[str, Sequence[int], str]], num_outputs: int = 1) -> dict:
    """The signature of a C function taking ``args`` (name, shape, dtype) in order, the last ``num_outputs``
    being outputs; the form PackedFunc checks arguments against."""
    return {"name": name, "args": [{"name": n, "dtype": d, "shape": [int(x) for x in s]} for n, s, d in args],
            "vars": [], "outputs": list(range(len(args) - num_outputs, len(args)))}


class CSourceModule(Module):
    """Functions given as C source plus their signatures; compiled by the system C compiler when needed."""

    def __init__(self, code: str, signatures: Sequence[dict], flags: Sequence[str] = C_FLAGS,
                 libs: Sequence[str] = ("-lm",)):
        names = [s["name"] for s in signatures]
        if len(set(names)) != len(names):
            raise ValueError(f"CSourceModule: function names must be unique, got {names}")
        self.code = code
        self.sigs = [dict(s) for s in signatures]
        self.flags = list(flags)
        self.libs = list(libs)
        self._lock = threading.Lock()
        self._lib: Any = None
        super().__init__({}, names[0] if names else None)

    def _own_function_names(self) -> list[str]:
        return [s["name"] for s in self.sigs]

    def _signatures(self) -> list[dict]:
        return list(self.sigs)

    def get_source(self, fmt: str = "c") -> str:
        if fmt not in ("c", ""):
            raise ValueError(f"a CSourceModule has C source only, not {fmt!r}")
        return self.code

    def get_function(self, name: str) -> PackedFunc:
        if name in self._own_function_names():
            self._load()
        return super().get_function(name)

    def _load(self) -> None:
        """Compile the source into a temporary library and bind its functions (once)."""
        with self._lock:
            if self._lib is not None:
                return
            with tempfile.TemporaryDirectory(prefix="autosched-csource-") as tmp:
                obj = os.path.join(tmp, "src.o")
                compile_c(self.code, obj, self.flags, what=self._what())
                so = os.path.join(tmp, "src.so")
                link_shared([obj], so, self.libs)
                lib = ctypes.CDLL(so)  # the file may go once loaded
            for s in self.sigs:
                try:
                    addr = ctypes.cast(getattr(lib, s["name"]), ctypes.c_void_p).value
                except AttributeError:
                    raise ValueError(f"the C source does not define {s['name']!r}, which its signature names") from None
                self._functions[s["name"]] = PackedFunc(s, addr, self)
            self._lib = lib

    def _what(self) -> str:
        return f"compiling the C source of {', '.join(self._own_function_names())}"

    def _object_files(self, prefix: str) -> tuple[list[str], bool, list[str]]:
        obj = prefix + ".o"
        compile_c(self.code, obj, self.flags, what=self._what())
        return [obj], False, self.libs

    def __repr__(self) -> str:
        return f"<CSourceModule {', '.join(self._own_function_names())}>"
