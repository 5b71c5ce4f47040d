"""ONNX models built in memory with ``onnx.helper`` (seeded random weights, nothing downloaded).

``make_resnet18`` and ``make_mobilenet_v2`` give networks with the layer structure of torchvision's models
(narrower or smaller inputs on request) for the ONNX frontend's end-to-end tests; ``FAMILIES`` maps names to
builders of the classifier families at their real sizes (ResNet-50, SqueezeNet 1.1, ShuffleNet v2, GoogLeNet,
DenseNet-121, VGG-11; tests/test_onnx_families.py). Benchmarks reuse them with::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _onnx_models import make_resnet18

``make_single_op`` wraps one node in a model, for op-by-op comparisons with onnxruntime.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# onnxruntime 1.31 reads every IR version onnx 1.23 writes; pin one anyway so a newer onnx cannot outrun it
IR_VERSION = 8


class GraphBuilder:
    """Appends nodes and seeded random initializers; ``model()`` wraps them in an ``onnx.ModelProto``."""

    def __init__(self, seed: int = 0, opset: int = 13):
        self.rng = np.random.default_rng(seed)
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        """A new unique name ``prefix_N``."""
        n = self._count.get(prefix, 0)
        self._count[prefix] = n + 1
        return f"{prefix}_{n}"

    def init(self, name: str, value: np.ndarray) -> str:
        """Adds an initializer; returns its name."""
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: Sequence[str], name: str | None = None, n_outputs: int = 1, **attrs: Any) -> str:
        """Adds a node; returns its (first) output name."""
        name = name or self.fresh(op.lower())
        outputs = [name] if n_outputs == 1 else [f"{name}_out{i}" for i in range(n_outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outputs, name=name, **attrs))
        return outputs[0]

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int | None = None, group: int = 1,
             bias: bool = False, name: str | None = None) -> str:
        """Conv with He-initialised weights (``pad`` defaults to ``k // 2``)."""
        name = name or self.fresh("conv")
        pad = k // 2 if pad is None else pad
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        inputs = [x, self.init(f"{name}.weight", w)]
        if bias:
            inputs.append(self.init(f"{name}.bias", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        return self.node("Conv", inputs, name=name, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad, pad, pad, pad], group=group)

    def bn(self, x: str, c: int, gamma_scale: float = 1.0, name: str | None = None) -> str:
        """Inference-mode BatchNormalization with random statistics (variance kept away from zero)."""
        name = name or self.fresh("bn")
        r = self.rng
        scale = (r.uniform(0.5, 1.0, c) * gamma_scale).astype(np.float32)
        beta = (r.standard_normal(c) * 0.1).astype(np.float32)
        mean = (r.standard_normal(c) * 0.1).astype(np.float32)
        var = r.uniform(0.5, 1.5, c).astype(np.float32)
        ins = [self.init(f"{name}.{p}", v) for p, v in
               (("weight", scale), ("bias", beta), ("running_mean", mean), ("running_var", var))]
        return self.node("BatchNormalization", [x, *ins], name=name, epsilon=1e-5)

    def gemm_fc(self, x: str, cin: int, cout: int, name: str = "fc") -> str:
        """The classifier: Gemm with ``transB=1`` (weight [out, in], as PyTorch exports Linear)."""
        w = self.rng.standard_normal((cout, cin), dtype=np.float32)  # (in float32: VGG's are 120M)
        w *= np.float32(np.sqrt(1.0 / cin))
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        return self.node("Gemm", [x, self.init(f"{name}.weight", w), self.init(f"{name}.bias", b)], name=name,
                         alpha=1.0, beta=1.0, transB=1)

    def model(self, inputs: Sequence[tuple[str, Sequence[int]]], outputs: Sequence[str | tuple[str, Sequence[int]]],
              name: str = "graph") -> onnx.ModelProto:
        """A checked model with float32 inputs of the given shapes; an output's shape is inferred by onnx unless
        given as ``(name, shape)``."""
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs]
        outs = [helper.make_tensor_value_info(o[0], TensorProto.FLOAT, list(o[1])) if isinstance(o, tuple)
                else helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]

        def assemble(graph_inputs: list, initializers: list) -> onnx.ModelProto:
            graph = helper.make_graph(self.nodes, name, graph_inputs, outs, initializer=initializers)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                      producer_name="autosched-tests")
            model.ir_version = IR_VERSION
            return model

        # shape inference and the checker serialise the whole model: they see the large weights as typed
        # inputs instead (VGG-11's 500 MB took 10 s); small initializers (shapes, scales) stay values
        big = [math.prod(t.dims) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize > 1 << 16
               for t in self.initializers]  # (by their dims: reading raw_data copies it)
        large = [t for t, b in zip(self.initializers, big) if b]
        light_inputs = ins + [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in large]
        small = [t for t, b in zip(self.initializers, big) if not b]
        # the checker wants every graph output typed with a shape: take them from onnx's shape inference
        inferred = onnx.shape_inference.infer_shapes(assemble(light_inputs, small), strict_mode=True)
        for vi, typed in zip(outs, inferred.graph.output):
            if typed.type.tensor_type.HasField("shape"):
                vi.CopyFrom(typed)
        onnx.checker.check_model(assemble(light_inputs, small), full_check=True)
        return assemble(ins, self.initializers)


