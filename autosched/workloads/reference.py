"""Numpy references for the built-in workloads: what every measured kernel is checked against.

A reference is ``fn(inputs, **params) -> output``: ``inputs`` are the
workload's input arrays in the order of its tensors (the output is not passed),
``params`` are the task's canonical parameters (``Task.args``), and the result
is the output array. Register one for a new workload with::

    @autosched.workloads.reference.register_reference("my_op")
    def my_op_ref(inputs, n, m):
        a, b = inputs
        return a + b

:func:`autosched.measure.reference_outputs` calls it with the inputs cast to
float64 (integers to int64), so summation order and rounding in numpy do not
matter, and casts the result to the output's dtype. A workload without a
reference here is checked against its own untransformed schedule compiled by
autosched (see :mod:`autosched.measure.data`).

Everything here is vectorised numpy (convolutions go through
``sliding_window_view`` and one ``tensordot``), so a reference for a ResNet
layer takes milliseconds, not minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from autosched.workloads.blocked_layout import WINOGRAD

ReferenceFn = Callable[..., np.ndarray]

_REFERENCES: dict[str, ReferenceFn] = {}


def register_reference(name: str, override: bool = False) -> Callable[[ReferenceFn], ReferenceFn]:
    """Register ``fn(inputs, **params) -> output`` as the numpy reference of workload ``name``."""

    def do(fn: ReferenceFn) -> ReferenceFn:
        if name in _REFERENCES and not override and _REFERENCES[name] is not fn:
            existing = _REFERENCES[name]
            same = (getattr(existing, "__module__", None), getattr(existing, "__qualname__", None)) == (
                fn.__module__, fn.__qualname__)
            if not same:
                raise ValueError(f"workload {name!r} already has a reference (override=True replaces it)")
        _REFERENCES[name] = fn
        return fn

    return do


def get_reference(name: str) -> ReferenceFn | None:
    """The registered numpy reference of workload ``name``, or None."""
    return _REFERENCES.get(name)


def remove_reference(name: str) -> None:
    """Forget the reference of ``name`` (tests use it to inject a deliberately wrong one and undo it)."""
    _REFERENCES.pop(name, None)


def _pad(x: np.ndarray, pad: int, axes: Sequence[int], value: float = 0.0) -> np.ndarray:
    if pad == 0:
        return x
    width = [(0, 0)] * x.ndim
    for a in axes:
        width[a] = (pad, pad)
    return np.pad(x, width, constant_values=value)


def _windows(x: np.ndarray, kh: int, kw: int, stride: int, axes: tuple[int, int]) -> np.ndarray:
    """Sliding (kh, kw) windows over two axes, strided; window dims appended last."""
    w = sliding_window_view(x, (kh, kw), axis=axes)
    sl = [slice(None)] * w.ndim
    sl[axes[0]] = slice(None, None, stride)
    sl[axes[1]] = slice(None, None, stride)
    return w[tuple(sl)]


@register_reference("matmul")
def matmul_ref(inputs, **_):
    a, b = inputs
    return a @ b


@register_reference("matmul_mixed")
def matmul_mixed_ref(inputs, **_):
    a, b = inputs  # float64 here; the result is cast to out_dtype
    return a @ b


@register_reference("batch_matmul")
def batch_matmul_ref(inputs, **_):
    x, y = inputs
    return np.matmul(x, y)


@register_reference("dense")
def dense_ref(inputs, bias=True, relu=False, **_):
    data, weight = inputs[0], inputs[1]
    out = data @ weight.T
    if bias:
        out = out + inputs[2][None, :]
    if relu:
        out = np.maximum(out, 0)
    return out


@register_reference("conv2d")
def conv2d_ref(inputs, KH=3, KW=3, stride=1, padding=1, layout="NCHW", **_):
    data, weight = inputs
    if layout == "NCHW":
        win = _windows(_pad(data, padding, (2, 3)), KH, KW, stride, (2, 3))  # N, CI, OH, OW, KH, KW
        out = np.tensordot(win, weight, axes=([1, 4, 5], [1, 2, 3]))  # N, OH, OW, CO
        return out.transpose(0, 3, 1, 2)
    if layout == "NHWC":
        win = _windows(_pad(data, padding, (1, 2)), KH, KW, stride, (1, 2))  # N, OH, OW, CI, KH, KW
        return np.tensordot(win, weight, axes=([3, 4, 5], [2, 0, 1]))  # weight HWIO -> N, OH, OW, CO
    raise ValueError(f"conv2d reference: unknown layout {layout!r}")


@register_reference("depthwise_conv2d")
def depthwise_conv2d_ref(inputs, KH=3, KW=3, stride=1, padding=1, **_):
    data, weight = inputs
    win = _windows(_pad(data, padding, (2, 3)), KH, KW, stride, (2, 3))  # N, C, OH, OW, KH, KW
    return np.einsum("ncyxhw,chw->ncyx", win, weight[:, 0], optimize=True)


def nchwc_to_nchw(x: np.ndarray) -> np.ndarray:
    """[N, C/b, H, W, b] -> [N, C, H, W]."""
    n, cb, h, w, b = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)


def nchw_to_nchwc(x: np.ndarray, block: int) -> np.ndarray:
    """[N, C, H, W] -> [N, C/block, H, W, block]."""
    n, c, h, w = x.shape
    return x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)


def oihw_to_blocked(w: np.ndarray, ic_block: int, oc_block: int) -> np.ndarray:
    """[O, I, KH, KW] -> [O/oc_block, I/ic_block, KH, KW, ic_block, oc_block]."""
    o, i, kh, kw = w.shape
    return w.reshape(o // oc_block, oc_block, i // ic_block, ic_block, kh, kw).transpose(0, 2, 4, 5, 3, 1)


def blocked_to_oihw(w: np.ndarray) -> np.ndarray:
    """[O/ob, I/ib, KH, KW, ib, ob] -> [O, I, KH, KW]."""
    ocb, icb, kh, kw, ib, ob = w.shape
    return w.transpose(0, 5, 1, 4, 2, 3).reshape(ocb * ob, icb * ib, kh, kw)


@register_reference("conv2d_nchwc")
def conv2d_nchwc_ref(inputs, KH=3, KW=3, stride=1, padding=1, groups=1, oc_block=1, **_):
    data, weight = nchwc_to_nchw(inputs[0]), blocked_to_oihw(inputs[1])
    ci, co = data.shape[1] // groups, weight.shape[0] // groups
    out = np.concatenate([conv2d_ref([data[:, g * ci:(g + 1) * ci], weight[g * co:(g + 1) * co]], KH=KH, KW=KW,
                                     stride=stride, padding=padding) for g in range(groups)], axis=1)
    return nchw_to_nchwc(out, oc_block)


@register_reference("depthwise_conv2d_nchwc")
def depthwise_conv2d_nchwc_ref(inputs, KH=3, KW=3, stride=1, padding=1, block=1, **_):
    data = nchwc_to_nchw(inputs[0])
    weight = inputs[1].transpose(0, 5, 1, 2, 3, 4).reshape(data.shape[1], 1, KH, KW)
    out = depthwise_conv2d_ref([data, weight], KH=KH, KW=KW, stride=stride, padding=padding)
    return nchw_to_nchwc(out, block)


@register_reference("dense_pack")
def dense_pack_ref(inputs, bias=True, **_):
    data, weight = inputs[0], inputs[1]
    jb, ci, b = weight.shape
    out = data @ weight.transpose(0, 2, 1).reshape(jb * b, ci).T
    return out + inputs[2][None, :] if bias else out


@register_reference("pool2d_nchwc")
def pool2d_nchwc_ref(inputs, KH=3, KW=3, stride=2, padding=1, pool_type="max", block=1, **_):
    data = nchwc_to_nchw(inputs[0])
    out = pool2d_ref([data], H=data.shape[2], W=data.shape[3], KH=KH, KW=KW, stride=stride, padding=padding,
                     pool_type=pool_type)
    return nchw_to_nchwc(out, block)


@register_reference("conv2d_winograd_nchwc")
def conv2d_winograd_nchwc_ref(inputs, padding=1, tile=4, oc_block=1, **_):
    """Winograd's algorithm in float64 from the transformed filters (they cannot be turned back into the
    direct ones), on the padded input: the arithmetic the kernel must reproduce."""
    data, U = nchwc_to_nchw(inputs[0]).astype(np.float64), inputs[1].astype(np.float64)
    bt, at = np.asarray(WINOGRAD[tile]["BT"], np.float64), np.asarray(WINOGRAD[tile]["AT"], np.float64)
    n, c, h, w = data.shape
    oh, ow = h + 2 * padding - 2, w + 2 * padding - 2
    th, tw = -(-oh // tile), -(-ow // tile)
    alpha = tile + 2
    x = np.zeros((n, c, th * tile + 2, tw * tile + 2))
    x[:, :, padding:padding + h, padding:padding + w] = data
    tiles = np.lib.stride_tricks.sliding_window_view(x, (alpha, alpha), axis=(2, 3))[:, :, ::tile, ::tile][
        :, :, :th, :tw]  # n, c, th, tw, alpha, alpha
    v = np.einsum("ia,nctuab,jb->ijnctu", bt, tiles, bt)
    u = U.transpose(0, 1, 2, 4, 3).reshape(alpha, alpha, -1, c)  # alpha, alpha, O, I
    m = np.einsum("ijoc,ijnctu->ijnotu", u, v)
    y = np.einsum("ki,ijnotu,lj->notkul", at, m, at).reshape(n, -1, th * tile, tw * tile)[:, :, :oh, :ow]
    return nchw_to_nchwc(y.astype(inputs[0].dtype), oc_block)


@register_reference("pool2d")
def pool2d_ref(inputs, H=112, W=112, KH=3, KW=3, stride=2, padding=1, pool_type="max", **_):
    (data,) = inputs
    if pool_type == "max":
        win = _windows(_pad(data, padding, (2, 3), value=-np.inf), KH, KW, stride, (2, 3))
        return win.max(axis=(-2, -1))
    if pool_type == "avg":
        win = _windows(_pad(data, padding, (2, 3)), KH, KW, stride, (2, 3))
        s = win.sum(axis=(-2, -1))
        OH, OW = s.shape[2], s.shape[3]
        y = np.arange(OH) * stride - padding
        x = np.arange(OW) * stride - padding
        ch = np.minimum(y + KH, H) - np.maximum(y, 0)
        cw = np.minimum(x + KW, W) - np.maximum(x, 0)
        return s / (ch[:, None] * cw[None, :])
    raise ValueError(f"pool2d reference: unknown pool_type {pool_type!r}")


@register_reference("softmax")
def softmax_ref(inputs, **_):
    (x,) = inputs
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_ELEMENTWISE = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "add_relu": lambda a, b: np.maximum(a + b, 0),
    "sigmoid_mul": lambda a, b: b / (1.0 + np.exp(-a)),
}


@register_reference("elementwise")
def elementwise_ref(inputs, op="add_relu", **_):
    a, b = inputs
    if op not in _ELEMENTWISE:
        raise ValueError(f"elementwise reference: unknown op {op!r}")
    return _ELEMENTWISE[op](a, b)


__all__ = ["ReferenceFn", "get_reference", "register_reference", "remove_reference"]
