"""Built-in workloads (topi-like): each returns its tensors, inputs first, output last."""

from __future__ import annotations

from autosched import te
from autosched.workloads.registry import register_workload


def _pad(data, pad_h: int, pad_w: int, h_axis: int, w_axis: int, name: str = "pad", value: float = 0.0):
    """Zero-pad two axes of a 4-D tensor (an elementwise stage that schedules usually inline)."""
    if pad_h == 0 and pad_w == 0:
        return data
    shape = list(data.shape)
    H, W = int(shape[h_axis]), int(shape[w_axis])
    shape[h_axis] = H + 2 * pad_h
    shape[w_axis] = W + 2 * pad_w

    def f(*idx):
        h, w = idx[h_axis], idx[w_axis]
        src = list(idx)
        src[h_axis] = h - pad_h
        src[w_axis] = w - pad_w
        inside = te.all(h >= pad_h, h < H + pad_h, w >= pad_w, w < W + pad_w)
        return te.if_then_else(inside, data[tuple(src)], te.const(value, data.dtype))

    return te.compute(shape, f, name=name)


@register_workload("matmul")
def matmul(M: int = 1024, N: int = 1024, K: int = 1024, dtype: str = "float32"):
    """C[M, N] = A[M, K] @ B[K, N]."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


@register_workload("matmul_mixed")
def matmul_mixed(M: int = 1024, N: int = 1024, K: int = 1024, dtype: str = "float16", out_dtype: str = "float32"):
    """C[M, N] = A[M, K] @ B[K, N], A and B in ``dtype``, the products summed in ``out_dtype``: the mixed-
    precision matmul of tensor cores (float16 in, float32 out)."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype(out_dtype) * B[k, j].astype(out_dtype), axis=k),
                   name="C")
    return [A, B, C]


@register_workload("batch_matmul")
def batch_matmul(B: int = 12, M: int = 128, N: int = 128, K: int = 64, dtype: str = "float32"):
    """C[b, M, N] = X[b, M, K] @ Y[b, K, N]."""
    X = te.placeholder((B, M, K), dtype, name="X")
    Y = te.placeholder((B, K, N), dtype, name="Y")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((B, M, N), lambda b, i, j: te.sum(X[b, i, k] * Y[b, k, j], axis=k), name="C")
    return [X, Y, C]


@register_workload("dense")
def dense(N: int = 1, CI: int = 512, CO: int = 1000, bias: bool = True, relu: bool = False, dtype: str = "float32"):
    """out[N, CO] = data[N, CI] @ weight[CO, CI]^T (+ bias) (then relu): a fully-connected layer."""
    data = te.placeholder((N, CI), dtype, name="data")
    weight = te.placeholder((CO, CI), dtype, name="weight")
    k = te.reduce_axis((0, CI), name="k")
    out = te.compute((N, CO), lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k), name="dense")
    tensors = [data, weight]
    if bias:
        b = te.placeholder((CO,), dtype, name="bias")
        tensors.append(b)
        prev = out
        out = te.compute((N, CO), lambda i, j: prev[i, j] + b[j], name="bias_add")
    if relu:
        prev2 = out
        out = te.compute((N, CO), lambda i, j: te.max(prev2[i, j], te.const(0, dtype)), name="relu")
    return tensors + [out]