def _residual(b, x, y, cin: int, cout: int, stride: int, p: str) -> str:
    """ResNet's block output: relu(y + shortcut(x)), the shortcut a 1x1 conv + BN when the shape changes."""
    if stride != 1 or cin != cout:
        x = b.bn(b.conv(x, cin, cout, 1, stride, pad=0, name=f"{p}.downsample.0"), cout, name=f"{p}.downsample.1")
    return b.node("Relu", [b.node("Add", [y, x], name=f"{p}.add")], name=f"{p}.relu")


def _classifier(b, x, channels: int, num_classes: int, **fc) -> str:
    """torchvision's head: global average pool, flatten, fully connected (``fc``: gemm_fc's options)."""
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    x = b.node("Flatten", [x], name="flatten", axis=1)
    return b.gemm_fc(x, channels, num_classes, **fc)


def make_resnet18(batch: int = 1, image: int = 224, num_classes: int = 1000, width: int = 64, seed: int = 0,
                  input_name: str = "data") -> onnx.ModelProto:
    """ResNet-18 (torchvision's layout): conv7x7/2 + BN + ReLU, maxpool 3x3/2, 4 stages of 2 basic blocks
    (the first block of stages 2-4 downsamples with a 1x1/2 conv + BN), global average pool, Flatten, Gemm.

    ``width`` is the first stage's channel count (64 in the real network; stages double it).
    """
    b = GraphBuilder(seed)
    x = b.node("Relu", [b.bn(b.conv(input_name, 3, width, 7, stride=2, pad=3, name="conv1"), width, name="bn1")])
    x = b.node("MaxPool", [x], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            p = f"layer{stage + 1}.{block}"
            # the second BN of a block starts small (as zero-init-residual training tends to leave it), so the
            # residual sums stay O(1) over 8 blocks of random weights
            y = b.node("Relu", [b.bn(b.conv(x, cin, cout, 3, stride, name=f"{p}.conv1"), cout, name=f"{p}.bn1")])
            y = b.bn(b.conv(y, cout, cout, 3, 1, name=f"{p}.conv2"), cout, gamma_scale=0.5, name=f"{p}.bn2")
            x = _residual(b, x, y, cin, cout, stride, p)
            cin = cout
    out = _classifier(b, x, cin, num_classes)
    return b.model([(input_name, (batch, 3, image, image))], [out], name="resnet18")


# torchvision's MobileNetV2 inverted-residual settings: expansion t, output channels c, repeats n, first stride s
MOBILENET_V2_SETTINGS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)


