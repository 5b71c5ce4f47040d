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
"""

from __future__ import annotations

import functools
from typing import Any

from autosched.te.expr import Expr, IterVar
from autosched.te.hybrid.parser import HybridError, Parser
from autosched.te.hybrid.runtime import HYBRID_GLOBALS, emulate
from autosched.te.tensor import Tensor


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


__all__ = ["HYBRID_GLOBALS", "HybridError", "HybridFunction", "script"]
