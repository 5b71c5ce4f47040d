"""The system C compiler (``$CC``, default gcc): compile C source to objects and link shared libraries.

Used to export libraries (LLVM object code plus the C source of external codegens) and to run C source
modules in memory. Needs no llvmlite.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
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


#: the one member of a ``.tar`` library: the shared library itself
TAR_MEMBER = "lib.so"


def link_shared(objects: Sequence[str], path: str, libs: Sequence[str] = ("-lm",)) -> None:
    """Link object files into the shared library ``path``; a path ending in ``.tar`` gets a tar holding that
    library (TVM's suffix for a library to carry elsewhere; ``runtime.load_module`` reads either)."""
    path = os.fspath(path)
    if not path.endswith(".tar"):
        _run([_cc(), "-shared", "-o", path, *objects, *libs], f"linking {path}")
        return
    with tempfile.TemporaryDirectory(prefix="autosched-link-") as tmp:
        so = os.path.join(tmp, TAR_MEMBER)
        _run([_cc(), "-shared", "-o", so, *objects, *libs], f"linking {path}")
        write_tar(so, path)


def write_tar(library: str, path: str) -> None:
    """A tar at ``path`` holding the shared library ``library`` as :data:`TAR_MEMBER`."""
    with tarfile.open(path, "w") as t:
        t.add(library, arcname=TAR_MEMBER)


def assemble(source: str, obj_path: str, what: str = "assembling") -> None:
    """Assemble GNU assembler text (given as text) into an object file; the C compiler drives the assembler."""
    src = obj_path[:-2] + ".s" if obj_path.endswith(".o") else obj_path + ".s"
    with open(src, "w") as f:
        f.write(source)
    _run([_cc(), "-c", "-o", obj_path, src], what)


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
