"""ONNX models built in memory with ``onnx.helper`` (seeded random weights, nothing downloaded).

``make_resnet18`` and ``make_mobilenet_v2`` give networks with the layer structure of torchvision's models
(narrower or smaller inputs on request) for the ONNX frontend's end-to-end tests; benchmarks reuse them with::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _onnx_models import make_resnet18

``make_single_op`` wraps one node in a model, for op-by-op comparisons with onnxruntime.
"""

from __future__ import annotations

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
        w = (self.rng.standard_normal((cout, cin)) * np.sqrt(1.0 / cin)).astype(np.float32)
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
        graph = helper.make_graph(self.nodes, name, ins, outs, initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="autosched-tests")
        model.ir_version = IR_VERSION
        # the checker wants every graph output typed with a shape: take them from onnx's shape inference
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        for vi, typed in zip(model.graph.output, inferred.graph.output):
            if typed.type.tensor_type.HasField("shape"):
                vi.CopyFrom(typed)
        onnx.checker.check_model(model, full_check=True)
        return model


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
            if stride != 1 or cin != cout:
                x = b.bn(b.conv(x, cin, cout, 1, stride, pad=0, name=f"{p}.downsample.0"), cout,
                         name=f"{p}.downsample.1")
            x = b.node("Relu", [b.node("Add", [y, x], name=f"{p}.add")], name=f"{p}.relu")
            cin = cout
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    x = b.node("Flatten", [x], name="flatten", axis=1)
    out = b.gemm_fc(x, cin, num_classes)
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
    x = b.node("GlobalAveragePool", [x], name="avgpool")
    x = b.node("Flatten", [x], name="flatten", axis=1)
    out = b.gemm_fc(x, last, num_classes, name="classifier")
    return b.model([(input_name, (batch, 3, image, image))], [out], name="mobilenet_v2")


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