@register_workload("conv2d")
def conv2d(N: int = 1, H: int = 56, W: int = 56, CI: int = 64, CO: int = 64, KH: int = 3, KW: int = 3,
           stride: int = 1, padding: int = 1, layout: str = "NCHW", dtype: str = "float32"):
    """2-D convolution, NCHW (weights OIHW) or NHWC (weights HWIO); defaults: a ResNet-18 3x3 layer."""
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    rc = te.reduce_axis((0, CI), name="rc")
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    if layout == "NCHW":
        data = te.placeholder((N, CI, H, W), dtype, name="data")
        weight = te.placeholder((CO, CI, KH, KW), dtype, name="weight")
        pad = _pad(data, padding, padding, 2, 3)
        out = te.compute(
            (N, CO, OH, OW),
            lambda n, f, y, x: te.sum(
                pad[n, rc, y * stride + rh, x * stride + rw] * weight[f, rc, rh, rw], axis=[rc, rh, rw]
            ),
            name="conv2d",
        )
    elif layout == "NHWC":
        data = te.placeholder((N, H, W, CI), dtype, name="data")
        weight = te.placeholder((KH, KW, CI, CO), dtype, name="weight")
        pad = _pad(data, padding, padding, 1, 2)
        out = te.compute(
            (N, OH, OW, CO),
            lambda n, y, x, f: te.sum(
                pad[n, y * stride + rh, x * stride + rw, rc] * weight[rh, rw, rc, f], axis=[rh, rw, rc]
            ),
            name="conv2d",
        )
    else:
        raise ValueError(f"conv2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    return [data, weight, out]


@register_workload("depthwise_conv2d")
def depthwise_conv2d(N: int = 1, C: int = 256, H: int = 28, W: int = 28, KH: int = 3, KW: int = 3,
                     stride: int = 1, padding: int = 1, dtype: str = "float32"):
    """Depthwise 2-D convolution, NCHW with weights [C, 1, KH, KW]."""
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, 1, KH, KW), dtype, name="weight")
    pad = _pad(data, padding, padding, 2, 3)
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    out = te.compute(
        (N, C, OH, OW),
        lambda n, c, y, x: te.sum(pad[n, c, y * stride + rh, x * stride + rw] * weight[c, 0, rh, rw], axis=[rh, rw]),
        name="depthwise_conv2d",
    )
    return [data, weight, out]


@register_workload("pool2d")
def pool2d(N: int = 1, C: int = 64, H: int = 112, W: int = 112, KH: int = 3, KW: int = 3, stride: int = 2,
           padding: int = 1, pool_type: str = "max", dtype: str = "float32"):
    """Max or average 2-D pooling, NCHW (average counts only the elements inside the input)."""
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    data = te.placeholder((N, C, H, W), dtype, name="data")
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    if pool_type == "max":
        pad = _pad(data, padding, padding, 2, 3, value=float("-inf"))
        out = te.compute(
            (N, C, OH, OW),
            lambda n, c, y, x: te.max(pad[n, c, y * stride + rh, x * stride + rw], axis=[rh, rw]),
            name="pool_max",
        )
    elif pool_type == "avg":
        pad = _pad(data, padding, padding, 2, 3)
        s = te.compute(
            (N, C, OH, OW),
            lambda n, c, y, x: te.sum(pad[n, c, y * stride + rh, x * stride + rw], axis=[rh, rw]),
            name="pool_sum",
        )

        def count(y, x):
            h0 = te.maximum(y * stride - padding, 0)
            h1 = te.minimum(y * stride - padding + KH, H)
            w0 = te.maximum(x * stride - padding, 0)
            w1 = te.minimum(x * stride - padding + KW, W)
            return ((h1 - h0) * (w1 - w0)).astype(dtype)

        out = te.compute((N, C, OH, OW), lambda n, c, y, x: s[n, c, y, x] / count(y, x), name="pool_avg")
    else:
        raise ValueError(f"pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    return [data, out]


@register_workload("softmax")
def softmax(M: int = 256, N: int = 1024, dtype: str = "float32"):
    """Row-wise softmax of an [M, N] matrix: max, exp, sum, divide."""
    X = te.placeholder((M, N), dtype, name="X")
    k1 = te.reduce_axis((0, N), name="k1")
    k2 = te.reduce_axis((0, N), name="k2")
    mx = te.compute((M,), lambda i: te.max(X[i, k1], axis=k1), name="row_max")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="row_sum")
    out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")
    return [X, out]


_ELEMENTWISE = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "add_relu": lambda a, b: te.maximum(a + b, te.const(0, a.dtype)),
    "sigmoid_mul": lambda a, b: te.sigmoid(a) * b,
}


@register_workload("elementwise")
def elementwise(N: int = 1, C: int = 64, H: int = 56, W: int = 56, op: str = "add_relu", dtype: str = "float32"):
    """out = op(a, b) on two NCHW tensors; op is add, mul, add_relu or sigmoid_mul."""
    if op not in _ELEMENTWISE:
        raise ValueError(f"elementwise: op must be one of {', '.join(_ELEMENTWISE)}, got {op!r}")
    a = te.placeholder((N, C, H, W), dtype, name="a")
    b = te.placeholder((N, C, H, W), dtype, name="b")
    fn = _ELEMENTWISE[op]
    out = te.compute((N, C, H, W), lambda n, c, h, w: fn(a[n, c, h, w], b[n, c, h, w]), name=op)
    return [a, b, out]
