"""The CNN families people deploy (classifiers, and a segmentation U-Net, a YOLO-style detector and ESPCN
super-resolution), at their real sizes (batch 1, 3x224x224, seeded random weights
built in the test with onnx.helper): each imports with ``relay.frontend.from_onnx``, builds with ``relay.build``
(default schedules) and its logits match onnxruntime's to 1e-3 of their largest magnitude, built for this
host and for AVX2 (``-mcpu=haswell``, which an AVX-512 host also runs: SqueezeNet once differed only there; an
AVX2 host's own build is the AVX2 one, and builds once)."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from _cpus import skip_if_the_host_build_is_this_isa, skip_unless_host_runs  # noqa: E402
from _onnx_models import FAMILIES, random_inputs, run_onnxruntime  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.relay.frontend import from_onnx  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402

# the operators that make each family what it is (the test fails if a builder stops using them)
SIGNATURE_OPS = {
    "resnet50": {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"},
    "squeezenet1_1": {"Conv", "Relu", "MaxPool", "Concat", "Dropout", "GlobalAveragePool", "Flatten"},
    "shufflenet_v2": {"Conv", "BatchNormalization", "Relu", "MaxPool", "Split", "Concat", "Reshape", "Transpose",
                      "ReduceMean", "Gemm"},
    "googlenet": {"Conv", "Relu", "MaxPool", "LRN", "Concat", "GlobalAveragePool", "Dropout", "Flatten", "Gemm"},
    "densenet121": {"Conv", "BatchNormalization", "Relu", "MaxPool", "Concat", "AveragePool", "GlobalAveragePool",
                    "Flatten", "Gemm"},
    "vgg11": {"Conv", "Relu", "MaxPool", "Flatten", "Gemm", "Dropout"},
    "unet": {"Conv", "InstanceNormalization", "Reshape", "Sigmoid", "Mul", "MaxPool", "ConvTranspose", "Resize",
             "Concat"},
    "yolo_neck": {"Conv", "BatchNormalization", "Mish", "LeakyRelu", "MaxPool", "Concat", "Resize"},
    "espcn": {"Conv", "Tanh", "DepthToSpace"},
}


# the dense-prediction families' outputs (the classifiers' are 1000 logits)
OUTPUT_SHAPES = {"unet": (1, 21, 224, 224), "yolo_neck": (1, 75, 28, 28), "espcn": (1, 3, 672, 672)}


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref|: the logits' error on the scale of the logits."""
    return float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())


@pytest.mark.slow
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_matches_onnxruntime(family: str, target: str) -> None:
    skip_unless_host_runs(target)
    if target != "llvm":  # (on an AVX2 host the host build is the AVX2 one)
        skip_if_the_host_build_is_this_isa(target)
    model = FAMILIES[family]()
    ops = Counter(n.op_type for n in model.graph.node)
    assert SIGNATURE_OPS[family] <= set(ops), f"{family} lacks {SIGNATURE_OPS[family] - set(ops)}"
    inputs = random_inputs(model)
    assert inputs["data"].shape == (1, 3, 224, 224)
    t0 = time.perf_counter()
    mod, params = from_onnx(model, shape={"data": (1, 3, 224, 224)})
    lib = relay.build(mod, target=target, params=params)
    t_build = time.perf_counter() - t0
    m = GraphModule(*lib)
    m.set_input("data", inputs["data"])
    m.run()
    got = m.get_output(0)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    (ref,) = run_onnxruntime(model, inputs)
    assert got.shape == ref.shape == OUTPUT_SHAPES.get(family, (1, 1000))
    assert np.abs(ref).max() > 0
    err = relative_error(got, ref)
    print(f"{family}: {sum(ops.values())} nodes, {len(lib.kernels)} kernels, import+build {t_build:.1f} s, "
          f"max|diff|/max|ref| {err:.1e}")
    assert err <= 1e-3
