"""Random block-sparse matrices (``topi.sparse.utils.random_bsr_matrix``) and a model's dense weights made
sparse at random (``random_sparse_dense_params``), as TVM's sparse tutorials use them."""

from __future__ import annotations

from typing import Any

import numpy as np

from autosched.errors import AutoschedError
from autosched.relay.data_dep_optimization.bsr_dense import to_bsr
from autosched.relay.data_dep_optimization.utils import as_array
from autosched.relay.ir.expr import Call, Function, Var, post_order


class BSRMatrix:
    """A matrix in block compressed rows: ``data`` [blocks, bs_r, bs_c], ``indices`` (each block's column of
    blocks), ``indptr`` (where each row of blocks starts); the attributes scipy.sparse.bsr_matrix has."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = (int(shape[0]), int(shape[1]))
        self.blocksize = (int(data.shape[1]), int(data.shape[2]))

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def toarray(self) -> np.ndarray:
        bs_r, bs_c = self.blocksize
        out = np.zeros(self.shape, dtype=self.data.dtype)
        for row in range(len(self.indptr) - 1):
            for k in range(self.indptr[row], self.indptr[row + 1]):
                col = int(self.indices[k])
                out[row * bs_r:(row + 1) * bs_r, col * bs_c:(col + 1) * bs_c] = self.data[k]
        return out

    todense = toarray

    def __repr__(self) -> str:
        return f"<{self.shape[0]}x{self.shape[1]} BSRMatrix of {len(self.data)} {self.blocksize} blocks>"


def random_bsr_matrix(m: int, n: int, bs_r: int, bs_c: int, density: float, dtype: str) -> BSRMatrix:
    """An ``m x n`` matrix with about ``density`` of its ``bs_r x bs_c`` blocks nonzero (at least one), the blocks
    chosen and filled from numpy's global random state (seed it for repeatable draws)."""
    if m % bs_r or n % bs_c:
        raise AutoschedError(f"random_bsr_matrix: {m}x{n} does not divide into {bs_r}x{bs_c} blocks")
    if not 0.0 < density <= 1.0:
        raise AutoschedError(f"random_bsr_matrix: density {density} is not in (0, 1]")
    rows, cols = m // bs_r, n // bs_c
    count = max(1, int(round(density * rows * cols)))
    picked = np.sort(np.random.choice(rows * cols, size=count, replace=False))
    dense = np.zeros((rows, cols, bs_r, bs_c), dtype=dtype)
    dense[picked // cols, picked % cols] = np.random.uniform(0.1, 1.0, size=(count, bs_r, bs_c)).astype(dtype)
    data, indices, indptr = to_bsr(dense.transpose(0, 2, 1, 3).reshape(m, n), (bs_r, bs_c))
    return BSRMatrix(data, indices, indptr, (m, n))


def random_sparse_dense_params(func: Function, params: dict[str, Any], bs_r: int, bs_c: int,
                               density: float) -> dict[str, Any]:
    """A copy of ``params`` whose weights of ``nn.dense`` layers (parameters of ``func``) are replaced by random
    block-sparse ones of the same shape (for trying a sparse model without pruned weights)."""
    out = dict(params)
    for node in post_order(func.body):
        if isinstance(node, Call) and not isinstance(node.op, Function) and node.op.name == "nn.dense":
            w = node.args[1]
            if isinstance(w, Var) and w.name_hint in params:
                value = as_array(params[w.name_hint])
                if value.ndim == 2 and value.shape[0] % bs_r == 0 and value.shape[1] % bs_c == 0:
                    out[w.name_hint] = random_bsr_matrix(*value.shape, bs_r, bs_c, density,
                                                         str(value.dtype)).toarray()
    return out
