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
    kh, kw = w.shape[2:]
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    x = np.pad(a.astype("float64"), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    win = sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    return _grouped_sums("nchwij,ocij->nohw", win, w, groups).astype(a.dtype)


def _grouped_sums(spec: str, x: np.ndarray, w: np.ndarray, groups: int) -> np.ndarray:
    """A grouped convolution's sums in float64: the einsum ``spec`` of each group's channels of ``x`` (axis 1) by
    the group's filters of ``w`` [O, I / groups, ...], the groups' outputs joined along axis 1."""
    o, ig = w.shape[:2]
    og = o // groups
    return np.concatenate([np.einsum(spec, x[:, g * ig:(g + 1) * ig], w[g * og:(g + 1) * og].astype("float64"))
                           for g in range(groups)], axis=1)


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
                                 output_padding: Any = (0, 0), groups: int = 1) -> np.ndarray:
    """The transposed convolution of NCHW data by an IOHW filter [C_in, C_out / groups, kh, kw]: the input
    dilated by the strides and convolved with the flipped filter (its channel axes swapped per group)."""
    sh, sw = _pair(stride)
    oph, opw = _pair(output_padding)
    cin, og, kh, kw = w_np.shape
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    x = dilate_python(a_np, (1, 1, sh, sw))
    x = np.pad(x, ((0, 0), (0, 0), (kh - 1 - pt, kh - 1 - pb + oph), (kw - 1 - pl, kw - 1 - pr + opw)))
    w = w_np[:, :, ::-1, ::-1].reshape(groups, cin // groups, og, kh, kw).transpose(0, 2, 1, 3, 4)
    return _conv_nchw(x, np.ascontiguousarray(w.reshape(groups * og, cin // groups, kh, kw)), 1, 0, 1, groups)


def deformable_conv2d_nchw_python(a_np: np.ndarray, offset_np: np.ndarray, w_np: np.ndarray, stride: Any,
                                  padding: Any, dilation: Any, deformable_groups: int, groups: int,
                                  mask_np: np.ndarray | None = None) -> np.ndarray:
    """Deformable convolution (NCHW data, OIHW filter; TVM's arguments, any groups): each tap read at its window
    place plus its (y, x) offset, bilinearly from the corners inside the image, times ``mask_np`` (DCNv2). As ONNX
    and torchvision define it: a position within a pixel of the image still reads its corners on it (TVM's own
    reference zeroes every position with y or x below 0)."""
    n, c, h, w = a_np.shape
    kh, kw = w_np.shape[2:]
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    pt, pl, _, _ = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    oh, ow = offset_np.shape[2:]
    dg = deformable_groups
    off = offset_np.astype("float64").reshape(n, dg, kh, kw, 2, oh, ow)
    ys = np.arange(oh)[:, None] * sh - pt + np.arange(kh)[:, None, None, None] * dh  # [kh, 1, oh, 1]
    xs = np.arange(ow) * sw - pl + np.arange(kw)[:, None, None] * dw  # [kw, 1, ow]
    py = off[:, :, :, :, 0] + ys[None, None]  # [n, dg, kh, kw, oh, ow]
    px = off[:, :, :, :, 1] + xs[None, None, None]
    inside = (py > -1) & (py < h) & (px > -1) & (px < w)
    y0, x0 = np.floor(py), np.floor(px)
    scale = np.ones_like(py) if mask_np is None else mask_np.astype("float64").reshape(py.shape)
    a = a_np.astype("float64").reshape(n, dg, c // dg, h, w)
    cols = np.zeros((n, dg, c // dg, kh, kw, oh, ow))
    bi, gi = np.arange(n)[:, None, None, None, None, None], np.arange(dg)[None, :, None, None, None, None]
    for yy, wy in ((y0, 1 - (py - y0)), (y0 + 1, py - y0)):
        for xx, wx in ((x0, 1 - (px - x0)), (x0 + 1, px - x0)):
            ok = inside & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            yi = np.clip(yy, 0, h - 1).astype(np.int64)
            xi = np.clip(xx, 0, w - 1).astype(np.int64)
            taken = a[bi, gi, :, yi, xi]  # [n, dg, kh, kw, oh, ow, c // dg]
            cols += np.moveaxis(np.where(ok, wy * wx * scale, 0.0)[..., None] * taken, -1, 2)
    return _grouped_sums("ncijhw,ocij->nohw", cols.reshape(n, c, kh, kw, oh, ow), w_np, groups).astype(a_np.dtype)


def softmax_python(a_np: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``."""
    e = np.exp(a_np - a_np.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(a_np.dtype)


def log_softmax_python(a_np: np.ndarray, axis: int = -1) -> np.ndarray:
    """Log-softmax along ``axis``."""
    s = a_np - a_np.max(axis=axis, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis=axis, keepdims=True))).astype(a_np.dtype)


def nll_loss(predictions: np.ndarray, targets: np.ndarray, weights: np.ndarray, reduction: str = "mean",
             ignore_index: int | None = -100) -> np.ndarray:
    """TVM's reference negative log-likelihood loss: -weights[t] * predictions[n, t, d...] per target t (nothing
    where t is ``ignore_index`` or outside the classes); none, the sum, or the sum over the targets' weights."""
    t = targets.astype(np.int64)
    counted = (t >= 0) & (t < predictions.shape[1])
    if ignore_index is not None:
        counted &= t != ignore_index
    k = np.where(counted, t, 0)
    picked = np.take_along_axis(predictions.astype(np.float64), k[:, None], axis=1)[:, 0]
    w = np.where(counted, weights.astype(np.float64)[k], 0.0)
    loss = np.where(counted, -picked * w, 0.0)
    if reduction == "none":
        return loss.astype(predictions.dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(), predictions.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: 0 / 0, NaN as in PyTorch
        return np.asarray(loss.sum() / w.sum(), predictions.dtype)


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


def _bilinear_python(img: np.ndarray, y: float, x: float) -> np.ndarray:
    """``img`` [C, H, W] sampled at (y, x) as RoIAlign samples: zero beyond one pixel outside, else clamped."""
    height, width = img.shape[1:]
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return np.zeros(img.shape[0], img.dtype)
    y, x = min(max(y, 0.0), height - 1.0), min(max(x, 0.0), width - 1.0)
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[:, y0, x0] + (1 - ly) * lx * img[:, y0, x1]
            + ly * (1 - lx) * img[:, y1, x0] + ly * lx * img[:, y1, x1])


def roi_align_nchw_python(a_np: np.ndarray, rois_np: np.ndarray, pooled_size: Any, spatial_scale: float,
                          sample_ratio: int, mode: Any = b"avg") -> np.ndarray:
    """numpy reference of ``topi.vision.roi_align_nchw``: per box and bin the mean (or the largest) of a grid of
    bilinear samples, ``sample_ratio`` per side or ceil(bin size) when it is below 1; boxes at least 1x1."""
    ph_n, pw_n = (pooled_size, pooled_size) if isinstance(pooled_size, int) else pooled_size
    avg = mode in (b"avg", 0, "avg")
    out = np.zeros((rois_np.shape[0], a_np.shape[1], ph_n, pw_n), a_np.dtype)
    for r, (b, x1, y1, x2, y2) in enumerate(rois_np.astype("float64")):
        img = a_np[int(b)]
        y1, x1, y2, x2 = y1 * spatial_scale, x1 * spatial_scale, y2 * spatial_scale, x2 * spatial_scale
        bin_h, bin_w = max(y2 - y1, 1.0) / ph_n, max(x2 - x1, 1.0) / pw_n
        gh = sample_ratio if sample_ratio > 0 else int(np.ceil(bin_h))
        gw = sample_ratio if sample_ratio > 0 else int(np.ceil(bin_w))
        for ph in range(ph_n):
            for pw in range(pw_n):
                samples = [_bilinear_python(img, y1 + ph * bin_h + (iy + 0.5) * bin_h / gh,
                                            x1 + pw * bin_w + (ix + 0.5) * bin_w / gw)
                           for iy in range(gh) for ix in range(gw)]
                if samples:
                    out[r, :, ph, pw] = np.mean(samples, 0) if avg else np.max(samples, 0)
    return out


def roi_pool_nchw_python(a_np: np.ndarray, rois_np: np.ndarray, pooled_size: Any, spatial_scale: float
                         ) -> np.ndarray:
    """numpy reference of ``topi.vision.roi_pool_nchw``: the box rounded to pixels (halves away from zero, at
    least 1x1), bin p spanning [floor(p size / n), ceil((p + 1) size / n)) of it clipped to the image, each
    bin's largest pixel (0 for an empty bin)."""
    ph_n, pw_n = (pooled_size, pooled_size) if isinstance(pooled_size, int) else pooled_size
    height, width = a_np.shape[2:]
    out = np.zeros((rois_np.shape[0], a_np.shape[1], ph_n, pw_n), a_np.dtype)

    def rnd(v: float) -> int:
        return int(np.floor(v + 0.5)) if v >= 0 else int(np.ceil(v - 0.5))

    for r, (b, x1, y1, x2, y2) in enumerate(rois_np.astype("float64")):
        sx, sy = rnd(x1 * spatial_scale), rnd(y1 * spatial_scale)
        bin_h = max(rnd(y2 * spatial_scale) - sy + 1, 1) / ph_n
        bin_w = max(rnd(x2 * spatial_scale) - sx + 1, 1) / pw_n
        for ph in range(ph_n):
            ys = min(max(int(np.floor(ph * bin_h)) + sy, 0), height)
            ye = min(max(int(np.ceil((ph + 1) * bin_h)) + sy, 0), height)
            for pw in range(pw_n):
                xs = min(max(int(np.floor(pw * bin_w)) + sx, 0), width)
                xe = min(max(int(np.ceil((pw + 1) * bin_w)) + sx, 0), width)
                if ye > ys and xe > xs:
                    out[r, :, ph, pw] = a_np[int(b), :, ys:ye, xs:xe].max(axis=(1, 2))
    return out


def _resize_matrix(n_in: int, n_out: int, method: str, mode: str, rounding: str, alpha: float,
                   exclude: bool) -> np.ndarray:
    """[n_out, n_in]: the weight of each input pixel in each output pixel of one resized axis (float64)."""
    scale = n_out / n_in
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        if mode == "align_corners":
            x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        elif mode == "asymmetric":
            x = o / scale
        elif mode == "tf_half_pixel_for_nn":
            x = (o + 0.5) / scale
        elif mode == "pytorch_half_pixel" and n_out == 1:
            x = 0.0
        elif mode in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric"):
            x = (o + 0.5) / scale - 0.5
            if mode == "half_pixel_symmetric":
                x += n_in / 2 * (1 - n_out / (scale * n_in))
        else:
            raise ValueError(f"unknown coordinate transformation mode {mode!r}")
        clamp = lambda k: min(max(k, 0), n_in - 1)  # noqa: E731
        if method in ("nearest_neighbor", "nearest"):
            rnd = rounding or ("round" if mode == "align_corners" else "floor")
            k = {"round": round(x), "round_prefer_floor": np.ceil(x - 0.5), "round_prefer_ceil": np.floor(x + 0.5),
                 "floor": np.floor(x), "ceil": np.ceil(x)}[rnd]
            m[o, clamp(int(k))] = 1.0
            continue
        k0, t = int(np.floor(x)), x - np.floor(x)
        if method in ("linear", "bilinear", "trilinear"):
            taps = [(k0, 1 - t), (k0 + 1, t)]
        else:
            a = alpha
            kernel = lambda d: ((a + 2) * d ** 3 - (a + 3) * d ** 2 + 1 if d <= 1  # noqa: E731
                                else a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a)
            taps = [(k0 + j, kernel(abs(t - j))) for j in (-1, 0, 1, 2)]
            if exclude:
                taps = [(k, w) for k, w in taps if 0 <= k < n_in]
                total = sum(w for _, w in taps)
                taps = [(k, w / total) for k, w in taps]
        for k, w in taps:
            m[o, clamp(k)] += w
    return m


def _resize_python(data: np.ndarray, scale: Sequence[float], layout: str, method: str, mode: str,
                   rounding_method: str, cubic_alpha: float, cubic_exclude: int) -> np.ndarray:
    out = data.astype("float64")
    for s, ch in zip(scale, [ch for ch in layout if ch in "DHW"]):
        a = layout.index(ch)
        n_in = data.shape[a]
        m = _resize_matrix(n_in, int(round(n_in * s)), method, mode, rounding_method, cubic_alpha,
                           bool(cubic_exclude))
        out = np.moveaxis(np.tensordot(m, np.moveaxis(out, a, 0), axes=1), 0, a)
    return out.astype(data.dtype)


def resize1d_python(data: np.ndarray, scale: Sequence[float], layout: str = "NCW", method: str = "nearest_neighbor",
                    coordinate_transformation_mode: str = "align_corners", rounding_method: str = "",
                    cubic_alpha: float = -0.5, cubic_exclude: int = 0) -> np.ndarray:
    """numpy reference of ``topi.image.resize1d``: output extents ``round(extent * scale)``, one interpolation
    matrix per resized axis (TVM's coordinate modes and default rounding)."""
    return _resize_python(data, scale, layout, method, coordinate_transformation_mode, rounding_method,
                          cubic_alpha, cubic_exclude)


def resize2d_python(data: np.ndarray, scale: Sequence[float], layout: str = "NCHW", method: str = "nearest_neighbor",
                    coordinate_transformation_mode: str = "align_corners", rounding_method: str = "",
                    cubic_alpha: float = -0.5, cubic_exclude: int = 0) -> np.ndarray:
    """numpy reference of ``topi.image.resize2d`` (``scale`` (H, W) factors; see :func:`resize1d_python`)."""
    return _resize_python(data, scale, layout, method, coordinate_transformation_mode, rounding_method,
                          cubic_alpha, cubic_exclude)


def resize3d_python(data: np.ndarray, scale: Sequence[float], layout: str = "NCDHW",
                    method: str = "nearest_neighbor", coordinate_transformation_mode: str = "align_corners",
                    rounding_method: str = "", cubic_alpha: float = -0.5, cubic_exclude: int = 0) -> np.ndarray:
    """numpy reference of ``topi.image.resize3d`` (``scale`` (D, H, W) factors; see :func:`resize1d_python`)."""
    return _resize_python(data, scale, layout, method, coordinate_transformation_mode, rounding_method,
                          cubic_alpha, cubic_exclude)


def crop_and_resize_python(image: np.ndarray, boxes: np.ndarray, box_indices: np.ndarray, crop_size: Sequence[int],
                           layout: str, method: str = "bilinear", extrapolation_value: float = 0.0) -> np.ndarray:
    """numpy reference of ``topi.image.crop_and_resize`` (TensorFlow's): samples off the image are
    ``extrapolation_value``, bilinear between floor and ceiling pixels, or the nearest (halves away from zero)."""
    img = image if layout == "NCHW" else image.transpose(0, 3, 1, 2)
    height, width = img.shape[2:]
    ch, cw = crop_size
    out = np.full((len(boxes), img.shape[1], ch, cw), extrapolation_value, "float64")
    for n, (y1, x1, y2, x2) in enumerate(boxes.astype("float64")):
        src = img[int(box_indices[n])].astype("float64")
        for y in range(ch):
            in_y = y1 * (height - 1) + y * (y2 - y1) * (height - 1) / (ch - 1) if ch > 1 else \
                0.5 * (y1 + y2) * (height - 1)
            for x in range(cw):
                in_x = x1 * (width - 1) + x * (x2 - x1) * (width - 1) / (cw - 1) if cw > 1 else \
                    0.5 * (x1 + x2) * (width - 1)
                if not (0 <= in_y <= height - 1 and 0 <= in_x <= width - 1):
                    continue
                if method == "bilinear":
                    t, b, lft, r = int(np.floor(in_y)), int(np.ceil(in_y)), int(np.floor(in_x)), int(np.ceil(in_x))
                    fy, fx = in_y - t, in_x - lft
                    top = src[:, t, lft] + (src[:, t, r] - src[:, t, lft]) * fx
                    bottom = src[:, b, lft] + (src[:, b, r] - src[:, b, lft]) * fx
                    out[n, :, y, x] = top + (bottom - top) * fy
                else:
                    out[n, :, y, x] = src[:, int(np.floor(in_y + 0.5)), int(np.floor(in_x + 0.5))]
    out = out.astype(image.dtype)
    return out if layout == "NCHW" else out.transpose(0, 2, 3, 1)


def affine_grid_python(data: np.ndarray, target_shape: Sequence[int]) -> np.ndarray:
    """numpy reference of ``topi.image.affine_grid``: [N, 2, H, W], the matrices times each pixel's (x, y, 1) in
    [-1, 1] (corner pixels' centres)."""
    h, w = target_shape
    ys, xs = np.meshgrid(np.linspace(-1, 1, h) if h > 1 else [0.0], np.linspace(-1, 1, w) if w > 1 else [0.0],
                         indexing="ij")
    coords = np.stack([xs.ravel(), ys.ravel(), np.ones(h * w)])  # [3, H*W]
    return (data.astype("float64") @ coords).reshape(len(data), 2, h, w).astype(data.dtype)


def grid_sample_nchw_python(data: np.ndarray, grid: np.ndarray, method: str = "bilinear") -> np.ndarray:
    """numpy reference of ``topi.image.grid_sample`` (bilinear, zeros outside, -1 and 1 the corner pixels'
    centres): [N, C, H_out, W_out] from ``grid`` [N, 2, H_out, W_out] (x, y)."""
    if method != "bilinear":
        raise ValueError(f"grid_sample_nchw_python: method {method!r} (only bilinear)")
    n, c, height, width = data.shape
    out = np.zeros((n, c, *grid.shape[2:]), "float64")
    for b in range(n):
        for i in range(grid.shape[2]):
            for j in range(grid.shape[3]):
                x = (grid[b, 0, i, j] + 1) * (width - 1) / 2
                y = (grid[b, 1, i, j] + 1) * (height - 1) / 2
                y0, x0 = int(np.floor(y)), int(np.floor(x))
                for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
                    for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
                        if 0 <= yy < height and 0 <= xx < width:
                            out[b, :, i, j] += wy * wx * data[b, :, yy, xx]
    return out.astype(data.dtype)


def depth_to_space_python(data: np.ndarray, block_size: int, mode: str = "DCR") -> np.ndarray:
    """numpy reference of ``topi.nn.depth_to_space`` on NCHW data, output pixel by output pixel."""
    n, c, h, w = data.shape
    b = block_size
    oc = c // (b * b)
    out = np.empty((n, oc, h * b, w * b), data.dtype)
    for y in range(h * b):
        for x in range(w * b):
            for k in range(oc):
                src = (y % b * b + x % b) * oc + k if mode == "DCR" else k * b * b + y % b * b + x % b
                out[:, k, y, x] = data[:, src, y // b, x // b]
    return out


def space_to_depth_python(data: np.ndarray, block_size: int) -> np.ndarray:
    """numpy reference of ``topi.nn.space_to_depth`` on NCHW data (the inverse of DCR depth_to_space)."""
    n, c, h, w = data.shape
    b = block_size
    out = np.empty((n, c * b * b, h // b, w // b), data.dtype)
    for y in range(h):
        for x in range(w):
            for k in range(c):
                out[:, (y % b * b + x % b) * c + k, y // b, x // b] = data[:, k, y, x]
    return out


def space_to_batch_nd_python(data: np.ndarray, block_shape: Sequence[int], pad_before: Sequence[int],
                             pad_after: Sequence[int], pad_value: float = 0.0) -> np.ndarray:
    """numpy reference of ``topi.nn.space_to_batch_nd``: element by element, TensorFlow's definition (output
    batch ``offset * N + n``, the block offset's last axis fastest)."""
    m = len(block_shape)
    padded = np.pad(data, [(0, 0), *zip(pad_before, pad_after), *[(0, 0)] * (data.ndim - 1 - m)],
                    constant_values=pad_value)
    n = data.shape[0]
    out_shape = [n * int(np.prod(block_shape))] + [s // b for s, b in zip(padded.shape[1:1 + m], block_shape)]
    out = np.empty(out_shape + list(data.shape[1 + m:]), data.dtype)
    for offset in np.ndindex(*block_shape):
        flat = int(np.ravel_multi_index(offset, block_shape))
        index = tuple(slice(o, None, b) for o, b in zip(offset, block_shape))
        out[flat * n:(flat + 1) * n] = padded[(slice(None), *index)]
    return out


def batch_to_space_nd_python(data: np.ndarray, block_shape: Sequence[int], crop_begin_list: Sequence[int],
                             crop_end_list: Sequence[int]) -> np.ndarray:
    """numpy reference of ``topi.nn.batch_to_space_nd``, the inverse of :func:`space_to_batch_nd_python`."""
    m = len(block_shape)
    n = data.shape[0] // int(np.prod(block_shape))
    full = [s * b for s, b in zip(data.shape[1:1 + m], block_shape)]
    out = np.empty([n] + full + list(data.shape[1 + m:]), data.dtype)
    for offset in np.ndindex(*block_shape):
        flat = int(np.ravel_multi_index(offset, block_shape))
        index = tuple(slice(o, None, b) for o, b in zip(offset, block_shape))
        out[(slice(None), *index)] = data[flat * n:(flat + 1) * n]
    crop = tuple(slice(c0, f - c1) for c0, c1, f in zip(crop_begin_list, crop_end_list, full))
    return out[(slice(None), *crop)]


def _ntuple(v: Any, n: int) -> tuple[int, ...]:
    return (int(v),) * n if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)


def _conv_ncdhw(a: np.ndarray, w: np.ndarray, stride: Any, pads: Sequence[int], groups: int = 1) -> np.ndarray:
    """A grouped 3-D convolution of NCDHW data by an OIDHW filter, ``pads`` (begins, then ends), in float64: one
    matrix product per kernel tap (a 3-D input's windows are too many to hold at once)."""
    s = _ntuple(stride, 3)
    x = np.pad(a.astype("float64"), ((0, 0), (0, 0), *zip(pads[:3], pads[3:])))
    o, ig, *k = w.shape
    size = [(m - kk) // ss + 1 for m, kk, ss in zip(x.shape[2:], k, s)]
    xg = x.reshape(x.shape[0], groups, ig, *x.shape[2:])
    wg = w.astype("float64").reshape(groups, o // groups, ig, *k)
    out = np.zeros((x.shape[0], groups, o // groups, *size))
    for tap in np.ndindex(*k):
        win = xg[(..., *(slice(t, t + (m - 1) * ss + 1, ss) for t, m, ss in zip(tap, size, s)))]
        out += np.einsum("ngidhw,goi->ngodhw", win, wg[(..., *tap)], optimize=True)
    return out.reshape(x.shape[0], o, *size).astype(a.dtype)


def conv1d_ncw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any, dilation: Any) -> np.ndarray:
    """NCW data by an OIW filter (the 2-D reference on a height of 1; SAME puts the odd pad on the left, as TVM)."""
    (s,), (d,) = _ntuple(stride, 1), _ntuple(dilation, 1)
    left, right = nn.get_pad_tuple1d(padding, (w_np.shape[2] - 1) * d + 1)
    return _conv_nchw(a_np[:, :, None], w_np[:, :, None], (1, s), (0, left, 0, right), (1, d), 1)[:, :, 0]


def conv3d_ncdhw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any, groups: int = 1) -> np.ndarray:
    """NCDHW data by an OIDHW filter [O, I / groups, kd, kh, kw] (dilation: pass the filter dilated)."""
    return _conv_ncdhw(a_np, w_np, stride, nn.get_pad_tuple3d(padding, w_np.shape[2:]), groups)


def conv3d_ndhwc_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any) -> np.ndarray:
    """NDHWC data by a DHWIO filter (the NCDHW reference between transposes)."""
    out = conv3d_ncdhw_python(a_np.transpose(0, 4, 1, 2, 3), w_np.transpose(4, 3, 0, 1, 2), stride, padding)
    return out.transpose(0, 2, 3, 4, 1)


def conv2d_hwcn_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any) -> np.ndarray:
    """HWCN data by an HWIO filter (the NCHW reference between transposes)."""
    out = _conv_nchw(a_np.transpose(3, 2, 0, 1), w_np.transpose(3, 2, 0, 1), stride, padding, 1, 1)
    return out.transpose(2, 3, 1, 0)


def conv1d_transpose_ncw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                                output_padding: Any) -> np.ndarray:
    """The transposed convolution of NCW data by an IOW filter (the 2-D reference on a height of 1)."""
    left, right = nn.get_pad_tuple1d(padding, w_np.shape[2])
    (s,), (op,) = _ntuple(stride, 1), _ntuple(output_padding, 1)
    return conv2d_transpose_nchw_python(a_np[:, :, None], w_np[:, :, None], (1, s), (0, left, 0, right),
                                        (0, op))[:, :, 0]


def conv3d_transpose_ncdhw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                                  output_padding: Any) -> np.ndarray:
    """The transposed convolution of NCDHW data by an IODHW filter, by its definition: each filter tap's products
    with the input added to the output at stride-spaced places, then the padding cropped off."""
    s, op, (_, o, *k) = _ntuple(stride, 3), _ntuple(output_padding, 3), w_np.shape
    pads, size, a = nn.get_pad_tuple3d(padding, k), a_np.shape[2:], a_np.astype("float64")
    full = np.zeros((a_np.shape[0], o, *[(m - 1) * ss + kk + p for m, ss, kk, p in zip(size, s, k, op)]))
    for tap in np.ndindex(*k):
        at = tuple(slice(t, t + (m - 1) * ss + 1, ss) for t, m, ss in zip(tap, size, s))
        full[(..., *at)] += np.einsum("ncdhw,co->nodhw", a, w_np[(..., *tap)], optimize=True)
    return full[(..., *(slice(b, f - e) for b, e, f in zip(pads[:3], pads[3:], full.shape[2:])))].astype(a_np.dtype)
