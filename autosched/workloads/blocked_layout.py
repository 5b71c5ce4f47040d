"""Workloads in blocked-channel layouts (NCHW[x]c data, OIHW[x]i[y]o weights), the layout of onnxruntime's
MLAS and TVM's x86 ``conv2d_NCHWc``: a block of channels is the innermost dimension, so one vector holds the
same pixel of ``x`` channels. A convolution then broadcasts one input value into a whole vector of output
channels (no gathers), and weights are packed once, ahead of time, in the order the kernel reads them.

Block sizes left at 0 are the target's (one native vector, :func:`autosched.workloads.tile_sizes.channel_block`),
filled in when the Task is made, so a task's arguments always say the layout built. ``ic_block=1`` reads plain
NCHW data (NCHW1c): the 3-channel stem of a classifier reads its input directly.

The te computes (``conv2d_nchwc_compute`` ...) are shared with the relay ops of the blocked layouts.
"""

from __future__ import annotations

from typing import Any

from autosched import te
from autosched.workloads.registry import register_workload
from autosched.workloads.tile_sizes import channel_block


def _out_size(n: int, k: int, stride: int, pad: int) -> int:
    return (n + 2 * pad - k) // stride + 1


def _pads(padding: Any) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` from one int (all sides) or four."""
    if isinstance(padding, int):
        return (padding,) * 4
    pt, pl, pb, pr = (int(p) for p in padding)
    return pt, pl, pb, pr


def _strides(stride: Any) -> tuple[int, int]:
    return (stride, stride) if isinstance(stride, int) else (int(stride[0]), int(stride[1]))


def pad_blocked(data: te.Tensor, padding: Any, value: float = 0.0, name: str = "pad") -> te.Tensor:
    """Zero (or ``value``) padding of the two spatial axes of an NCHW[x]c tensor (padding: one int or
    ``(top, left, bottom, right)``). Plain NCHW data comes out as NCHW1c."""
    pt, pl, pb, pr = _pads(padding)
    if len(data.shape) == 4:  # NCHW read as NCHW1c
        nchw = data
        data = te.compute(tuple(int(d) for d in nchw.shape) + (1,), lambda n, c, y, x, b: nchw[n, c, y, x],
                          name="nchw1c")
    if pt == pl == pb == pr == 0:
        return data
    N, CB, H, W, B = (int(d) for d in data.shape)

    def f(n, c, y, x, b):
        inside = te.all(y >= pt, y < H + pt, x >= pl, x < W + pl)
        return te.if_then_else(inside, data[n, c, y - pt, x - pl, b], te.const(value, data.dtype))

    return te.compute((N, CB, H + pt + pb, W + pl + pr, B), f, name=name)


def conv2d_nchwc_compute(data: te.Tensor, weight: te.Tensor, stride: Any, padding: Any, groups: int = 1,
                         name: str = "conv2d_nchwc", dilation: Any = 1) -> te.Tensor:
    """``out[n, ob, y, x, o]`` = sum over the input channels of its group and the window of
    ``pad(data)[n, ib, y*s+kh*d, x*s+kw*d, i] * weight[ob, ib', kh, kw, i, o]``; data NCHW[x]c (or NCHW: x = 1),
    weight OIHW[x]i[y]o with I the input channels of one group; stride and dilation one int or (h, w), padding
    one int or (top, left, bottom, right)."""
    src = pad_blocked(data, padding)
    pt, pl, pb, pr = _pads(padding)
    sh, sw = _strides(stride)
    N, ICB = int(data.shape[0]), int(data.shape[1])
    H, W = int(data.shape[2]), int(data.shape[3])
    IB = int(data.shape[4]) if len(data.shape) == 5 else 1
    dh, dw = _strides(dilation)
    OCB, ICBg, KH, KW, IB2, OB = (int(d) for d in weight.shape)
    if IB2 != IB or ICBg * groups != ICB:
        raise ValueError(f"conv2d_nchwc: weight {tuple(weight.shape)} does not fit data {tuple(data.shape)} "
                         f"with {groups} groups")
    OH, OW = (H + pt + pb - (KH - 1) * dh - 1) // sh + 1, (W + pl + pr - (KW - 1) * dw - 1) // sw + 1
    icb = te.reduce_axis((0, ICBg), name="icb")
    kh = te.reduce_axis((0, KH), name="kh")
    kw = te.reduce_axis((0, KW), name="kw")
    ib = te.reduce_axis((0, IB), name="ib")
    ocb_per_group = OCB // groups

    def f(n, ob, y, x, o):
        ic = icb if groups == 1 else ob // ocb_per_group * ICBg + icb
        window = src[n, ic, y * sh + _dilated(kh, dh), x * sw + _dilated(kw, dw), ib]
        return te.sum(window * weight[ob, icb, kh, kw, ib, o], axis=[icb, kh, kw, ib])

    return te.compute((N, OCB, OH, OW, OB), f, name=name)


def _dilated(k: Any, d: int) -> Any:
    """Kernel tap ``k`` at dilation ``d``: ``k`` itself when 1, so undilated computes (their features, their
    tuning records) are what they were."""
    return k if d == 1 else k * d


def depthwise_conv2d_nchwc_compute(data: te.Tensor, weight: te.Tensor, stride: Any, padding: Any,
                                   name: str = "depthwise_conv2d_nchwc", dilation: Any = 1) -> te.Tensor:
    """``out[n, cb, y, x, c]`` = sum over the window of ``pad(data)[n, cb, y*s+kh*d, x*s+kw*d, c] *
    weight[cb, 0, kh, kw, 0, c]``: each channel with its own filter, channels in the vector lanes."""
    N, CB, H, W, B = (int(d) for d in data.shape)
    KH, KW = int(weight.shape[2]), int(weight.shape[3])
    pt, pl, pb, pr = _pads(padding)
    sh, sw = _strides(stride)
    dh, dw = _strides(dilation)
    OH, OW = (H + pt + pb - (KH - 1) * dh - 1) // sh + 1, (W + pl + pr - (KW - 1) * dw - 1) // sw + 1
    src = pad_blocked(data, padding)
    kh = te.reduce_axis((0, KH), name="kh")
    kw = te.reduce_axis((0, KW), name="kw")
    return te.compute((N, CB, OH, OW, B), lambda n, cb, y, x, c: te.sum(
        src[n, cb, y * sh + _dilated(kh, dh), x * sw + _dilated(kw, dw), c] * weight[cb, 0, kh, kw, 0, c],
        axis=[kh, kw]),
        name=name)


def _check_blocks(op: str, **pairs: tuple[int, int]) -> None:
    """Each ``name=(channels, block)`` must have block >= 1 dividing channels."""
    for what, (channels, block) in pairs.items():
        if block < 1 or channels % block:
            raise ValueError(f"{op}: {what} must be a positive divisor of {channels}, got {block}")


def _fill_conv(args: dict[str, Any]) -> dict[str, Any]:
    g = args["groups"]
    if args["ic_block"] == 0:
        args["ic_block"] = channel_block(args["CI"] // g, args["dtype"]) if args["CI"] % g == 0 else 1
    if args["oc_block"] == 0:
        args["oc_block"] = channel_block(args["CO"] // g, args["dtype"]) if args["CO"] % g == 0 else 1
    return args


@register_workload("conv2d_nchwc", fill=_fill_conv)
def conv2d_nchwc(N: int = 1, CI: int = 64, H: int = 56, W: int = 56, CO: int = 64, KH: int = 3, KW: int = 3,
                 stride: int = 1, padding: int = 1, groups: int = 1, ic_block: int = 0, oc_block: int = 0,
                 dtype: str = "float32"):
    """2-D convolution in blocked layouts: data NCHW[ic_block]c, weights OIHW[ic_block]i[oc_block]o (packed
    ahead of time), output NCHW[oc_block]c; blocks 0 = one native vector of the target. ``ic_block=1`` reads
    NCHW data (the 3-channel stem)."""
    if groups < 1 or CI % groups or CO % groups:
        raise ValueError(f"conv2d_nchwc: groups={groups} must divide CI={CI} and CO={CO}")
    _check_blocks("conv2d_nchwc", ic_block=(CI // groups, ic_block), oc_block=(CO // groups, oc_block))
    data = te.placeholder((N, CI // ic_block, H, W, ic_block), dtype, name="data")
    weight = te.placeholder((CO // oc_block, CI // groups // ic_block, KH, KW, ic_block, oc_block), dtype,
                            name="weight")
    return [data, weight, conv2d_nchwc_compute(data, weight, stride, padding, groups)]


def _fill_depthwise(args: dict[str, Any]) -> dict[str, Any]:
    if args["block"] == 0:
        args["block"] = channel_block(args["C"], args["dtype"])
    return args


@register_workload("depthwise_conv2d_nchwc", fill=_fill_depthwise)
def depthwise_conv2d_nchwc(N: int = 1, C: int = 256, H: int = 28, W: int = 28, KH: int = 3, KW: int = 3,
                           stride: int = 1, padding: int = 1, block: int = 0, dtype: str = "float32"):
    """Depthwise 2-D convolution in NCHW[block]c (weights [C/block, 1, KH, KW, 1, block]): channels in the
    vector lanes, so every load is a whole vector."""
    _check_blocks("depthwise_conv2d_nchwc", block=(C, block))
    data = te.placeholder((N, C // block, H, W, block), dtype, name="data")
    weight = te.placeholder((C // block, 1, KH, KW, 1, block), dtype, name="weight")
    return [data, weight, depthwise_conv2d_nchwc_compute(data, weight, stride, padding)]


def dense_pack_compute(data: te.Tensor, weight: te.Tensor, name: str = "dense_pack") -> te.Tensor:
    """``out[i, j]`` = sum over k of ``data[i, k] * weight[j // b, k, j % b]``: a fully-connected layer whose
    weights are packed in blocks of ``b`` output features, so a vector of outputs reads one contiguous run of
    weights per k (a GEMV at batch 1 streams the weights once, with no gathers)."""
    N, CI = (int(d) for d in data.shape)
    JB, CI2, B = (int(d) for d in weight.shape)
    if CI2 != CI:
        raise ValueError(f"dense_pack: weight {tuple(weight.shape)} does not fit data {tuple(data.shape)}")
    k = te.reduce_axis((0, CI), name="k")
    return te.compute((N, JB * B), lambda i, j: te.sum(data[i, k] * weight[j // B, k, j % B], axis=k), name=name)


def _fill_dense(args: dict[str, Any]) -> dict[str, Any]:
    if args["block"] == 0:
        args["block"] = channel_block(args["CO"], args["dtype"])
    return args


@register_workload("dense_pack", fill=_fill_dense)
def dense_pack(N: int = 1, CI: int = 512, CO: int = 1000, block: int = 0, bias: bool = True,
               dtype: str = "float32"):
    """A fully-connected layer over weights packed ahead of time as [CO/block, CI, block] (block 0: up to a
    native vector), with an optional bias: at batch 1 a memory-bound GEMV that streams the weights once."""
    _check_blocks("dense_pack", block=(CO, block))
    data = te.placeholder((N, CI), dtype, name="data")
    weight = te.placeholder((CO // block, CI, block), dtype, name="weight")
    out = dense_pack_compute(data, weight)
    if not bias:
        return [data, weight, out]
    b = te.placeholder((CO,), dtype, name="bias")
    prev = out
    return [data, weight, b, te.compute((N, CO), lambda i, j: prev[i, j] + b[j], name="bias_add")]


def pool2d_nchwc_compute(data: te.Tensor, KH: int, KW: int, stride: int, padding: int, pool_type: str,
                         name: str = "pool2d_nchwc") -> te.Tensor:
    """Max or average pooling of NCHW[x]c data (channels in lanes: every window load is a whole vector);
    the average counts only the elements inside the input."""
    N, CB, H, W, B = (int(d) for d in data.shape)
    OH, OW = _out_size(H, KH, stride, padding), _out_size(W, KW, stride, padding)
    kh = te.reduce_axis((0, KH), name="kh")
    kw = te.reduce_axis((0, KW), name="kw")
    if pool_type == "max":
        src = pad_blocked(data, padding, value=float("-inf"))
        return te.compute((N, CB, OH, OW, B), lambda n, c, y, x, b: te.max(
            src[n, c, y * stride + kh, x * stride + kw, b], axis=[kh, kw]), name=name)
    if pool_type != "avg":
        raise ValueError(f"pool2d_nchwc: pool_type must be 'max' or 'avg', got {pool_type!r}")
    src = pad_blocked(data, padding)
    s = te.compute((N, CB, OH, OW, B), lambda n, c, y, x, b: te.sum(
        src[n, c, y * stride + kh, x * stride + kw, b], axis=[kh, kw]), name=name + "_sum")

    def count(y, x):
        h = te.minimum(y * stride - padding + KH, H) - te.maximum(y * stride - padding, 0)
        w = te.minimum(x * stride - padding + KW, W) - te.maximum(x * stride - padding, 0)
        return (h * w).astype(data.dtype)

    return te.compute((N, CB, OH, OW, B), lambda n, c, y, x, b: s[n, c, y, x, b] / count(y, x), name=name)


@register_workload("pool2d_nchwc", fill=_fill_depthwise)
def pool2d_nchwc(N: int = 1, C: int = 64, H: int = 112, W: int = 112, KH: int = 3, KW: int = 3, stride: int = 2,
                 padding: int = 1, pool_type: str = "max", block: int = 0, dtype: str = "float32"):
    """Max or average 2-D pooling in NCHW[block]c (block 0: one native vector): a ResNet's max pool after the
    stem, with the padding read in place."""
    _check_blocks("pool2d_nchwc", block=(C, block))
    data = te.placeholder((N, C // block, H, W, block), dtype, name="data")
    return [data, pool2d_nchwc_compute(data, KH, KW, stride, padding, pool_type)]


# ------------------------------------------------------------------------------------------------- Winograd
#: F(m x m, 3 x 3) transforms (Lavin and Gray): V = B^T d B on alpha x alpha input tiles (alpha = m + 2),
#: U = G g G^T on the filters (ahead of time), the output tile A^T (U . V) A
WINOGRAD = {
    2: {"BT": [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        "G": [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]],
        "AT": [[1, 1, 1, 0], [0, 1, -1, -1]]},
    4: {"BT": [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        "G": [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        "AT": [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]},
}


def winograd_weight(weight_oihw, tile: int, oc_block: int):
    """The filters of a 3x3 convolution transformed for F(tile, 3), ahead of time (numpy):
    ``[alpha, alpha, O/oc_block, I, oc_block]`` with ``U = G g G^T`` per (output, input) channel pair."""
    import numpy as np

    g = np.asarray(WINOGRAD[tile]["G"], dtype=np.float64)
    w = np.asarray(weight_oihw, dtype=np.float64)
    o, i = w.shape[:2]
    u = np.einsum("ak,oikl,bl->aboi", g, w, g)  # [alpha, alpha, O, I]
    a = u.shape[0]
    return np.ascontiguousarray(u.reshape(a, a, o // oc_block, oc_block, i).transpose(0, 1, 2, 4, 3)
                                .astype(weight_oihw.dtype))


def _lincomb(coefs, term, dtype: str):
    """``sum_k coefs[k] * term(k)`` written out without the zero terms and without multiplying by +-1."""
    out = None
    for k, c in enumerate(coefs):
        if c == 0:
            continue
        t = term(k)
        t = t if c == 1 else (-t if c == -1 else t * te.const(float(c), dtype))
        out = t if out is None else out + t
    return out if out is not None else te.const(0.0, dtype)


def _by_index(i, n: int, value):
    """``value(k)`` for ``k == i`` among ``0..n-1``, as a chain of selects (folds once ``i`` is a constant:
    the transform loops are unrolled)."""
    out = value(n - 1)
    for k in range(n - 2, -1, -1):
        out = te.if_then_else(i == k, value(k), out)
    return out


def conv2d_winograd_nchwc_compute(data: te.Tensor, U: te.Tensor, padding: Any, tile: int,
                                  name: str = "conv2d_winograd_nchwc") -> te.Tensor:
    """A 3x3 stride-1 convolution of NCHW[x]c data by Winograd's F(tile x tile, 3x3): input tiles transformed
    (``B^T d B``, two passes), per tile element a product summed over the input channels with the filters
    transformed ahead of time (``U``: [alpha, alpha, O/y, I, y]), output tiles transformed back (``A^T M A``).
    For m = 4 about a quarter of the multiplications of the direct convolution. Output NCHW[y]c."""
    mat = WINOGRAD[tile]
    BT, AT = mat["BT"], mat["AT"]
    alpha = tile + 2
    N, ICB, H, W, IB = (int(d) for d in data.shape)
    a2, a3, OCB, IC, OB = (int(d) for d in U.shape)
    if a2 != alpha or a3 != alpha or IC != ICB * IB:
        raise ValueError(f"conv2d_winograd_nchwc: transformed weight {tuple(U.shape)} does not fit F({tile}, 3) "
                         f"on data {tuple(data.shape)}")
    pt, pl, pb, pr = _pads(padding)
    OH, OW = H + pt + pb - 2, W + pl + pr - 2
    TH, TW = -(-OH // tile), -(-OW // tile)
    P = N * TH * TW
    dt = data.dtype

    def d(p, ic, a, b):  # element (a, b) of the input tile p for channel ic, zero outside the image
        n, t = p // (TH * TW), p % (TH * TW)
        y, x = t // TW * tile + a - pt, t % TW * tile + b - pl
        inside = te.all(y >= 0, y < H, x >= 0, x < W)
        return te.if_then_else(inside, data[n, ic // IB, y, x, ic % IB], te.const(0.0, dt))

    # B^T d, then (B^T d) B: each an explicit sum of the nonzero coefficients, chosen by index
    bt_d = te.compute((alpha, alpha, P, IC), lambda xi, b, p, ic: _by_index(
        xi, alpha, lambda k: _lincomb(BT[k], lambda a: d(p, ic, a, b), dt)), name="winograd_in1")
    V = te.compute((alpha, alpha, P, IC), lambda xi, nu, p, ic: _by_index(
        nu, alpha, lambda k: _lincomb(BT[k], lambda b: bt_d[xi, b, p, ic], dt)), name="winograd_in")
    ic = te.reduce_axis((0, IC), name="ic")
    M = te.compute((alpha, alpha, OCB, P, OB), lambda xi, nu, ob, p, o: te.sum(
        U[xi, nu, ob, ic, o] * V[xi, nu, p, ic], axis=ic), name="winograd_gemm")
    # M A, then A^T (M A): the output tile's columns, then its rows
    m_a = te.compute((alpha, OCB, P, tile, OB), lambda xi, ob, p, j, o: _by_index(
        j, tile, lambda k: _lincomb(AT[k], lambda nu: M[xi, nu, ob, p, o], dt)), name="winograd_out1")

    def out(n, ob, y, x, o):
        p = (n * TH + y // tile) * TW + x // tile
        return _by_index(y % tile, tile, lambda k: _lincomb(AT[k], lambda xi: m_a[xi, ob, p, x % tile, o], dt))

    return te.compute((N, OCB, OH, OW, OB), out, name=name)


def _fill_winograd(args: dict[str, Any]) -> dict[str, Any]:
    filled = _fill_conv({**args, "groups": 1})
    return {k: filled[k] for k in args}


@register_workload("conv2d_winograd_nchwc", fill=_fill_winograd)
def conv2d_winograd_nchwc(N: int = 1, CI: int = 64, H: int = 56, W: int = 56, CO: int = 64, padding: int = 1,
                          tile: int = 4, ic_block: int = 0, oc_block: int = 0, dtype: str = "float32"):
    """A 3x3 stride-1 convolution by Winograd's F(tile, 3) (tile 2 or 4) in blocked layouts: data
    NCHW[ic_block]c, filters transformed ahead of time ([tile+2, tile+2, CO/oc_block, CI, oc_block], see
    ``winograd_weight``), output NCHW[oc_block]c. The same result as ``conv2d_nchwc`` up to rounding."""
    if tile not in WINOGRAD:
        raise ValueError(f"conv2d_winograd_nchwc: tile must be one of {sorted(WINOGRAD)}, got {tile}")
    _check_blocks("conv2d_winograd_nchwc", ic_block=(CI, ic_block), oc_block=(CO, oc_block))
    alpha = tile + 2
    data = te.placeholder((N, CI // ic_block, H, W, ic_block), dtype, name="data")
    U = te.placeholder((alpha, alpha, CO // oc_block, CI, oc_block), dtype, name="weight")
    return [data, U, conv2d_winograd_nchwc_compute(data, U, padding, tile)]