def make_mobilenet_v2(batch: int = 1, image: int = 224, num_classes: int = 1000, width_mult: float = 1.0,
                      settings: Sequence[tuple[int, int, int, int]] = MOBILENET_V2_SETTINGS, last_channel: int = 1280,
                      batch_norm: bool = False, seed: int = 0, input_name: str = "data") -> onnx.ModelProto:
    """MobileNetV2 (torchvision's layout): conv3x3/2 + ReLU6, inverted residual blocks (1x1 expand + ReLU6, 3x3
    depthwise conv with ``group=channels`` + ReLU6, 1x1 linear projection, residual Add when the shape is kept),
    1x1 conv to ``last_channel`` + ReLU6, global average pool, Flatten, Gemm.

    ReLU6 is ``Clip(x, min, max)`` with min/max from shared Constant nodes (opset 13, as PyTorch exports it).
    With ``batch_norm=False`` (the default, as an exporter folds BN) each conv has a bias; with True it is followed
    by a BatchNormalization node instead.
    """
    b = GraphBuilder(seed)
    lo = b.node("Constant", [], name="relu6_min", value=numpy_helper.from_array(np.array(0.0, np.float32)))
    hi = b.node("Constant", [], name="relu6_max", value=numpy_helper.from_array(np.array(6.0, np.float32)))

    def conv(x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, name: str = "") -> str:
        y = b.conv(x, cin, cout, k, stride, group=group, bias=not batch_norm, name=name)
        return b.bn(y, cout, name=f"{name}.bn") if batch_norm else y

    def relu6(x: str) -> str:
        return b.node("Clip", [x, lo, hi])

    def ch(c: float) -> int:  # torchvision's _make_divisible(c, 8)
        v = max(8, int(c + 4) // 8 * 8)
        return v + 8 if v < 0.9 * c else v

    cin = ch(32 * width_mult)
    x = relu6(conv(input_name, 3, cin, 3, 2, name="features.0"))
    i = 1
    for t, c, n, s in settings:
        cout = ch(c * width_mult)
        for r in range(n):
            stride = s if r == 0 else 1
            hidden = cin * t
            p = f"features.{i}"
            y = x
            if t != 1:
                y = relu6(conv(y, cin, hidden, 1, name=f"{p}.expand"))
            y = relu6(conv(y, hidden, hidden, 3, stride, group=hidden, name=f"{p}.dw"))
            y = conv(y, hidden, cout, 1, name=f"{p}.project")
            if stride == 1 and cin == cout:
                y = b.node("Add", [x, y], name=f"{p}.add")
            x, cin = y, cout
            i += 1
    last = ch(last_channel * max(1.0, width_mult))
    x = relu6(conv(x, cin, last, 1, name=f"features.{i}"))
    out = _classifier(b, x, last, num_classes, name="classifier")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="mobilenet_v2")


# ------------------------------------------------------------------------------------ CNN classifier families
# torchvision's (and the ONNX model zoo's) classifiers at their real layer shapes, seeded He-initialised weights;
# tests/test_onnx_families.py checks each against onnxruntime, benchmarks/bench_onnx_families.py times them


