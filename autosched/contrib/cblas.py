"""TVM's ``tvm.contrib.cblas``: matrix products done by the BLAS numpy links (OpenBLAS or MKL), called from
compiled code through the packed functions ``tvm.contrib.cblas.matmul`` / ``batch_matmul``; ``matmul`` and
``batch_matmul`` here make the ``te.extern`` stages that call them. The packed functions are registered when
this module is imported (importing autosched does), and run in the calling process."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched import te
from autosched.runtime.registry import register_func
from autosched.tir.extern import call_packed


def _product(a: np.ndarray, b: np.ndarray, transa: Any, transb: Any) -> np.ndarray:
    a = np.swapaxes(a, -1, -2) if transa else a
    b = np.swapaxes(b, -1, -2) if transb else b
    return np.matmul(a, b)


def _matmul(a: Any, b: Any, c: Any, transa: Any = False, transb: Any = False, alpha: float = 1.0,
            beta: float = 0.0) -> None:
    """``c = alpha * op(a) @ op(b) + beta * c`` on the arrays the compiled code passes."""
    out = c.numpy()
    prod = _product(a.numpy(), b.numpy(), transa, transb)
    if prod.shape != out.shape:
        raise ValueError(f"cblas.matmul: {a.shape} x {b.shape} (transa={bool(transa)}, transb={bool(transb)}) "
                         f"gives {prod.shape}, the output is {out.shape}")
    res = alpha * prod + (beta * out if beta else 0)
    c.copyfrom(res.astype(out.dtype))


register_func("tvm.contrib.cblas.matmul", _matmul, override=True)
register_func("tvm.contrib.cblas.batch_matmul", _matmul, override=True)
register_func("tvm.contrib.cblas.batch_matmul_iterative", _matmul, override=True)


def matmul(lhs: te.Tensor, rhs: te.Tensor, transa: bool = False, transb: bool = False, **kwargs: Any) -> te.Tensor:
    """``lhs @ rhs`` (either transposed) computed by BLAS, as a te stage."""
    n = lhs.shape[1] if transa else lhs.shape[0]
    m = rhs.shape[0] if transb else rhs.shape[1]
    return te.extern((n, m), [lhs, rhs], lambda ins, outs: call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], transa, transb), name="C", **kwargs)


def batch_matmul(lhs: te.Tensor, rhs: te.Tensor, transa: bool = False, transb: bool = False,
                 iterative: bool = False, **kwargs: Any) -> te.Tensor:
    """The batched product of 3-D ``lhs`` and ``rhs`` (either transposed) computed by BLAS, as a te stage."""
    b = lhs.shape[0]
    n = lhs.shape[2] if transa else lhs.shape[1]
    m = rhs.shape[1] if transb else rhs.shape[2]
    name = "tvm.contrib.cblas.batch_matmul" + ("_iterative" if iterative else "")
    return te.extern((b, n, m), [lhs, rhs], lambda ins, outs: call_packed(
        name, ins[0], ins[1], outs[0], transa, transb), name="C", **kwargs)


__all__ = ["batch_matmul", "matmul"]
