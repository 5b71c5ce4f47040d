"""TOPI's ``topi.testing``: numpy references for checking te computations (convolutions with groups, dilation
and asymmetric padding; softmax, batch_matmul, dilation, pooling), and the schedule functions of a target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from autosched import te
from autosched.driver.build_module import build
from autosched.runtime import ndarray as nd
from autosched.target import Target
from autosched.topi import cuda, generic, nn
from autosched.topi.nn.utils import get_pad_tuple


def _schedules(target: str | Target) -> Any:
    return cuda if Target(target).kind == "cuda" else generic


def dispatch(target: str | Target, dispatch_map: dict) -> Any:
    """The entry of ``dispatch_map`` for ``target``: the first of its keys (``cpu``; ``cuda``, ``gpu``) the map
    has, else ``"generic"`` (TVM's tests keep their implementations in such maps)."""
    for key in Target(target).keys:
        if key in dispatch_map:
            return dispatch_map[key]
    return dispatch_map["generic"]


def get_elemwise_schedule(target: str | Target) -> Any:
    """The elementwise schedule function for ``target`` (TVM's dispatch by target in its tests)."""
    return _schedules(target).schedule_elemwise


def get_broadcast_schedule(target: str | Target) -> Any:
    """The broadcast schedule function for ``target``."""
    return _schedules(target).schedule_broadcast


def get_injective_schedule(target: str | Target) -> Any:
    """The injective schedule function for ``target``."""
    return _schedules(target).schedule_injective


def get_reduce_schedule(target: str | Target) -> Any:
    """The reduction schedule function for ``target``."""
    return _schedules(target).schedule_reduce


def get_conv2d_nchw_implement(target: str | Target) -> tuple[Any, Any]:
    """``(compute, schedule)`` of an NCHW convolution for ``target``."""
    return nn.conv2d_nchw, _schedules(target).schedule_conv2d_nchw


def compare_numpy_tvm(inputs: Sequence[np.ndarray], output: np.ndarray, target: str | Target, device: Any,
                      compute: Any, schedule: Any) -> None:
    """Build ``compute`` over placeholders shaped like ``inputs`` with ``schedule`` for ``target``, run it on
    ``inputs`` and compare its output with ``output`` (TVM's helper of the same name)."""
    placeholders = [te.placeholder(x.shape, dtype=str(x.dtype), name=f"input{k}") for k, x in enumerate(inputs)]
    with Target(target):
        out = compute(*placeholders)
        func = build(schedule([out]), [*placeholders, out], target=target)
    result = nd.array(np.zeros(output.shape, output.dtype), device)
    func(*[nd.array(x, device) for x in inputs], result)
    np.testing.assert_allclose(result.numpy(), output, rtol=1e-5, atol=1e-7)


def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def _conv_nchw(a: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any, groups: int) -> np.ndarray:
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    o, ig, kh, kw = w.shape
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    x = np.pad(a.astype("float64"), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    win = sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    n, c, oh, ow = win.shape[:4]
    og = o // groups
    out = np.empty((n, o, oh, ow))
    for g in range(groups):
        out[:, g * og:(g + 1) * og] = np.einsum("nchwij,ocij->nohw", win[:, g * ig:(g + 1) * ig],
                                                w[g * og:(g + 1) * og].astype("float64"))
    return out.astype(a.dtype)


def conv2d_nchw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any, groups: int = 1,
                       dilation: Any = 1) -> np.ndarray:
    """NCHW data by an OIHW filter."""
    return _conv_nchw(a_np, w_np, stride, padding, dilation, groups)


def conv2d_nhwc_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any, groups: int = 1,
                       dilation: Any = 1) -> np.ndarray:
    """NHWC data by an HWIO filter."""
    out = _conv_nchw(a_np.transpose(0, 3, 1, 2), w_np.transpose(3, 2, 0, 1), stride, padding, dilation, groups)
    return out.transpose(0, 2, 3, 1)


def depthwise_conv2d_python_nchw(input_np: np.ndarray, filter_np: np.ndarray, stride: Any,
                                 padding: Any) -> np.ndarray:
    """NCHW data by a [channels, multiplier, kh, kw] filter."""
    c, m, kh, kw = filter_np.shape
    return _conv_nchw(input_np, filter_np.reshape(c * m, 1, kh, kw), stride, padding, 1, c)


