"""AlterOpLayout: models built in blocked layouts (the default, opt_level 3) compute what the NCHW build
(opt_level 2) computes; a ResNet keeps no layout transform inside and no weight transform at run time; the
layout built is the layout tuned; records made on another CPU are named, once, with the command to tune here.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).parent))

import autosched  # noqa: E402
from _cpus import skip_if_the_host_build_is_this_isa, skip_unless_host_runs  # noqa: E402
from _onnx_models import (  # noqa: E402
    GraphBuilder,
    make_densenet121,
    make_mobilenet_v2,
    make_resnet18,
    random_inputs,
    run_onnxruntime,
)
from autosched import relay  # noqa: E402
from autosched.relay.frontend import from_onnx  # noqa: E402
from autosched.runtime.graph_executor import GraphModule  # noqa: E402

MODELS = {
    "resnet": lambda: make_resnet18(image=32, width=16, num_classes=10),
    "mobilenet_v2": lambda: make_mobilenet_v2(image=32, width_mult=0.5, num_classes=10),
    "densenet": lambda: make_densenet121(image=32, block_config=(2, 2), growth=16, init_features=32,
                                         num_classes=10),
}


def _build(model, opt_level: int, target: str = "llvm"):
    x = random_inputs(model)["data"]
    mod, params = from_onnx(model, shape={"data": x.shape})
    with relay.transform.PassContext(opt_level=opt_level):
        res = relay.build(mod, target=target, params=params)
    m = GraphModule(*res)
    m.set_input("data", x)
    m.run()
    return res, m.get_output(0)


def _ops(graph_json: str) -> list[str]:
    return [n["name"] for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op"]


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_blocked_build_equals_the_nchw_build(name, target):
    skip_unless_host_runs(target)
    if target != "llvm":
        skip_if_the_host_build_is_this_isa(target)
    model = MODELS[name]()
    blocked, y = _build(model, 3, target)
    _, ref = _build(model, 2, target)
    assert any("nchwc" in k for k in _ops(blocked[0])), "the default build is blocked"
    err = float(np.abs(y - ref).max() / np.abs(ref).max())
    assert err <= 1e-4, f"{name}: blocked build differs from NCHW by {err:.1e}"


def test_resnet_keeps_layouts_and_packs_weights_ahead_of_time():
    model = make_resnet18(image=64, width=16, num_classes=10)
    res, _ = _build(model, 3)
    kernels = _ops(res[0])
    transforms = [k for k in kernels if "layout_transform" in k]
    # the stem reads the NCHW input directly; the only transform is after global pooling, before the classifier
    assert len(transforms) == 1 and "batch_flatten" in transforms[0], kernels
    assert "conv2d_nchwc" in kernels[0]
    graph = json.loads(res[0])
    params = res[2]
    # every weight is already in its kernel's layout: no kernel reads a parameter only to transform it
    for node in graph["nodes"]:
        if node["op"] == "tvm_op" and "layout_transform" in node["name"]:
            src = graph["nodes"][node["inputs"][0][0]]
            assert src["op"] != "null" or src["name"] not in params
    conv_weights = [v for v in params.values() if v.ndim == 6]  # OIHW[x]i[y]o
    assert conv_weights and all(w.shape[-1] == autosched.target.Target("llvm").cpu.lanes()
                                for w in conv_weights if w.shape[0] * w.shape[-1] >= 16)


@pytest.mark.parametrize("channels", [27, 75])
def test_odd_output_channels_are_padded_to_blocks(channels):
    """A convolution whose output channels no block of 8 divides (ESPCN's 27, a YOLO head's 75) is computed
    blocked on zero-padded filters, and only its real channels are kept: equal to the NCHW build."""
    b = GraphBuilder(seed=4)
    y = b.node("Tanh", [b.conv(b.node("Relu", [b.conv("data", 3, 32, 3)]), 32, channels, 3, bias=True)])
    model = b.model([("data", (1, 3, 20, 20))], [y])
    blocked, out = _build(model, 3)
    _, ref = _build(model, 2)
    assert out.shape == ref.shape == (1, channels, 20, 20)
    kernels = _ops(blocked[0])
    assert not any("conv2d" in k and "nchwc" not in k for k in kernels), kernels  # no plain NCHW conv
    assert any("strided_slice" in k for k in kernels), kernels
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) <= 1e-4


def test_dilated_convolutions_run_blocked_without_the_taps_that_read_only_padding():
    """DeepLab's ASPP on a 10x10 map: at rate 12 every tap but the centre reads padding, so the 3x3 is a 1x1
    conv; at rate 4 the taps stay, a dilated blocked conv (FCN's backbone, rate 2, likewise). Both blocked,
    both equal the unpruned NCHW build and onnxruntime."""
    b = GraphBuilder(seed=5)
    x = b.node("Relu", [b.conv("data", 3, 16, 3)])
    branches = []
    for rate in (4, 12):
        w = (b.rng.standard_normal((8, 16, 3, 3)) * 0.2).astype(np.float32)
        branches.append(b.node("Conv", [x, b.init(f"aspp{rate}.weight", w)], kernel_shape=[3, 3],
                               dilations=[rate, rate], pads=[rate] * 4))
    model = b.model([("data", (1, 3, 10, 10))], [b.node("Concat", branches, axis=1)])
    blocked, out = _build(model, 3)
    _, ref = _build(model, 2)
    plain = [k for k in _ops(blocked[0]) if "conv2d" in k and "nchwc" not in k]
    assert not plain, _ops(blocked[0])
    mod, params = from_onnx(model, shape={"data": (1, 3, 10, 10)})
    graphs = [t.args["graph"] for t in relay.extract_tasks(mod, params, "llvm") if "conv2d_nchwc" in t.args["graph"]]
    assert sum('"dilation":[4,4]' in g for g in graphs) == 1, graphs  # rate 4 dilated; rate 12 a 1x1
    assert not any('"dilation":[1,1]' in g for g in graphs), graphs  # task keys as before dilation was an attr
    assert float(np.abs(out - ref).max() / np.abs(ref).max()) <= 1e-5
    np.testing.assert_allclose(out, run_onnxruntime(model, random_inputs(model))[0], rtol=1e-4, atol=1e-4)


def test_a_tuned_records_layout_is_the_layout_built(tmp_path):
    model = make_resnet18(image=16, width=16, num_classes=10)
    x = random_inputs(model)["data"]
    mod, params = from_onnx(model, shape={"data": x.shape})
    for target, block in (("llvm -mcpu=haswell", 8), ("llvm -mcpu=skylake-avx512", 16)):
        tasks = relay.extract_tasks(mod, params, target)
        conv = next(t for t in tasks if "conv2d_nchwc" in t.args["graph"] and "[1,1,1,1]" in t.args["graph"])
        assert f'"out_layout":"NCHW{block}c"' in conv.args["graph"]
    skip_unless_host_runs("llvm -mcpu=haswell")  # the tuning below runs AVX2 code
    tasks = relay.extract_tasks(mod, params, "llvm -mcpu=haswell")
    conv = next(t for t in tasks if "conv2d_nchwc" in t.args["graph"])
    db = f"sqlite:///{tmp_path / 'r.db'}"
    autosched.tune(conv, trials=2, backend="local", database=db, seed=0)
    with autosched.apply_history_best(db):
        res = relay.build(mod, target="llvm -mcpu=haswell", params=params)
    tuned = [k for k in res.kernels if k["tuned"]]
    assert [k["workload_key"] for k in tuned] == [conv.workload_key]


@pytest.mark.compile_only  # builds for two AVX-512 CPUs and runs neither
def test_records_of_another_cpu_warn_once_with_the_command(tmp_path, caplog):
    model = make_resnet18(image=16, width=8, num_classes=10)
    x = random_inputs(model)["data"]
    mod, params = from_onnx(model, shape={"data": x.shape})
    other = "llvm -mcpu=skylake-avx512"
    db = f"sqlite:///{tmp_path / 'other.db'}"
    _store_defaults(relay.extract_tasks(mod, params, other), db)
    # the same kernels built for a CPU of another name (same vector class: same layouts, same keys)
    here = "llvm -mcpu=icelake-server"
    with caplog.at_level(logging.WARNING, logger="autosched.relay"):
        with autosched.apply_history_best(db):
            relay.build(mod, target=here, params=params)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "skylake-avx512" in warnings[0] and "autosched tune --model" in warnings[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="autosched.relay"):
        with autosched.apply_history_best(db, allow_other_cpus=True):
            res = relay.build(mod, target=here, params=params)
    assert all(k["tuned"] for k in res.kernels if k["task"] is not None and "conv2d" in k["task"].label)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "another CPU (llvm -mcpu=skylake-avx512)" in warnings[0], warnings


def _store_defaults(tasks, db_url):
    """Records of ``tasks`` with their default schedules, written as if measured there (the host may not run
    the other CPU's code): what a teammate's database would hold."""
    from autosched.database.database import open_database
    from autosched.measure.result import MeasureInput, MeasureResult

    db, _ = open_database(db_url)
    try:
        db.commit_many([(MeasureInput(t, t.default_trace()), MeasureResult(costs=[1e-3])) for t in tasks])
    finally:
        db.close()


def test_generated_space_of_a_fused_winograd_kernel_is_its_nest():
    """A fused Winograd kernel (conv, bias, relu) tunes in the family of Winograd nests: every sampled candidate
    keeps the transforms as their own unrolled stages (generic rules inlined them into one another, and one
    candidate then took minutes to lower), and computes what the default schedule computes."""
    model = make_resnet18(image=32, width=32, num_classes=10)
    x = random_inputs(model)["data"]
    mod, params = from_onnx(model, shape={"data": x.shape})
    task = next(t for t in relay.extract_tasks(mod, params, "llvm") if "Winograd" in t.label)
    sch, args = task.default_schedule()
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal([int(d) for d in a.shape]).astype(a.dtype) for a in args[:-1]]
    ref = np.zeros([int(d) for d in args[-1].shape], args[-1].dtype)
    autosched.build(sch, args)(*ins, ref)
    for trace in task.space("generated").sample(4, rng):
        sch, args = task.apply(trace)
        transforms = [st for st in sch.stages if st.op.name.startswith("winograd_")]
        assert len(transforms) >= 4 and all(st.attach_type != "inline" for st in transforms), trace
        out = np.zeros_like(ref)
        autosched.build(sch, args)(*ins, out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_winograd_only_on_images_where_it_pays():
    """F(4, 3) at 8x8 outputs and more; smaller images (a ResNet's last stage) keep the direct kernel, whose
    filters are smaller than the transformed ones."""
    model = make_resnet18(image=64, width=32, num_classes=10)  # 3x3 stride-1 convs at 16, 8, 4 and 2 pixels
    mod, params = from_onnx(model, shape={"data": (1, 3, 64, 64)})
    for target in ("llvm", "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"):  # tasks only: nothing runs
        block = autosched.target.Target(target).cpu.lanes()  # the channel block is one vector of the target
        labels = [t.label for t in relay.extract_tasks(mod, params, target)]
        winograd = [s for s in labels if "Winograd" in s]
        assert len(winograd) >= 4 and all("F(4,3)" in s for s in winograd), (target, labels)
        assert any(f"x4x4 * 128x128x3x3 s1 [NCHW{block}c]" in s for s in labels), (target, labels)
