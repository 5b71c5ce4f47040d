"""The system C compiler (``$CC``, default gcc): compile C source to objects and link shared libraries.

Used to export libraries (LLVM object code plus the C source of external codegens) and to run C source
modules in memory. Needs no llvmlite.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from autosched.errors import CodegenError

C_FLAGS = ("-O3", "-std=c99", "-fPIC", "-ffp-contract=off")


def _cc() -> str:
    return os.environ.get("CC", "gcc")


def _run(cmd: list[str], what: str) -> None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise CodegenError(f"{what} needs a C compiler: {cmd[0]!r} was not found (set $CC)") from None
    if res.returncode != 0:
        raise CodegenError(f"{what} failed ({' '.join(cmd)}):\n{res.stderr.strip()[:4000]}")


def compile_c(source: str, obj_path: str, flags: Sequence[str] = C_FLAGS, what: str = "compiling C source") -> None:
    """Compile one C translation unit (given as text) to a position-independent object file."""
    src = obj_path[:-2] + ".c" if obj_path.endswith(".o") else obj_path + ".c"
    with open(src, "w") as f:
        f.write(source)
    _run([_cc(), *flags, "-c", "-o", obj_path, src], what)


def link_shared(objects: Sequence[str], path: str, libs: Sequence[str] = ("-lm",)) -> None:
    """Link object files into the shared library ``path``."""
    _run([_cc(), "-shared", "-o", os.fspath(path), *objects, *libs], f"linking {path}")


def c_string(data: bytes) -> str:
    """A C string literal holding ``data`` exactly (octal escapes for anything not plainly printable)."""
    out = []
    for b in data:
        ch = chr(b)
        if ch in '"\\?' or b < 32 or b > 126:
            out.append(f"\\{b:03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