def dilate_python(input_np: np.ndarray, strides: Sequence[int], dilation_value: float = 0.0) -> np.ndarray:
    """``strides[k] - 1`` values inserted between neighbours on axis k."""
    shape = tuple((d - 1) * s + 1 for d, s in zip(input_np.shape, strides))
    out = np.full(shape, dilation_value, dtype=input_np.dtype)
    out[tuple(slice(None, None, s) for s in strides)] = input_np
    return out


def conv2d_transpose_nchw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                                 output_padding: Any = (0, 0)) -> np.ndarray:
    """The transposed convolution of NCHW data by an IOHW filter: the input dilated by the strides and
    convolved with the flipped filter."""
    sh, sw = _pair(stride)
    oph, opw = _pair(output_padding)
    _, _, kh, kw = w_np.shape
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    x = dilate_python(a_np, (1, 1, sh, sw))
    x = np.pad(x, ((0, 0), (0, 0), (kh - 1 - pt, kh - 1 - pb + oph), (kw - 1 - pl, kw - 1 - pr + opw)))
    w = w_np[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    return _conv_nchw(x, np.ascontiguousarray(w), 1, 0, 1, 1)


def softmax_python(a_np: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``."""
    e = np.exp(a_np - a_np.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(a_np.dtype)


def log_softmax_python(a_np: np.ndarray, axis: int = -1) -> np.ndarray:
    """Log-softmax along ``axis``."""
    s = a_np - a_np.max(axis=axis, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis=axis, keepdims=True))).astype(a_np.dtype)


def batch_matmul(x: np.ndarray, y: np.ndarray, out_dtype: str | None = None, trans_x: bool = False,
                 trans_y: bool = True) -> np.ndarray:
    """``[b, m, k] x [b, n, k]`` (with TOPI's defaults) batched products."""
    a = x.transpose(0, 2, 1) if trans_x else x
    b = y.transpose(0, 2, 1) if trans_y else y
    return np.matmul(a, b).astype(out_dtype or x.dtype)


def pool2d_nchw_python(a_np: np.ndarray, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                       pool_type: str, count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling of NCHW data; ``padding`` (top, left, bottom, right)."""
    kh, kw = kernel
    sh, sw = stride
    pt, pl, pb, pr = padding
    fill = -np.inf if pool_type == "max" else 0.0
    x = np.pad(a_np.astype("float64"), ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    win = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    if pool_type == "max":
        return win.max(axis=(4, 5)).astype(a_np.dtype)
    if count_include_pad:
        return win.mean(axis=(4, 5)).astype(a_np.dtype)
    ones = np.pad(np.ones(a_np.shape[2:]), ((pt, pb), (pl, pr)))
    counts = sliding_window_view(ones, (kh, kw))[::sh, ::sw].sum(axis=(2, 3))
    return (win.sum(axis=(4, 5)) / counts).astype(a_np.dtype)


def gather_python(data: np.ndarray, axis: int, indices: np.ndarray) -> np.ndarray:
    """numpy reference of ``topi.gather``."""
    return np.take_along_axis(data, indices.astype(np.int64), axis=axis)


def gather_nd_python(a_np: np.ndarray, indices_np: np.ndarray) -> np.ndarray:
    """numpy reference of ``topi.gather_nd``: ``indices[:, y]`` indexes ``a``'s first dimensions."""
    m = indices_np.shape[0]
    return a_np[tuple(indices_np[k].astype(np.int64) for k in range(m))]


def one_hot(indices: np.ndarray, on_value: Any, off_value: Any, depth: int, axis: int, dtype: str) -> np.ndarray:
    """numpy reference of ``topi.one_hot``."""
    hot = np.arange(depth) == indices[..., None]
    out = np.where(hot, on_value, off_value).astype(dtype)
    return np.moveaxis(out, -1, axis if axis >= 0 else out.ndim + axis)


def sequence_mask(data: np.ndarray, valid_length: np.ndarray, mask_value: float, axis: int) -> np.ndarray:
    """numpy reference of ``topi.sequence_mask``."""
    steps = np.arange(data.shape[axis])
    mask = steps[:, None] >= valid_length[None, :] if axis == 0 else steps[None, :] >= valid_length[:, None]
    mask = mask.reshape(mask.shape + (1,) * (data.ndim - 2))
    return np.where(mask, np.asarray(mask_value, data.dtype), data)


def matrix_set_diag(input_np: np.ndarray, diagonal: np.ndarray, k: Any = 0, align: str = "RIGHT_LEFT") -> np.ndarray:
    """numpy reference of ``topi.matrix_set_diag`` (TensorFlow's MatrixSetDiagV3 alignment)."""
    out = np.array(input_np, copy=True)
    lo, hi = (k, k) if isinstance(k, int) else k
    m, n = out.shape[-2:]
    max_len = diagonal.shape[-1]
    for d in range(lo, hi + 1):
        length = min(m + min(0, d), n - max(0, d))
        right = (align.split("_")[0] if d >= 0 else align.split("_")[1]) == "RIGHT"
        offset = max_len - length if (right and lo != hi) else 0
        row = diagonal if lo == hi else diagonal[..., hi - d, :]
        for p in range(length):
            i, j = (p, p + d) if d >= 0 else (p - d, p)
            out[..., i, j] = row[..., p + offset]
    return out


def strided_slice_python(data: np.ndarray, begin: Sequence[int], end: Sequence[int], strides: Sequence[int],
                         slice_mode: str = "end", axes: Sequence[int] | None = None) -> np.ndarray:
    """numpy reference of ``topi.strided_slice`` (``slice_mode`` "size": ``end`` gives sizes, -1 to the end)."""
    axes = list(axes) if axes is not None else list(range(len(begin)))
    slices = [slice(None)] * data.ndim
    for q, ax in enumerate(axes):
        stride = strides[q] if strides is not None and q < len(strides) else 1
        b = begin[q]
        e = end[q] if q < len(end) else None
        if slice_mode == "size":
            e = None if e is None or e < 0 else b + e
            stride = 1
        slices[ax] = slice(b, e, stride)
    return data[tuple(slices)]


def strided_set_python(data: np.ndarray, v: np.ndarray, begin: Sequence[int], end: Sequence[int],
                       strides: Sequence[int] | None = None) -> np.ndarray:
    """numpy reference of ``topi.strided_set``."""
    out = np.array(data, copy=True)
    strides = list(strides or []) + [1] * (len(begin) - len(strides or []))
    out[tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))] = v
    return out


def _to_channels_first(data: np.ndarray, layout: str) -> tuple[np.ndarray, list[int]]:
    """``data`` as N, C, spatial... (in the order D, H, W appear in ``layout``) and the permutation used."""
    perm = [layout.index("N"), layout.index("C")] + [k for k, c in enumerate(layout) if c in "DHW"]
    return data.transpose(perm), perm


def _from_channels_first(data: np.ndarray, perm: list[int]) -> np.ndarray:
    return data.transpose(np.argsort(perm))


def poolnd_python(np_data: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int],
                  padding_before: Sequence[int], padding_after: Sequence[int], pool_type: str,
                  count_include_pad: bool = True, ceil_mode: bool = False, dtype: str = "float32",
                  layout: str | None = None) -> np.ndarray:
    """numpy reference of ``topi.nn.pool1d/2d/3d`` by plain loops: taps outside the padded input are skipped;
    an average divides by the taps inside the padded input (``count_include_pad``) or inside the input."""
    n = len(kernel)
    layout = layout or "NC" + "DHW"[3 - n:]
    x, perm = _to_channels_first(np.asarray(np_data, dtype="float64"), layout)
    size = x.shape[2:]
    out = []
    for q in range(n):
        span = size[q] + padding_before[q] + padding_after[q] - (kernel[q] - 1) * dilation[q] - 1
        o = (-(-span // strides[q]) if ceil_mode else span // strides[q]) + 1
        out.append(o - 1 if ceil_mode and (o - 1) * strides[q] >= size[q] + padding_before[q] else o)
    res = np.zeros(x.shape[:2] + tuple(out))
    for pos in np.ndindex(*out):
        vals, counted = [], 0
        for tap in np.ndindex(*kernel):
            src = [pos[q] * strides[q] + tap[q] * dilation[q] - padding_before[q] for q in range(n)]
            inside = all(0 <= s < size[q] for q, s in enumerate(src))
            in_pad = all(-padding_before[q] <= s < size[q] + padding_after[q] for q, s in enumerate(src))
            if inside:
                vals.append(x[(slice(None), slice(None)) + tuple(src)])
            counted += in_pad if count_include_pad else inside
        idx = (slice(None), slice(None)) + pos
        if pool_type == "max":
            res[idx] = np.max(vals, axis=0) if vals else -np.inf
        else:
            res[idx] = np.sum(vals, axis=0) / max(counted, 1) if vals else 0.0
    return _from_channels_first(res, perm).astype(dtype)


def pool_grad_nchw(a_np: np.ndarray, out_grad_np: np.ndarray, pool_size: Sequence[int], strides: Sequence[int],
                   padding: Sequence[int], pool_type: str, ceil_mode: bool, count_include_pad: bool = True
                   ) -> np.ndarray:
    """numpy reference of ``topi.nn.pool_grad`` (NCHW, ``padding`` top, left, bottom, right): each output's
    gradient to its window's first maximum, or shared by the window's counted taps."""
    kh, kw = pool_size
    sh, sw = strides
    pt, pl, pb, pr = padding
    h, w = a_np.shape[2:]
    grad = np.zeros(a_np.shape, dtype="float64")
    for y, x in np.ndindex(*out_grad_np.shape[2:]):
        taps = [(y * sh + r - pt, x * sw + c - pl) for r in range(kh) for c in range(kw)]
        inside = [(i, j) for i, j in taps if 0 <= i < h and 0 <= j < w]
        if pool_type == "max":
            for n, ch in np.ndindex(*a_np.shape[:2]):
                vals = [a_np[n, ch, i, j] for i, j in inside]
                i, j = inside[int(np.argmax(vals))]
                grad[n, ch, i, j] += out_grad_np[n, ch, y, x]
        else:
            count = sum(-pt <= i < h + pb and -pl <= j < w + pr for i, j in taps) if count_include_pad else \
                len(inside)
            for i, j in inside:
                grad[:, :, i, j] += out_grad_np[:, :, y, x] / max(count, 1)
    return grad.astype(a_np.dtype)


def adaptive_pool(np_data: np.ndarray, out_size: Sequence[int], pool_type: str, layout: str) -> np.ndarray:
    """numpy reference of ``topi.nn.adaptive_pool`` / ``adaptive_pool3d``: output ``o`` of a dimension of size
    ``s`` pools ``[floor(o s / out), ceil((o + 1) s / out))``."""
    x, perm = _to_channels_first(np.asarray(np_data), layout)
    size = x.shape[2:]
    res = np.zeros(x.shape[:2] + tuple(out_size), dtype=np_data.dtype)
    for pos in np.ndindex(*out_size):
        win = tuple(slice(o * s // k, -(-(o + 1) * s // k)) for o, s, k in zip(pos, size, out_size))
        block = x[(slice(None), slice(None)) + win]
        axes = tuple(range(2, 2 + len(out_size)))
        res[(slice(None), slice(None)) + pos] = block.max(axis=axes) if pool_type == "max" else block.mean(axis=axes)
    return _from_channels_first(res, perm)


def lrn_python(a_np: np.ndarray, size: int, axis: int, bias: float, alpha: float, beta: float) -> np.ndarray:
    """numpy reference of ``topi.nn.lrn``: ``a / (bias + alpha / size * sum of squares over the window of
    size elements along axis centred on each one) ** beta``."""
    sq = np.moveaxis(a_np.astype("float64") ** 2, axis, -1)
    n = sq.shape[-1]
    half = size // 2
    sums = np.zeros_like(sq)
    for c in range(n):
        sums[..., c] = sq[..., max(0, c - half):min(n, c + half + 1)].sum(axis=-1)
    sums = np.moveaxis(sums, -1, axis)
    return (a_np / (bias + alpha / size * sums) ** beta).astype(a_np.dtype)
