"""Default GPU schedules (target kind ``cuda``) of fused kernels: what ``relay.build(mod, target="cuda")`` uses
for a kernel without a tuning record.

Every one binds threadIdx.x to the output's innermost axis, so the threads of a warp store consecutive
addresses (coalesced); the epilogue (bias, residual add, relu) is computed in the output's loops.

- conv2d (NCHW, groups 1): one thread per output pixel and a few output channels (a register block that
  reuses each input value), rows over blockIdx.y, channel blocks (and the batch) over blockIdx.z;
- dense / matmul: one thread per output column and a few rows;
- anything else (injective, pooling, global pooling, softmax, other reductions): one thread per output
  element, the reductions it needs computed in the thread.
"""

from __future__ import annotations

from typing import Any

from autosched import te
from autosched.relay.op.schedules import _block_stage, compute_stages, inline_injective, is_reduction, shape_of
from autosched.workloads.tile_sizes import divisor

THREADS = 256  # threads per block of the one-thread-per-element default
MAX_THREADS_X = 32  # output columns per block of conv2d (a warp's worth)
MAX_CHANNEL_THREADS = 128  # threads per block of conv2d, columns x channel groups
CHANNELS_PER_THREAD = 4  # conv2d's register block along output channels
DENSE_THREADS = 64  # output columns per block of dense
DENSE_ROWS = 4  # dense's register block along rows


def _threads(n: int, limit: int) -> int:
    """Threads along an axis of extent ``n``: a divisor of ``n`` when one is at least half of ``limit`` (no
    idle threads), else ``min(n, limit)`` (the last block's extra threads skip the work)."""
    d = divisor(n, limit)
    return d if 2 * d >= min(n, limit) else min(n, limit)


def _bind_flat(sch: Any, out: te.Tensor) -> tuple[Any, Any]:
    """The output's axes fused and split over blocks of up to :data:`THREADS` threads, threadIdx.x innermost:
    ``(blockIdx.x loop, threadIdx.x loop)``."""
    axes = sch[out].op.axis
    fused = sch[out].fuse(*axes) if len(axes) > 1 else axes[0]
    total = 1
    for d in out.shape:
        total *= int(d)
    bx, tx = sch[out].split(fused, factor=max(1, min(THREADS, total)))
    sch[out].bind(bx, "blockIdx.x")
    sch[out].bind(tx, "threadIdx.x")
    return bx, tx


def generic(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """One thread per output element: injective stages inlined, each reduction computed in the thread
    (its accumulator in a register)."""
    inline_injective(sch, out)
    stages = [t for t in compute_stages(out) if t is not out]  # consumers first
    local = sch.cache_write(out, "local") if is_reduction(out) else None
    _, tx = _bind_flat(sch, out)
    if local is not None:
        sch[local].compute_at(sch[out], tx)
    for t in stages:
        if is_reduction(t):  # a private buffer of the thread
            sch[t].compute_at(sch[out], tx)


def conv2d(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """conv2d NCHW: a thread computes one output pixel for :data:`CHANNELS_PER_THREAD` channels, threadIdx.x
    along the row, threadIdx.y over channel groups; the padding read in place; the epilogue in the output's
    loops. Grouped convolutions, other layouts and outputs one pixel wide take :func:`generic`."""
    if (len(out.shape) != 4 or shape_of(out) != shape_of(anchor) or int(attrs.get("groups", 1)) != 1
            or str(attrs.get("data_layout", "NCHW")) != "NCHW" or int(out.shape[3]) == 1):
        return generic(sch, out)  # (a one-pixel-wide output: its rows run along the channels)
    inline_injective(sch, out, (anchor,))
    OL = _block_stage(sch, out, anchor)
    N, CO, OH, OW = shape_of(out)
    nx = _threads(OW, MAX_THREADS_X)
    fi = divisor(CO, CHANNELS_PER_THREAD)
    nf = divisor(CO // fi, max(1, MAX_CHANNEL_THREADS // nx))
    n, f, y, x = sch[out].op.axis
    fo, fi_ = sch[out].split(f, factor=fi)
    bf, tf = sch[out].split(fo, factor=nf)
    bx, tx = sch[out].split(x, factor=nx)
    sch[out].reorder(n, bf, y, bx, tf, tx, fi_)
    sch[out].bind(sch[out].fuse(n, bf), "blockIdx.z")
    sch[out].bind(y, "blockIdx.y")
    sch[out].bind(bx, "blockIdx.x")
    sch[out].bind(tf, "threadIdx.y")
    sch[out].bind(tx, "threadIdx.x")
    sch[out].unroll(fi_)
    sch[OL].compute_at(sch[out], tx)
    _, cf, _, _ = sch[OL].op.axis
    rc, rh, rw = sch[OL].op.reduce_axis
    sch[OL].reorder(rc, rh, rw, cf)
    sch[OL].unroll(cf)


def dense(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """dense / matmul (2-D): a thread computes one output column for :data:`DENSE_ROWS` rows, threadIdx.x
    along the columns; the epilogue in the output's loops."""
    if len(out.shape) != 2 or shape_of(out) != shape_of(anchor):
        return generic(sch, out)
    inline_injective(sch, out, (anchor,))
    DL = _block_stage(sch, out, anchor)
    N, CO = shape_of(out)
    i, j = sch[out].op.axis
    bi, ii = sch[out].split(i, factor=divisor(N, DENSE_ROWS))
    bj, tj = sch[out].split(j, factor=_threads(CO, DENSE_THREADS))
    sch[out].reorder(bi, bj, tj, ii)
    sch[out].bind(bi, "blockIdx.y")
    sch[out].bind(bj, "blockIdx.x")
    sch[out].bind(tj, "threadIdx.x")
    sch[out].unroll(ii)
    sch[DL].compute_at(sch[out], tj)
    ci, _ = sch[DL].op.axis
    (k,) = sch[DL].op.reduce_axis
    sch[DL].reorder(k, ci)
    sch[DL].unroll(ci)


#: the schedule of a kernel by its anchor op (others: :func:`generic`)
BY_OP = {"nn.conv2d": conv2d, "nn.dense": dense, "nn.matmul": dense}
