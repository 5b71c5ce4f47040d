"""TVM's hybrid script (``te.hybrid.script``): an operator written as a Python function with loops, branches
and tensor indexing, for what ``te.compute`` cannot say (data-dependent control flow, sequential updates)::

    @te.hybrid.script
    def outer_product(a, b):
        c = output_tensor((a.shape[0], b.shape[0]), a.dtype)
        for i in range(a.shape[0]):
            for j in parallel(b.shape[0]):
                c[i, j] = a[i] * b[j]
        return c

Called on te tensors it returns the output tensor(s) of an operation whose body is the script's loop IR (a
``te.extern``-style stage: it builds, reads other stages and is read by them; its loops are the script's, not
scheduled). Called on numpy arrays and numbers it runs as Python (``runtime.HYBRID_GLOBALS``), which is how
scripts are checked. Supported: ``range`` / ``serial`` / ``parallel`` / ``vectorize`` / ``unroll`` /
``const_range`` / ``bind`` loops, ``if`` / ``else`` and ``x if c else y``, ``output_tensor``, ``allocate``,
scalar variables, math intrinsics (``sqrt``, ``exp``, ``log``, ``tanh``, ``sigmoid``, ``power``, ...), casts
(``float32(x)``), ``min`` / ``max`` / ``abs`` / ``len`` / ``ceil_div``, constants from the enclosing Python,
lists of tensors and calls of other hybrid scripts (inlined).

``build(sch, inputs, outputs)`` goes the other way (TVM's ``te.hybrid.build``): a schedule's loop nest written
as a hybrid script, held by a :class:`HybridModule` that is called like the script and saved as a .py file.
"""

from __future__ import annotations

import ast
import functools
import itertools
import linecache
import os
from collections.abc import Sequence
from typing import Any

from autosched.te.expr import Expr, IterVar
from autosched.te.hybrid.parser import HybridError, Parser
from autosched.te.hybrid.runtime import HYBRID_GLOBALS, emulate
from autosched.te.hybrid.source import hybrid_source
from autosched.te.stage import Schedule
from autosched.te.tensor import Tensor
from autosched.tir.lower import lower


def _is_te(a: Any) -> bool:
    if isinstance(a, (Tensor, Expr, IterVar)):
        return True
    return isinstance(a, (list, tuple)) and any(_is_te(x) for x in a)


class HybridFunction:
    """A function marked ``@script``: te arguments give an operation, numpy ones run it as Python."""

    is_hybrid_script = True

    def __init__(self, func: Any):
        self.func = func
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any) -> Any:
        if any(_is_te(a) for a in args):
            outs = Parser(self).build(args)
            return outs[0] if len(outs) == 1 else outs
        return emulate(self.func, *args)

    @property
    def __globals__(self) -> dict:
        return self.func.__globals__

    def __repr__(self) -> str:
        return f"<hybrid script {self.func.__name__}>"


def script(pyfunc: Any) -> HybridFunction:
    """Mark ``pyfunc`` as a hybrid script (TVM's ``te.hybrid.script``)."""
    return HybridFunction(pyfunc)


class HybridModule:
    """A hybrid script held as source text (TVM's ``te.hybrid.HybridModule``): called like the script it holds
    (te tensors give an operation, numpy arrays run it as Python); ``save`` / ``load`` keep it as a .py file."""

    _count = itertools.count()

    def __init__(self, src: str | None = None, name: str | None = None):
        self.src = self.name = None
        self.func: HybridFunction | None = None
        if src is not None:
            self._set(src, name)

    def _set(self, src: str, name: str | None) -> None:
        try:
            tree = ast.parse(src)
        except SyntaxError as e:
            raise HybridError(f"HybridModule: the source is not Python ({e})") from None
        defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        if not defs or (name is not None and name not in defs):
            raise HybridError(f"HybridModule: the source defines no function {name or ''}".rstrip())
        self.src, self.name = src, name or defs[0]
        # the parser reads a script's source back (inspect.getsource): give the text a file name in linecache
        filename = f"<hybrid module {self.name} {next(self._count)}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        scope: dict[str, Any] = {"__name__": f"hybrid_{self.name}", **HYBRID_GLOBALS}
        exec(compile(src, filename, "exec"), scope)  # noqa: S102 - the source is a hybrid script, as TVM runs it
        self.func = HybridFunction(scope[self.name])

    def __call__(self, *args: Any) -> Any:
        if self.func is None:
            raise HybridError("HybridModule: nothing loaded (give the source or call load(path) first)")
        return self.func(*args)

    def get_source(self) -> str:
        return self.src or ""

    def save(self, path: str | os.PathLike) -> None:
        """Write the script to ``path`` (a .py file)."""
        with open(path, "w") as f:
            f.write(self.get_source())

    def load(self, path: str | os.PathLike) -> None:
        """Read a script saved by :meth:`save`."""
        with open(path) as f:
            self._set(f.read(), None)


def build(sch: Schedule, inputs: Sequence[Any], outputs: Sequence[Tensor] | Tensor,
          name: str = "hybrid_func") -> HybridModule:
    """The schedule's loop nest written back as a hybrid script (TVM's ``te.hybrid.build``): ``inputs`` (te
    tensors and scalar variables, in order) become its arguments, ``outputs`` its ``output_tensor``s."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    func = lower(sch, [*inputs, *outs], name=name)
    return HybridModule(hybrid_source(func, len(outs), name), name)


__all__ = ["HYBRID_GLOBALS", "HybridError", "HybridFunction", "HybridModule", "build", "script"]
