"""Link object files into a shared library with the system C compiler (TVM's ``tvm.contrib.cc``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from autosched.runtime.cc import _run, link_shared


def create_shared(output: str | os.PathLike, objects: str | Sequence[str], options: Sequence[str] | None = None,
                  cc: str | None = None) -> None:
    """Link ``objects`` (e.g. what ``Module.save("f.o")`` wrote) into the shared library ``output``, which
    ``autosched.runtime.load_module`` loads. OpenMP's runtime is linked when an object calls it (a kernel
    with a parallel loop)."""
    if isinstance(objects, (str, os.PathLike)):
        objects = [os.fspath(objects)]
    objects = [os.fspath(o) for o in objects]
    libs = list(options or [])
    if any(_calls_openmp(o) for o in objects if o.endswith(".o")) and "-lgomp" not in libs:
        libs.append("-lgomp")
    libs.append("-lm")
    if cc:  # this compiler for this call ($CC, else gcc, otherwise)
        _run([cc, "-shared", "-o", os.fspath(output), *objects, *libs], f"linking {os.fspath(output)}")
    else:
        link_shared(objects, os.fspath(output), libs)


def _calls_openmp(obj: str) -> bool:
    with open(obj, "rb") as f:
        return b"GOMP_parallel" in f.read()


__all__ = ["create_shared"]
