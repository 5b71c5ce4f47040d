"""Default CPU schedules of fused kernels: the anchor op's expert loop nest with its elementwise epilogue
computed in the same loops (conv2d + bias + relu is one nest), and a parallel, vectorized nest otherwise.

Each is ``fn(sch, out, anchor, attrs)``: ``out`` is the kernel's output tensor, ``anchor`` the tensor of its
anchor op (None for injective-only kernels), ``attrs`` the anchor op's attributes.
"""

from __future__ import annotations

from typing import Any

from autosched import te
from autosched.workloads.blocking import divisor, lanes


def shape_of(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def compute_stages(out: te.Tensor) -> list[te.Tensor]:
    """Every compute stage reachable from ``out`` (placeholders excluded), consumers first."""
    seen: dict[int, te.Tensor] = {}
    stack = [out]
    while stack:
        t = stack.pop()
        if id(t.op) in seen or not isinstance(t.op, te.ComputeOp):
            continue
        seen[id(t.op)] = t
        stack.extend(t.op.input_tensors)
    return list(seen.values())


def is_reduction(t: te.Tensor) -> bool:
    return bool(getattr(t.op, "reduce_axis", ()))


def inline_injective(sch: Any, out: te.Tensor, keep: tuple = ()) -> None:
    """Inline every non-reduction stage except the output and those in ``keep``."""
    keep_ids = {id(t.op) for t in keep} | {id(out.op)}
    for t in compute_stages(out):
        if id(t.op) not in keep_ids and not is_reduction(t):
            sch[t].compute_inline()


def flat_parallel_vector(sch: Any, t: te.Tensor) -> None:
    """All axes fused, chunks of four vectors, chunks in parallel (the default for injective kernels)."""
    axes = sch[t].op.axis
    fused = sch[t].fuse(*axes) if len(axes) > 1 else axes[0]
    size = 1
    for d in t.shape:
        size *= int(d)
    step = 4 * lanes(t.dtype)
    if size > step:
        outer, inner = sch[t].split(fused, factor=step)
        sch[t].parallel(outer)
        sch[t].vectorize(inner)
    elif size > 1:
        sch[t].vectorize(fused)


def root_parallel(sch: Any, t: te.Tensor) -> None:
    """A root reduction stage: its spatial axes but the last fused and run in parallel."""
    axes = sch[t].op.axis
    if len(axes) >= 2:
        sch[t].parallel(sch[t].fuse(*axes[:-1]) if len(axes) > 2 else axes[0])
    elif len(axes) == 1 and int(t.shape[0]) > 1:
        sch[t].parallel(axes[0])


def injective(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Elementwise / injective kernels: everything inlined into one parallel, vectorized loop."""
    inline_injective(sch, out)
    flat_parallel_vector(sch, out)


def reduction(sch: Any, out: te.Tensor, anchor: Any = None, attrs: Any = None) -> None:
    """Pools, softmax, batch_matmul and other reductions: injective stages inlined, each reduction at root in
    parallel over its outer axes, the output parallel and vectorized."""
    inline_injective(sch, out)
    for t in compute_stages(out):
        if is_reduction(t) and t is not out:
            root_parallel(sch, t)
    if is_reduction(out):
        root_parallel(sch, out)
    else:
        flat_parallel_vector(sch, out)


def _block_stage(sch: Any, out: te.Tensor, anchor: te.Tensor) -> Any:
    """The stage that accumulates the anchor's register block: the anchor itself when an epilogue follows it
    (it is then computed at the epilogue's loops), else a cache_write of it."""
    if out is anchor or out.op is anchor.op:
        return sch.cache_write(out, "local")
    local = sch.cache_write(anchor, "local")  # a block in registers / on the stack, read by the epilogue
    sch[anchor].compute_inline()
    return local


def conv2d_nchw(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """conv2d NCHW: 16 output channels x one vector of output columns per register block, output rows in
    parallel; the padded input at root (parallel, vectorized); the epilogue in the output's loops."""
    if len(out.shape) != 4 or shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    groups = int(attrs.get("groups", 1))
    depthwise = groups > 1 and groups == int(out.shape[1]) and int(anchor.op.reduce_axis[0].dom.extent.value) == 1
    if groups != 1 and not depthwise:
        return reduction(sch, out)
    pad = next((t for t in anchor.op.input_tensors if t.op.name == "pad" and isinstance(t.op, te.ComputeOp)), None)
    keep = (anchor,) + ((pad,) if pad is not None else ())
    inline_injective(sch, out, keep)
    nl = lanes(out.dtype)
    if pad is not None:
        axes = sch[pad].op.axis
        sch[pad].parallel(sch[pad].fuse(*axes[:-1]))
        if int(pad.shape[-1]) >= nl:
            _, vi = sch[pad].split(axes[-1], factor=nl)
            sch[pad].vectorize(vi)
        else:
            sch[pad].vectorize(axes[-1])
    OL = _block_stage(sch, out, anchor)
    if depthwise:
        return _depthwise_nest(sch, out, OL)
    n, f, y, x = sch[out].op.axis
    CO, OW = int(out.shape[1]), int(out.shape[3])
    fo, fi = sch[out].split(f, factor=divisor(CO, 16))
    xo, xi = sch[out].split(x, factor=divisor(OW, nl))
    sch[out].reorder(n, y, fo, xo, fi, xi)
    sch[out].parallel(sch[out].fuse(n, y, fo))
    sch[out].vectorize(xi)
    sch[OL].compute_at(sch[out], xo)
    _, cf, _, cx = sch[OL].op.axis
    rc, rh, rw = sch[OL].op.reduce_axis
    sch[OL].reorder(rc, rh, rw, cf, cx)
    if int(anchor.op.reduce_axis[2].dom.extent.value) <= 7:
        sch[OL].unroll(rw)
    sch[OL].unroll(cf)
    sch[OL].vectorize(cx)


def _depthwise_nest(sch: Any, out: te.Tensor, OL: Any) -> None:
    """Depthwise conv2d: channels in parallel, 4 output rows accumulated with output columns in lanes."""
    n, c, y, x = sch[out].op.axis
    yo, yi = sch[out].split(y, factor=divisor(int(out.shape[2]), 4))
    sch[out].reorder(n, c, yo, yi, x)
    sch[out].parallel(sch[out].fuse(n, c))
    sch[out].vectorize(x)
    sch[OL].compute_at(sch[out], yo)
    _, _, cy, cx = sch[OL].op.axis
    rc, rh, rw = sch[OL].op.reduce_axis
    sch[OL].reorder(rc, rh, rw, cy, cx)
    sch[OL].unroll(rw)
    sch[OL].unroll(cy)
    sch[OL].vectorize(cx)


def dense(sch: Any, out: te.Tensor, anchor: te.Tensor, attrs: dict) -> None:
    """dense / matmul (2-D): output columns in vector lanes, rows x column blocks in parallel, the reduction
    split by 4 and unrolled, the epilogue in the output's loops."""
    if len(out.shape) != 2 or shape_of(out) != shape_of(anchor):
        return reduction(sch, out)
    inline_injective(sch, out, (anchor,))
    DL = _block_stage(sch, out, anchor)
    nl = lanes(out.dtype)
    CO = int(out.shape[1])
    i, j = sch[out].op.axis
    jo, ji = sch[out].split(j, factor=min(CO, 2 * nl))
    ij = sch[out].fuse(i, jo)
    sch[out].parallel(ij)
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], ij)
    ci, cj = sch[DL].op.axis
    (k,) = sch[DL].op.reduce_axis
    ko, ki = sch[DL].split(k, factor=divisor(int(k.dom.extent.value), 4))
    sch[DL].reorder(ci, ko, ki, cj)
    sch[DL].unroll(ki)
    sch[DL].vectorize(cj)


matmul = dense