def make_resnet50(batch: int = 1, image: int = 224, num_classes: int = 1000, layers: Sequence[int] = (3, 4, 6, 3),
                  width: int = 64, seed: int = 0, input_name: str = "data") -> onnx.ModelProto:
    """ResNet-50 (torchvision v1.5): stem as ResNet-18's, 4 stages of bottlenecks (1x1 -> 3x3 with the stride ->
    1x1 to 4x the width, BN after each; a 1x1/stride conv + BN on the shortcut when the shape changes), GAP, Gemm."""
    b = GraphBuilder(seed)
    x = b.node("Relu", [b.bn(b.conv(input_name, 3, width, 7, stride=2, pad=3, name="conv1"), width, name="bn1")])
    x = b.node("MaxPool", [x], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, n in enumerate(layers):
        mid = width * 2**stage
        cout = 4 * mid
        for block in range(n):
            stride = 2 if stage > 0 and block == 0 else 1
            p = f"layer{stage + 1}.{block}"
            y = b.node("Relu", [b.bn(b.conv(x, cin, mid, 1, pad=0, name=f"{p}.conv1"), mid, name=f"{p}.bn1")])
            y = b.node("Relu", [b.bn(b.conv(y, mid, mid, 3, stride, name=f"{p}.conv2"), mid, name=f"{p}.bn2")])
            y = b.bn(b.conv(y, mid, cout, 1, pad=0, name=f"{p}.conv3"), cout, gamma_scale=0.3, name=f"{p}.bn3")
            x = _residual(b, x, y, cin, cout, stride, p)
            cin = cout
    out = _classifier(b, x, cin, num_classes)
    return b.model([(input_name, (batch, 3, image, image))], [out], name="resnet50")


def make_squeezenet1_1(batch: int = 1, image: int = 224, num_classes: int = 1000, seed: int = 0,
                       input_name: str = "data") -> onnx.ModelProto:
    """SqueezeNet 1.1 (torchvision): conv3x3/2 64, max pools 3x3/2 with ceil_mode, 8 fire modules (1x1 squeeze,
    then 1x1 and 3x3 expands concatenated), Dropout, a 1x1 conv classifier + ReLU, GAP, Flatten."""
    b = GraphBuilder(seed)

    def conv_relu(x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int | None = None) -> str:
        return b.node("Relu", [b.conv(x, cin, cout, k, stride, pad=pad, bias=True)])

    def fire(x: str, cin: int, squeeze: int, e1: int, e3: int) -> str:
        s = conv_relu(x, cin, squeeze, 1)
        return b.node("Concat", [conv_relu(s, squeeze, e1, 1), conv_relu(s, squeeze, e3, 3)], axis=1)

    def pool(x: str) -> str:
        return b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    x = pool(conv_relu(input_name, 3, 64, 3, stride=2, pad=0))
    x = fire(fire(x, 64, 16, 64, 64), 128, 16, 64, 64)
    x = fire(fire(pool(x), 128, 32, 128, 128), 256, 32, 128, 128)
    x = fire(fire(pool(x), 256, 48, 192, 192), 384, 48, 192, 192)
    x = fire(fire(x, 384, 64, 256, 256), 512, 64, 256, 256)
    x = b.node("Dropout", [x])
    x = conv_relu(x, 512, num_classes, 1)
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    out = b.node("Flatten", [x], name="flatten", axis=1)
    return b.model([(input_name, (batch, 3, image, image))], [out], name="squeezenet1_1")


def make_shufflenet_v2(batch: int = 1, image: int = 224, num_classes: int = 1000,
                       stages_repeats: Sequence[int] = (4, 8, 4),
                       stages_out_channels: Sequence[int] = (24, 116, 232, 464, 1024), seed: int = 0,
                       input_name: str = "data") -> onnx.ModelProto:
    """ShuffleNet v2 x1.0 (torchvision): conv3x3/2 + BN + ReLU, max pool, 3 stages of units (stride 1: Split the
    channels in halves, one half through 1x1 -> depthwise 3x3 -> 1x1 (BN each), Concat; stride 2: both branches
    downsample), each followed by the channel shuffle Reshape -> Transpose -> Reshape; conv 1x1 to 1024,
    ReduceMean over H and W, Gemm."""
    b = GraphBuilder(seed)

    def cbr(x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, relu: bool = True) -> str:
        y = b.bn(b.conv(x, cin, cout, k, stride, group=group), cout)
        return b.node("Relu", [y]) if relu else y

    def shuffle(x: str, c: int, hw: int) -> str:
        x = b.node("Reshape", [x, b.init(b.fresh("shape"), np.array([batch, 2, c // 2, hw, hw], np.int64))])
        x = b.node("Transpose", [x], perm=[0, 2, 1, 3, 4])
        return b.node("Reshape", [x, b.init(b.fresh("shape"), np.array([batch, c, hw, hw], np.int64))])

    def branch(x: str, cin: int, bf: int, stride: int) -> str:
        y = cbr(x, cin, bf, 1)
        y = cbr(y, bf, bf, 3, stride, group=bf, relu=False)
        return cbr(y, bf, bf, 1)

    x = cbr(input_name, 3, stages_out_channels[0], 3, 2)
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, hw = stages_out_channels[0], -(-image // 4)
    for repeats, cout in zip(stages_repeats, stages_out_channels[1:-1]):
        bf = cout // 2
        hw = -(-hw // 2)
        left = cbr(cbr(x, cin, cin, 3, 2, group=cin, relu=False), cin, bf, 1)  # branch1 of the stride-2 unit
        x = shuffle(b.node("Concat", [left, branch(x, cin, bf, 2)], axis=1), cout, hw)
        for _ in range(repeats - 1):
            name = b.fresh("channel_split")
            b.node("Split", [x, b.init(f"{name}.sizes", np.array([bf, bf], np.int64))], name=name, n_outputs=2,
                   axis=1)
            right = branch(f"{name}_out1", bf, bf, 1)
            x = shuffle(b.node("Concat", [f"{name}_out0", right], axis=1), cout, hw)
        cin = cout
    x = cbr(x, cin, stages_out_channels[-1], 1)
    x = b.node("ReduceMean", [x], axes=[2, 3], keepdims=0)
    out = b.gemm_fc(x, stages_out_channels[-1], num_classes)
    return b.model([(input_name, (batch, 3, image, image))], [out], name="shufflenet_v2")


# GoogLeNet's inception modules: (name, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection); "M" is a max pool
GOOGLENET_BLOCKS: tuple = (
    ("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64), "M",
    ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64), ("4c", 128, 128, 256, 24, 64, 64),
    ("4d", 112, 144, 288, 32, 64, 64), ("4e", 256, 160, 320, 32, 128, 128), "M",
    ("5a", 256, 160, 320, 32, 128, 128), ("5b", 384, 192, 384, 48, 128, 128),
)


def make_googlenet(batch: int = 1, image: int = 224, num_classes: int = 1000, blocks: Sequence = GOOGLENET_BLOCKS,
                   seed: int = 0, input_name: str = "data") -> onnx.ModelProto:
    """GoogLeNet (Inception v1, the BVLC model of the ONNX model zoo): conv7x7/2, max pool, LRN, conv1x1, conv3x3,
    LRN, max pool (pools 3x3/2 with ceil_mode), 9 inception modules (1x1 | 1x1 -> 3x3 | 1x1 -> 5x5 | max pool 3x3/1
    -> 1x1, concatenated) with max pools between, GAP, Dropout, Flatten, Gemm. Convs have a bias and a ReLU."""
    b = GraphBuilder(seed)

    def conv_relu(x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int | None = None) -> str:
        return b.node("Relu", [b.conv(x, cin, cout, k, stride, pad=pad, bias=True)])

    def pool(x: str, stride: int = 2, pad: int = 0) -> str:
        return b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[stride, stride], pads=[pad] * 4,
                      ceil_mode=1 if stride > 1 else 0)

    def lrn(x: str) -> str:
        return b.node("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)

    x = lrn(pool(conv_relu(input_name, 3, 64, 7, 2, pad=3)))
    x = pool(lrn(conv_relu(conv_relu(x, 64, 64, 1), 64, 192, 3)))
    cin = 192
    for blk in blocks:
        if blk == "M":
            x = pool(x)
            continue
        _, c1, r3, c3, r5, c5, cp = blk
        parts = [conv_relu(x, cin, c1, 1), conv_relu(conv_relu(x, cin, r3, 1), r3, c3, 3),
                 conv_relu(conv_relu(x, cin, r5, 1), r5, c5, 5), conv_relu(pool(x, 1, 1), cin, cp, 1)]
        x = b.node("Concat", parts, name=f"inception_{blk[0]}", axis=1)
        cin = c1 + c3 + c5 + cp
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    x = b.node("Flatten", [b.node("Dropout", [x])], name="flatten", axis=1)
    out = b.gemm_fc(x, cin, num_classes)
    return b.model([(input_name, (batch, 3, image, image))], [out], name="googlenet")


def make_densenet121(batch: int = 1, image: int = 224, num_classes: int = 1000,
                     block_config: Sequence[int] = (6, 12, 24, 16), growth: int = 32, bn_size: int = 4,
                     init_features: int = 64, seed: int = 0, input_name: str = "data") -> onnx.ModelProto:
    """DenseNet-121 (torchvision): conv7x7/2 + BN + ReLU, max pool, 4 dense blocks (each layer: Concat of every
    earlier feature map of the block -> BN -> ReLU -> conv1x1 to 4 x growth -> BN -> ReLU -> conv3x3 to growth)
    with transitions (BN, ReLU, conv1x1 halving the channels, average pool 2x2/2), BN, ReLU, GAP, Gemm."""
    b = GraphBuilder(seed)

    def bn_relu_conv(x: str, cin: int, cout: int, k: int) -> str:
        return b.conv(b.node("Relu", [b.bn(x, cin)]), cin, cout, k)

    x = b.node("Relu", [b.bn(b.conv(input_name, 3, init_features, 7, 2, pad=3), init_features)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = init_features
    for i, layers in enumerate(block_config):
        features = [x]
        for _ in range(layers):
            cat = b.node("Concat", features, axis=1)
            cin = c + growth * (len(features) - 1)
            y = bn_relu_conv(bn_relu_conv(cat, cin, bn_size * growth, 1), bn_size * growth, growth, 3)
            features.append(y)
        x = b.node("Concat", features, axis=1)
        c += growth * layers
        if i != len(block_config) - 1:
            x = bn_relu_conv(x, c, c // 2, 1)
            x = b.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
    x = b.node("Relu", [b.bn(x, c)])
    out = _classifier(b, x, c, num_classes, name="classifier")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="densenet121")


VGG11_CONVS: tuple = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


def make_vgg11(batch: int = 1, image: int = 224, num_classes: int = 1000, fc_units: int = 4096,
               convs: Sequence = VGG11_CONVS, seed: int = 0, input_name: str = "data") -> onnx.ModelProto:
    """VGG-11 (torchvision, configuration A): 8 conv3x3 + ReLU with max pools 2x2/2, Flatten, then Gemm + ReLU +
    Dropout twice (``fc_units`` wide; 4096 in the real network) and the classifier Gemm."""
    b = GraphBuilder(seed)
    x, cin, size = input_name, 3, image
    for v in convs:
        if v == "M":
            x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
            size //= 2
        else:
            x = b.node("Relu", [b.conv(x, cin, v, 3, bias=True)])
            cin = v
    x = b.node("Flatten", [x], name="flatten", axis=1)
    x = b.node("Dropout", [b.node("Relu", [b.gemm_fc(x, cin * size * size, fc_units, name="fc1")])])
    x = b.node("Dropout", [b.node("Relu", [b.gemm_fc(x, fc_units, fc_units, name="fc2")])])
    out = b.gemm_fc(x, fc_units, num_classes, name="fc3")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="vgg11")


def make_unet(batch: int = 1, image: int = 224, num_classes: int = 21, base: int = 16, seed: int = 0,
              input_name: str = "data") -> onnx.ModelProto:
    """A segmentation U-Net as PyTorch exports it (opset 17): blocks of two 3x3 convs, each followed by group
    normalisation (4 channels a group; exported as Reshape to [N, groups, -1], InstanceNormalization, Reshape
    back, Mul and Add per channel) and SiLU (Sigmoid x Mul); three max-pooled levels; the decoder upsamples by a
    2x2/2 ConvTranspose, a bilinear Resize + 1x1 conv and a 4x4/2 pad-1 ConvTranspose, each concatenated with
    its skip; per-pixel logits from a 1x1 conv."""
    b = GraphBuilder(seed, opset=17)
    size = {}  # the spatial size of each level's channel count, for the reshapes

    def norm_silu(x: str, c: int) -> str:
        groups = c // 4
        ones, zeros = np.ones(groups, np.float32), np.zeros(groups, np.float32)
        g = b.node("Reshape", [x, b.init(b.fresh("gn.grouped"), np.array([batch, groups, -1], np.int64))])
        g = b.node("InstanceNormalization", [g, b.init(b.fresh("gn.one"), ones), b.init(b.fresh("gn.zero"), zeros)],
                   epsilon=1e-5)
        g = b.node("Reshape", [g, b.init(b.fresh("gn.shape"), np.array([batch, c, size[c], size[c]], np.int64))])
        scale = b.init(b.fresh("gn.weight"), b.rng.uniform(0.5, 1.5, (c, 1, 1)).astype(np.float32))
        shift = b.init(b.fresh("gn.bias"), (b.rng.standard_normal((c, 1, 1)) * 0.1).astype(np.float32))
        y = b.node("Add", [b.node("Mul", [g, scale]), shift])
        return b.node("Mul", [y, b.node("Sigmoid", [y])])

    def block(x: str, cin: int, cout: int) -> str:
        return norm_silu(b.conv(norm_silu(b.conv(x, cin, cout, 3), cout), cout, cout, 3), cout)

    def up_transposed(x: str, cin: int, cout: int, k: int, pad: int) -> str:
        w = (b.rng.standard_normal((cin, cout, k, k)) * np.sqrt(1.0 / (cin * k * k / 4))).astype(np.float32)
        return b.node("ConvTranspose", [x, b.init(b.fresh("up.weight"), w)], kernel_shape=[k, k], strides=[2, 2],
                      pads=[pad] * 4)

    def pool(x: str) -> str:
        return b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])

    c1, c2, c3, c4 = base, 2 * base, 4 * base, 8 * base
    size.update({c1: image, c2: image // 2, c3: image // 4, c4: image // 8})
    e1 = block(input_name, 3, c1)
    e2 = block(pool(e1), c1, c2)
    e3 = block(pool(e2), c2, c3)
    mid = block(pool(e3), c3, c4)
    d3 = block(b.node("Concat", [up_transposed(mid, c4, c3, 2, 0), e3], axis=1), 2 * c3, c3)
    scales = b.init("up2.scales", np.array([1, 1, 2, 2], np.float32))
    up2 = b.conv(b.node("Resize", [d3, "", scales], mode="linear"), c3, c2, 1)
    d2 = block(b.node("Concat", [up2, e2], axis=1), 2 * c2, c2)
    d1 = block(b.node("Concat", [up_transposed(d2, c2, c1, 4, 1), e1], axis=1), 2 * c1, c1)
    out = b.conv(d1, c1, num_classes, 1, bias=True, name="head")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="unet")


def make_yolo_neck(batch: int = 1, image: int = 224, num_classes: int = 20, seed: int = 0,
                   input_name: str = "data") -> onnx.ModelProto:
    """A YOLOv4-style detector at small width: conv + BatchNormalization + Mish down to 1/16, spatial pyramid
    pooling (max pools 5, 9 and 13 at stride 1, concatenated), conv + LeakyRelu, a 2x nearest Resize to the
    1/8 level and its concatenation with it, and a 1x1 head of 3 anchors x (5 + classes) per cell."""
    b = GraphBuilder(seed, opset=18)

    def cbm(x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
        return b.node("Mish", [b.bn(b.conv(x, cin, cout, k, stride), cout)])

    def cbl(x: str, cin: int, cout: int, k: int) -> str:
        return b.node("LeakyRelu", [b.bn(b.conv(x, cin, cout, k), cout)], alpha=0.1)

    x = cbm(input_name, 3, 16, 3, 2)
    x = cbm(cbm(x, 16, 32, 3, 2), 32, 32, 3)
    p3 = cbm(cbm(x, 32, 64, 3, 2), 64, 64, 3)
    p4 = cbl(cbm(p3, 64, 128, 3, 2), 128, 128, 1)
    pools = [b.node("MaxPool", [p4], kernel_shape=[k, k], strides=[1, 1], pads=[k // 2] * 4) for k in (5, 9, 13)]
    spp = cbl(b.node("Concat", [p4, *pools], axis=1), 4 * 128, 128, 1)
    scales = b.init("fpn.scales", np.array([1, 1, 2, 2], np.float32))
    up = b.node("Resize", [cbl(spp, 128, 64, 1), "", scales], mode="nearest")
    x = cbl(cbl(b.node("Concat", [up, p3], axis=1), 128, 64, 1), 64, 128, 3)
    out = b.conv(x, 128, 3 * (5 + num_classes), 1, bias=True, name="head")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="yolo_neck")


def make_espcn(batch: int = 1, image: int = 224, upscale: int = 3, seed: int = 0,
               input_name: str = "data") -> onnx.ModelProto:
    """ESPCN super-resolution: 5x5 conv 64 + Tanh, 3x3 conv 32 + Tanh, 3x3 conv to 3 x upscale^2 channels, then
    the pixel shuffle (DepthToSpace) to an image upscale times larger."""
    b = GraphBuilder(seed)
    x = b.node("Tanh", [b.conv(input_name, 3, 64, 5, bias=True)])
    x = b.node("Tanh", [b.conv(x, 64, 32, 3, bias=True)])
    x = b.conv(x, 32, 3 * upscale * upscale, 3, bias=True)
    out = b.node("DepthToSpace", [x], blocksize=upscale, mode="CRD")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="espcn")


FAMILIES = {
    "resnet50": make_resnet50,
    "squeezenet1_1": make_squeezenet1_1,
    "shufflenet_v2": make_shufflenet_v2,
    "googlenet": make_googlenet,
    "densenet121": make_densenet121,
    "vgg11": make_vgg11,
    "unet": make_unet,
    "yolo_neck": make_yolo_neck,
    "espcn": make_espcn,
}


def make_single_op(op: str, inputs: Sequence[tuple[str, Sequence[int]]], *, initializers: dict[str, np.ndarray]
                   | None = None, extra_inputs: Sequence[str] = (), n_outputs: int = 1, opset: int = 13,
                   seed: int = 0, **attrs: Any) -> onnx.ModelProto:
    """A model of one node: graph inputs ``inputs`` (float32), then ``extra_inputs`` names (initializers or ``""``
    for an omitted optional input) as further node inputs; the node's first output is the graph's output."""
    b = GraphBuilder(seed, opset)
    for name, value in (initializers or {}).items():
        b.init(name, value)
    names = [n for n, _ in inputs] + list(extra_inputs)
    b.node(op, names, name="y" if n_outputs == 1 else "node", n_outputs=n_outputs, **attrs)
    out = "y" if n_outputs == 1 else "node_out0"
    return b.model(inputs, [out], name=f"single_{op}")


def random_inputs(model: onnx.ModelProto, seed: int = 0, shapes: dict[str, Sequence[int]] | None = None
                  ) -> dict[str, np.ndarray]:
    """Seeded standard-normal float32 arrays for the model's graph inputs (initializers excluded)."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = (shapes or {}).get(vi.name) or [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def run_onnxruntime(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The reference: the model's outputs from onnxruntime's CPU provider (one thread, no graph rewrites that could
    change rounding beyond float32 reassociation)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)
