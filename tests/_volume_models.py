"""3-D (volume and video) models as ONNX graphs, shared by tests/test_relay_onnx_conv.py (at small sizes) and
benchmarks/bench_volumes.py (at real ones): a 3-D U-Net in nnU-Net's form (two 3x3x3 convolutions with instance
norm and LeakyReLU per level, strided convolutions down, 2x2x2 transposed convolutions up), a video ResNet in
R3D-18's form (3x7x7 stem, basic blocks of 3x3x3 convolutions with batch norm), and one 3x3x3 convolution."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from _onnx_models import GraphBuilder


def _conv3d(b: GraphBuilder, x: str, cin: int, cout: int, kernel: Sequence[int] = (3, 3, 3),
            stride: Sequence[int] = (1, 1, 1), bias: bool = True) -> str:
    """A Conv of He-initialised weights, padded to keep the size at stride 1."""
    w = b.rng.standard_normal((cout, cin, *kernel)) * np.sqrt(2 / (cin * np.prod(kernel)))
    name = b.fresh("conv")
    ins = [x, b.init(f"{name}.w", w.astype(np.float32))]
    if bias:
        ins.append(b.init(f"{name}.b", (b.rng.standard_normal(cout) * 0.1).astype(np.float32)))
    return b.node("Conv", ins, name=name, pads=[k // 2 for k in kernel] * 2, strides=list(stride))


def _instance_norm_lrelu(b: GraphBuilder, x: str, c: int) -> str:
    name = b.fresh("norm")
    y = b.node("InstanceNormalization", [x, b.init(f"{name}.s", np.ones(c, np.float32)),
                                         b.init(f"{name}.b", np.zeros(c, np.float32))], name=name, epsilon=1e-5)
    return b.node("LeakyRelu", [y], alpha=0.01)


def make_unet3d(shape: Sequence[int] = (1, 1, 32, 96, 96), widths: Sequence[int] = (16, 32, 64, 128),
                classes: int = 3, seed: int = 1) -> onnx.ModelProto:
    """nnU-Net's 3-D form: per level two (3x3x3 conv, instance norm, LeakyReLU), down by a stride-2 conv, up by a
    2x2x2 stride-2 ConvTranspose concatenated with the skip, a 1x1x1 conv to the classes and their softmax."""
    b = GraphBuilder(seed=seed, opset=17)
    x, cin, skips = "x", shape[1], []
    for level, width in enumerate(widths):
        if level:
            x = _instance_norm_lrelu(b, _conv3d(b, x, cin, width, stride=(2, 2, 2), bias=False), width)
            cin = width
        x = _instance_norm_lrelu(b, _conv3d(b, x, cin, width, bias=False), width)
        x = _instance_norm_lrelu(b, _conv3d(b, x, width, width, bias=False), width)
        cin = width
        skips.append(x)
    for width, skip in zip(widths[-2::-1], skips[-2::-1]):
        w = (b.rng.standard_normal((cin, width, 2, 2, 2)) * np.sqrt(1 / (cin * 8))).astype(np.float32)
        up = b.node("ConvTranspose", [x, b.init(b.fresh("up") + ".w", w)], strides=[2, 2, 2])
        x = b.node("Concat", [up, skip], axis=1)
        x = _instance_norm_lrelu(b, _conv3d(b, x, 2 * width, width, bias=False), width)
        x = _instance_norm_lrelu(b, _conv3d(b, x, width, width, bias=False), width)
        cin = width
    out = b.node("Softmax", [_conv3d(b, x, cin, classes, kernel=(1, 1, 1))], axis=1)
    return b.model([("x", tuple(shape))], [out], name="unet3d")


def make_r3d(shape: Sequence[int] = (1, 3, 8, 112, 112), widths: Sequence[int] = (64, 128, 256, 512),
             classes: int = 400, seed: int = 2) -> onnx.ModelProto:
    """R3D-18's form: a 3x7x7 stride (1, 2, 2) stem, four stages of two basic blocks (3x3x3 convs with batch norm,
    the first of a stage from the second stride 2 with a 1x1x1 projection), global pooling and the classes."""
    b = GraphBuilder(seed=seed, opset=17)
    x = b.node("Relu", [b.bn(_conv3d(b, "x", shape[1], widths[0], (3, 7, 7), (1, 2, 2), bias=False), widths[0])])
    cin = widths[0]
    for stage, width in enumerate(widths):
        for block in range(2):
            stride = (2, 2, 2) if stage and not block else (1, 1, 1)
            y = b.node("Relu", [b.bn(_conv3d(b, x, cin, width, stride=stride, bias=False), width)])
            y = b.bn(_conv3d(b, y, width, width, bias=False), width)
            skip = x if cin == width and stride == (1, 1, 1) else \
                b.bn(_conv3d(b, x, cin, width, (1, 1, 1), stride, bias=False), width)
            x = b.node("Relu", [b.node("Add", [y, skip])])
            cin = width
    pooled = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    w = (b.rng.standard_normal((classes, cin)) * 0.05).astype(np.float32)
    out = b.node("Gemm", [pooled, b.init("fc.w", w), b.init("fc.b", np.zeros(classes, np.float32))], transB=1)
    return b.model([("x", tuple(shape))], [out], name="r3d")


def make_conv3d_layer(shape: Sequence[int] = (1, 32, 32, 64, 64), cout: int = 32, seed: int = 3) -> onnx.ModelProto:
    """One 3x3x3 convolution with a bias."""
    b = GraphBuilder(seed=seed, opset=17)
    return b.model([("x", tuple(shape))], [_conv3d(b, "x", shape[1], cout)], name="conv3d")


#: name -> (builder, what the benchmark calls it)
VOLUME_MODELS = {"conv3d": (make_conv3d_layer, "one 3x3x3 conv, 32 -> 32 channels, 32x64x64"),
                 "unet3d": (make_unet3d, "3-D U-Net (nnU-Net form), 1x32x96x96"),
                 "r3d": (make_r3d, "video ResNet (R3D-18 form), 3x8x112x112")}
