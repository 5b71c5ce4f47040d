"""``nn.sparse_dense``: a dense layer whose weight is sparse, stored as BSR (block compressed rows: the nonzero
``bs_r x bs_c`` blocks, each block's column and where each block row starts), as TVM's relay and topi have it.

The weight's structure is data (three arrays the kernel reads), so one compiled kernel serves every weight with
the same number of blocks: the reduction over a block row runs ``indptr[row + 1] - indptr[row]`` times, a loop
whose extent the kernel loads. CSR is the case ``bs_r = bs_c = 1`` (``data`` one-dimensional).
``relay.data_dep_optimization.bsr_dense.convert`` turns the dense layers of pruned weights into this op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched import te
from autosched.relay.ir.expr import Expr, RelayError, TensorType, Tuple
from autosched.relay.op.common import _operands
from autosched.relay.op.op import OUT_ELEMWISE_FUSABLE, OpDef, make_call, register_op, register_op_attr
from autosched.relay.op.schedules import compute_stages, inline_injective, shape_of
from autosched.workloads.tile_sizes import divisor, lanes

OP = "nn.sparse_dense"


def _blocks(w_data: Any) -> tuple[int, int]:
    """(bs_r, bs_c) of a BSR data array [blocks, bs_r, bs_c]; CSR data [nonzeros] is 1 x 1 blocks."""
    shape = tuple(int(d) for d in w_data.shape)
    return (1, 1) if len(shape) == 1 else (shape[1], shape[2])


def _sparse_dense_rel(types: list, attrs: dict) -> TensorType:
    x, wd, wi, wp = _operands(types, OP, "data", "weight_data", "weight_indices", "weight_indptr")
    if len(wd.shape) not in (1, 3):
        raise RelayError(f"{OP}: weight_data has shape {wd.shape}; BSR data is [blocks, bs_r, bs_c] and CSR "
                         f"data [nonzeros]")
    if len(wi.shape) != 1 or len(wp.shape) != 1 or wi.shape[0] != wd.shape[0] or wp.shape[0] < 2:
        raise RelayError(f"{OP}: weight_indices {wi.shape} must list one column per block of weight_data "
                         f"{wd.shape}, and weight_indptr {wp.shape} the start of each block row and the end")
    for name, t in (("weight_indices", wi), ("weight_indptr", wp)):
        if not t.dtype.startswith(("int", "uint")):
            raise RelayError(f"{OP}: {name} must be integers, not {t.dtype}")
    if wd.dtype != x.dtype:
        raise RelayError(f"{OP}: data is {x.dtype} but weight_data is {wd.dtype}")
    bs_r, bs_c = (1, 1) if len(wd.shape) == 1 else wd.shape[1:]
    if not x.shape or x.shape[-1] % bs_c:
        raise RelayError(f"{OP}: data shape {x.shape} has {x.shape[-1] if x.shape else 'no'} features, which "
                         f"the weight's blocks of {bs_c} columns do not tile")
    units = (wp.shape[0] - 1) * bs_r
    return TensorType(tuple(x.shape[:-1]) + (units,), x.dtype)


def _sparse_dense_compute(inputs: list, attrs: dict, out_type: TensorType) -> te.Tensor:
    """The block rows' products (``[rows..., block row, bs_r]``, one reduction over the row's blocks and their
    columns), then the blocks laid side by side as the output's units."""
    x, wd, wi, wp = inputs
    bs_r, bs_c = _blocks(wd)
    rows = tuple(out_type.shape[:-1])
    csr = len(wd.shape) == 1

    def block_row(*idx):
        i, nb, r = idx[:-2], idx[-2], idx[-1]
        start = wp[nb]
        e = te.reduce_axis((0, wp[nb + 1] - start), name="elem")
        if csr:
            return te.sum(wd[start + e] * x[i + (wi[start + e],)], axis=e)
        c = te.reduce_axis((0, bs_c), name="c")
        return te.sum(wd[start + e, r, c] * x[i + (wi[start + e] * bs_c + c,)], axis=[e, c])

    block_rows = int(wp.shape[0]) - 1
    blocks = te.compute(rows + (block_rows, bs_r), block_row, name="sparse_dense_block", tag="sparse_dense_block",
                        attrs={"mean_extent": {"elem": int(wd.shape[0]) / max(1, block_rows)}})  # FLOP counts
    return te.compute(out_type.shape, lambda *i: blocks[i[:-1] + (i[-1] // bs_r, i[-1] % bs_r)],
                      name="sparse_dense", tag="sparse_dense")


#: rows of the data multiplied by each weight block while it is in registers (the block's products for that
#: many rows accumulate side by side: ROW_TILE x bs_r values)
ROW_TILE = 8


def _sparse_dense_schedule(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """A tile of rows x one block row per task, in parallel: each weight block of the row is loaded once and
    multiplies the tile's rows, the block's rows in vector lanes (BSR blocks are [bs_r, bs_c]: with bs_c = 1 a
    block's rows are contiguous), the epilogue in the same loops."""
    blocks = next(t for t in compute_stages(anchor) if t.op.tag == "sparse_dense_block")
    inline_injective(sch, out, (blocks,))
    bs_r = shape_of(blocks)[-1]
    *lead, units = sch[out].op.axis
    tile = divisor(shape_of(out)[-2], ROW_TILE) if lead else 1
    if lead:
        row_o, row_i = sch[out].split(lead[-1], factor=tile)
        lead = lead[:-1] + [row_o]
    outer, inner = sch[out].split(units, factor=bs_r)
    if lead:
        sch[out].reorder(*lead, outer, row_i, inner)
    fused = sch[out].fuse(*lead, outer)
    sch[out].parallel(fused)
    sch[blocks].compute_at(sch[out], fused)
    axes = sch[blocks].op.axis  # [rows..., block row, bs_r]; a block row's length is the reduction's extent
    block_row, r = axes[-2], axes[-1]
    vector = bs_r > 1 and bs_r % min(4, lanes(out.dtype)) == 0
    if lead:
        sch[blocks].reorder(block_row, *sch[blocks].op.reduce_axis, axes[-3], r)
        if tile > 1:
            sch[blocks].unroll(axes[-3])
    else:
        sch[blocks].reorder(block_row, *sch[blocks].op.reduce_axis, r)
    if vector:
        sch[blocks].vectorize(r)
        sch[out].vectorize(inner)


register_op(OpDef(OP, _sparse_dense_rel, _sparse_dense_compute, OUT_ELEMWISE_FUSABLE, num_inputs=4,
                  schedule=_sparse_dense_schedule,
                  doc="data @ weight.T with weight [units, in] in BSR (data, indices, indptr) or CSR"))


def random_structure(block_rows: int, block_cols: int, blocks: int, rng: np.random.Generator) -> tuple:
    """``(indices, indptr)`` of ``blocks`` distinct blocks spread at random over a ``block_rows x block_cols``
    grid of blocks, row by row (int32): a structure a kernel measured on random data can read safely."""
    blocks = min(blocks, block_rows * block_cols)
    picked = np.sort(rng.choice(block_rows * block_cols, size=blocks, replace=False))
    rows, cols = picked // block_cols, picked % block_cols
    indptr = np.searchsorted(rows, np.arange(block_rows + 1)).astype("int32")
    return cols.astype("int32"), indptr


def _valid_structure(args: list, rng: np.random.Generator) -> None:
    """Measurement inputs of ``nn.sparse_dense``: the weight's indices and row pointers made a valid structure
    (random integers would read outside the data); the block count is the data's."""
    x, wd, wi, wp = args
    if wi is None or wp is None:
        return
    features = x.shape[-1] if x is not None else None
    bs_c = 1 if wd is None or wd.ndim == 1 else wd.shape[2]
    block_cols = features // bs_c if features else int(wi.max(initial=0)) + 1
    indices, indptr = random_structure(len(wp) - 1, block_cols, len(wi), rng)
    if len(indices) < len(wi):  # more blocks than the grid has: the kernel reads the first ones
        indices = np.concatenate([indices, np.zeros(len(wi) - len(indices), "int32")])
    wi[...] = indices.astype(wi.dtype)
    wp[...] = indptr.astype(wp.dtype)


register_op_attr(OP, "valid_inputs", _valid_structure)


def sparse_dense(data: Expr, weight: Sequence[Expr] | Tuple, sparse_lhs: bool = False) -> Expr:
    """``data @ weight.T`` for a sparse ``weight`` [units, in] given as ``(data, indices, indptr)`` in BSR
    (data [blocks, bs_r, bs_c]) or CSR (data [nonzeros]), TVM's argument order."""
    if sparse_lhs:
        raise RelayError(f"{OP}: sparse_lhs=True (the sparse matrix on the left) is not supported; give the "
                         f"sparse operand as the weight (data @ weight.T)")
    fields = list(weight.fields) if isinstance(weight, Tuple) else list(weight)
    if len(fields) != 3:
        raise RelayError(f"{OP}: the weight is (data, indices, indptr), got {len(fields)} parts")
    return make_call(OP, [data, *fields])
