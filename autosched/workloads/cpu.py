"""Expert CPU schedules for the built-in workloads, written with the public primitives only.

Each is ``fn(sch, tensors, **params)`` and leaves its steps in ``sch.trace``. The
common pattern (as in TVM's x86 schedules): a register block of the output is
accumulated in a ``cache_write`` stage computed at the block's loop, its
innermost axis vectorized and the next one unrolled, the reduction outside that
block, and the outermost loops fused and run in parallel.
"""

from __future__ import annotations

from autosched.workloads import register_schedule

VECTOR_BYTES = 64  # AVX-512


def _divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` not above ``limit``."""
    for f in range(min(n, limit), 0, -1):
        if n % f == 0:
            return f
    return 1


def _lanes(dtype: str) -> int:
    return VECTOR_BYTES // (8 if dtype.endswith("64") else 4)


def _producer(tensor, name_contains: str):
    for t in tensor.op.input_tensors:
        if name_contains in t.op.name:
            return t
    return None


def _root_elementwise(sch, t, lanes: int) -> None:
    """Parallel over the outer axes, vectorized innermost: for pads and other root elementwise stages."""
    axes = sch[t].op.axis
    if len(axes) >= 3:
        outer = sch[t].fuse(*axes[:-1])
        sch[t].parallel(outer)
    elif len(axes) == 2:
        sch[t].parallel(axes[0])
    inner = sch[t].op.axis[-1]
    if int(sch[t].op.shape[-1]) >= lanes:
        _, vi = sch[t].split(inner, factor=lanes)
        sch[t].vectorize(vi)
    else:
        sch[t].vectorize(inner)


@register_schedule("matmul")
def matmul_cpu(sch, tensors, M, N, K, dtype, **_):
    """An (8 x 2 vectors) accumulator block in registers; B packed per column panel so the k loop streams it."""
    A, B, C = tensors
    mr, nr = _divisor(M, 8), _divisor(N, 2 * _lanes(dtype))
    CL = sch.cache_write(C, "local")
    BP = sch.cache_read(B, "global", [CL])
    i, j = sch[C].op.axis
    jo, ji = sch[C].split(j, factor=nr)
    io, ii = sch[C].split(i, factor=mr)
    sch[C].reorder(jo, io, ii, ji)
    sch[C].parallel(jo)
    sch[C].vectorize(ji)
    sch[BP].compute_at(sch[C], jo)
    sch[BP].vectorize(sch[BP].op.axis[1])
    sch[CL].compute_at(sch[C], io)
    ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    sch[CL].reorder(k, ci, cj)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@register_schedule("batch_matmul")
def batch_matmul_cpu(sch, tensors, B, M, N, K, dtype, **_):
    """Per batch, the matmul register block; batches and row blocks run in parallel."""
    X, Y, C = tensors
    mr, nr = _divisor(M, 4), _divisor(N, 2 * _lanes(dtype))
    CL = sch.cache_write(C, "local")
    b, i, j = sch[C].op.axis
    io, ii = sch[C].split(i, factor=mr)
    jo, ji = sch[C].split(j, factor=nr)
    sch[C].reorder(b, io, jo, ii, ji)
    bi = sch[C].fuse(b, io)
    sch[C].parallel(bi)
    sch[C].vectorize(ji)
    sch[CL].compute_at(sch[C], jo)
    _, ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    sch[CL].reorder(k, ci, cj)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)


@register_schedule("dense")
def dense_cpu(sch, tensors, N, CI, CO, bias, relu, dtype, **_):
    """Output features in vector lanes (weights gathered along k), epilogues fused into the output loop."""
    out = tensors[-1]
    lanes = _lanes(dtype)
    stage = out
    chain = []
    while stage.op.name in ("relu", "bias_add"):
        chain.append(stage)
        stage = next(t for t in stage.op.input_tensors if t.op.name in ("bias_add", "dense"))
    dense_t = stage
    for t in chain[1:]:
        sch[t].compute_inline()
    if out is dense_t:
        DL = sch.cache_write(out, "local")
    else:
        DL = dense_t
    i, j = sch[out].op.axis
    jo, ji = sch[out].split(j, factor=min(CO, 2 * lanes))
    ij = sch[out].fuse(i, jo)
    sch[out].parallel(ij)
    sch[out].vectorize(ji)
    sch[DL].compute_at(sch[out], ij)
    ci, cj = sch[DL].op.axis
    (k,) = sch[DL].op.reduce_axis
    ko, ki = sch[DL].split(k, factor=_divisor(CI, 4))
    sch[DL].reorder(ci, ko, ki, cj)
    sch[DL].unroll(ki)
    sch[DL].vectorize(cj)


@register_schedule("conv2d")
def conv2d_cpu(sch, tensors, N, H, W, CI, CO, KH, KW, stride, padding, layout, dtype, **_):
    data, weight, out = tensors
    pad = _producer(out, "pad")
    lanes = _lanes(dtype)
    if pad is not None:
        _root_elementwise(sch, pad, lanes)
    OL = sch.cache_write(out, "local")
    if layout == "NCHW":
        # 16 output channels x one vector of output columns (a divisor of the width: no tails) per block
        n, f, y, x = sch[out].op.axis
        OW = (W + 2 * padding - KW) // stride + 1
        fo, fi = sch[out].split(f, factor=_divisor(CO, 16))
        xo, xi = sch[out].split(x, factor=_divisor(OW, lanes))
        # rows outermost: each thread then reads its own band of the padded input (half the cache traffic)
        sch[out].reorder(n, y, fo, xo, fi, xi)
        par = sch[out].fuse(n, y, fo)
        sch[out].parallel(par)
        sch[out].vectorize(xi)
        sch[OL].compute_at(sch[out], xo)
        _, cf, _, cx = sch[OL].op.axis
        rc, rh, rw = sch[OL].op.reduce_axis
        sch[OL].reorder(rc, rh, rw, cf, cx)
        sch[OL].unroll(rw)
        sch[OL].unroll(cf)
        sch[OL].vectorize(cx)
    else:
        # NHWC: output channels in vector lanes (two vectors), a few output columns unrolled
        n, y, x, f = sch[out].op.axis
        OW = (W + 2 * padding - KW) // stride + 1
        fo, fi = sch[out].split(f, factor=_divisor(CO, 2 * lanes))
        xo, xi = sch[out].split(x, factor=_divisor(OW, 7))
        sch[out].reorder(n, y, xo, fo, xi, fi)
        par = sch[out].fuse(n, y, xo)
        sch[out].parallel(par)
        sch[out].vectorize(fi)
        sch[OL].compute_at(sch[out], fo)
        _, _, cx, cf = sch[OL].op.axis
        rh, rw, rc = sch[OL].op.reduce_axis
        sch[OL].reorder(rh, rw, rc, cx, cf)
        sch[OL].unroll(cx)
        sch[OL].vectorize(cf)


@register_schedule("depthwise_conv2d")
def depthwise_conv2d_cpu(sch, tensors, N, C, H, W, KH, KW, stride, padding, dtype, **_):
    """Channels in parallel, a few output rows accumulated in registers with output columns in lanes."""
    data, weight, out = tensors
    pad = _producer(out, "pad")
    if pad is not None:
        _root_elementwise(sch, pad, _lanes(dtype))
    OL = sch.cache_write(out, "local")
    n, c, y, x = sch[out].op.axis
    OH = (H + 2 * padding - KH) // stride + 1
    yo, yi = sch[out].split(y, factor=_divisor(OH, 4))
    sch[out].reorder(n, c, yo, yi, x)
    nc = sch[out].fuse(n, c)
    sch[out].parallel(nc)
    sch[out].vectorize(x)
    sch[OL].compute_at(sch[out], yo)
    _, _, cy, cx = sch[OL].op.axis
    rh, rw = sch[OL].op.reduce_axis
    sch[OL].reorder(rh, rw, cy, cx)
    sch[OL].unroll(rw)
    sch[OL].unroll(cy)
    sch[OL].vectorize(cx)


@register_schedule("pool2d")
def pool2d_cpu(sch, tensors, N, C, H, W, KH, KW, stride, padding, pool_type, dtype, **_):
    """Channels in parallel, output columns in lanes, the window unrolled; padding read in place (masked)."""
    data, out = tensors
    red = out if pool_type == "max" else _producer(out, "pool_sum")
    pad = _producer(red, "pad")
    if pad is not None:
        sch[pad].compute_inline()
    n, c, y, x = sch[out].op.axis
    nc = sch[out].fuse(n, c)
    sch[out].parallel(nc)
    if red is not out:
        sch[red].compute_at(sch[out], y)
        _, _, _, rx = sch[red].op.axis
        rh, rw = sch[red].op.reduce_axis
        sch[red].reorder(rh, rw, rx)
        sch[red].vectorize(rx)
        sch[out].vectorize(x)
    else:
        sch[out].vectorize(x)


@register_schedule("softmax")
def softmax_cpu(sch, tensors, M, N, dtype, **_):
    """One row per iteration of a parallel loop: max, exp, sum and the division all on that row."""
    X, out = tensors
    ex = _producer(out, "exp")
    sm = _producer(out, "row_sum")
    mx = _producer(ex, "row_max")
    lanes = _lanes(dtype)
    i, j = sch[out].op.axis
    sch[out].parallel(i)
    for t in (mx, ex, sm):
        sch[t].compute_at(sch[out], i)
    sch[ex].vectorize(sch[ex].op.axis[1])
    jo, ji = sch[out].split(j, factor=lanes)
    sch[out].vectorize(ji)


@register_schedule("elementwise")
def elementwise_cpu(sch, tensors, N, C, H, W, op, dtype, **_):
    """All axes fused, chunks of four vectors, chunks in parallel."""
    out = tensors[-1]
    fused = sch[out].fuse(*sch[out].op.axis)
    outer, inner = sch[out].split(fused, factor=4 * _lanes(dtype))
    sch[out].parallel(outer)
    sch[out].vectorize(inner)
