"""Dense layers whose weights are mostly zeros become ``nn.sparse_dense`` over the weight in BSR form (TVM's
``bsr_dense.convert``): the weight ``W`` (a parameter or a constant) is cut into ``bs_r x bs_c`` blocks, and the
blocks holding a nonzero are kept, as the parameters ``"W.data"``, ``"W.indices"`` and ``"W.indptr"``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.relay.data_dep_optimization.utils import on_function, weight_value
from autosched.relay.ir.expr import Call, Expr, Function, IRModule, RelayError, Var, const, free_vars, rewrite, var
from autosched.relay.op.nn.sparse import sparse_dense

log = logging.getLogger(__name__)


def to_bsr(w: np.ndarray, blocksize: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data [blocks, bs_r, bs_c], indices [blocks], indptr [rows / bs_r + 1])`` of a 2-D ``w``: the blocks
    holding a nonzero, row by row, each with its block column (scipy.sparse.bsr_matrix's arrays)."""
    bs_r, bs_c = (int(b) for b in blocksize)
    n, k = w.shape
    if n % bs_r or k % bs_c:
        raise RelayError(f"a {n}x{k} weight does not divide into {bs_r}x{bs_c} blocks")
    blocks = w.reshape(n // bs_r, bs_r, k // bs_c, bs_c).transpose(0, 2, 1, 3)
    kept = np.any(blocks != 0, axis=(2, 3))
    rows, cols = np.nonzero(kept)
    indptr = np.concatenate([[0], np.cumsum(kept.sum(axis=1))]).astype("int32")
    return np.ascontiguousarray(blocks[rows, cols]), cols.astype("int32"), indptr


def convert(func: Function | IRModule, params: dict[str, Any], blocksize: Sequence[int],
            sparsity_threshold: float = 0.85) -> tuple[Any, dict[str, Any]]:
    """Rewrite every ``nn.dense`` whose weight (a parameter, or a constant) has at least ``sparsity_threshold``
    of its entries zero and divides into ``blocksize`` (bs_r, bs_c) blocks; returns ``(func, params)``.
    A weight read through a transpose is not seen: run ``simplify_fc_transpose.convert`` first."""
    if len(blocksize) != 2 or min(int(b) for b in blocksize) < 1:
        raise RelayError(f"bsr_dense.convert: blocksize is (rows, columns) of a block, got {tuple(blocksize)}")
    if not 0.0 <= float(sparsity_threshold) <= 1.0:
        raise RelayError(f"bsr_dense.convert: sparsity_threshold is a fraction of zeros, got {sparsity_threshold}")
    return on_function(func, params, lambda f, p: _convert(f, p, tuple(int(b) for b in blocksize),
                                                           float(sparsity_threshold)))


def _convert(func: Function, params: dict[str, Any], blocksize: tuple[int, int],
             threshold: float) -> tuple[Function, dict[str, Any]]:
    new_vars: list[Var] = []
    done: dict[str, list[Expr]] = {}
    converted = 0

    def sparse_weight(name: str, w: np.ndarray) -> list[Expr] | None:
        if name and name in done:
            return done[name]
        if w.ndim != 2 or w.shape[0] % blocksize[0] or w.shape[1] % blocksize[1] or w.size == 0:
            return None
        zeros = 1.0 - np.count_nonzero(w) / w.size
        if zeros < threshold or not np.any(w):
            return None
        arrays = dict(zip(("data", "indices", "indptr"), to_bsr(w, blocksize)))
        if not name:  # a constant weight stays constant
            return [const(a) for a in arrays.values()]
        parts: list[Expr] = []
        for part, a in arrays.items():
            params[f"{name}.{part}"] = a
            v = var(f"{name}.{part}", shape=a.shape, dtype=str(a.dtype))
            new_vars.append(v)
            parts.append(v)
        done[name] = parts
        return parts

    def fn(node: Expr) -> Expr | None:
        nonlocal converted
        if not (isinstance(node, Call) and node.op.name == "nn.dense") or node.attrs.get("out_dtype"):
            return None
        found = weight_value(node.args[1], params)
        if found is None:
            return None
        parts = sparse_weight(*found)
        if parts is None:
            return None
        converted += 1
        return sparse_dense(node.args[0], parts)

    body = rewrite(func.body, fn)
    log.info("bsr_dense.convert: %d dense layers made sparse (%s blocks)", converted, "x".join(map(str, blocksize)))
    if body is func.body:
        return func, params
    used = {v.name_hint for v in free_vars(body)}
    for p in func.params:
        if p.name_hint not in used:
            params.pop(p.name_hint, None)
    kept = [p for p in func.params if p.name_hint in used]
    return Function(kept + new_vars, body, None, func.attrs), params


__all__ = ["convert", "to_bsr"]
