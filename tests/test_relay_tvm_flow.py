"""TVM's relay deployment flow, as its tutorials write it (relay_quick_start, from_onnx, autotvm_relay_x86):
``relay.build`` returns a factory module (``lib["default"](dev)``, ``export_library`` of the whole model,
``runtime.load_module`` of it), ``graph_executor.GraphModule`` wraps the executor, ``get_output(i, out)``
answers ``.numpy()``, ``relay.build_module.create_executor(...).evaluate()`` runs a model, and
``tvm.transform.PassContext`` is the context relay's passes read. ``tvm`` is autosched, mapped by name."""

import json
import logging
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

import autosched as tvm
from _onnx_models import make_espcn, make_resnet18, run_onnxruntime
from autosched import relay
from autosched.contrib import graph_executor, utils
from autosched.runtime.graph_executor import OutputArray

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def resnet():
    model = make_resnet18(image=32, width=8, num_classes=10)
    mod, params = relay.frontend.from_onnx(model, {"data": (1, 3, 32, 32)})
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 32, 32)).astype("float32")
    return model, mod, params, x


@pytest.fixture(scope="module")
def built(resnet):
    _, mod, params, _ = resnet
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, "llvm", params=params)


def test_quick_start_flow_builds_runs_exports_and_loads_the_model(resnet, built, tmp_path):
    """relay_quick_start.py, unedited but for the model and the target: build, run through
    ``GraphModule(lib["default"](dev))``, export as ``.tar``, load, run with an NDArray, same output."""
    model, _, _, data = resnet
    lib = built
    dev = tvm.cpu()
    module = graph_executor.GraphModule(lib["default"](dev))
    module.set_input("data", data)
    module.run()
    out = module.get_output(0, tvm.nd.empty((1, 10))).numpy()
    np.testing.assert_allclose(out, run_onnxruntime(model, {"data": data})[0], rtol=1e-4, atol=1e-5)

    temp = utils.tempdir()
    path_lib = temp.relpath("deploy_lib.tar")
    lib.export_library(path_lib)
    assert temp.listdir() == ["deploy_lib.tar"]
    with tarfile.open(path_lib) as t:
        assert t.getnames() == ["lib.so"]  # one shared library: kernels, graph JSON and parameters
    loaded_lib = tvm.runtime.load_module(path_lib)
    input_data = tvm.nd.array(data)
    module = graph_executor.GraphModule(loaded_lib["default"](dev))
    module.run(data=input_data)
    out_deploy = module.get_output(0).numpy()
    tvm.testing.assert_allclose(out_deploy, out, atol=1e-5)

    # the loaded model exported again (a copy) and as a plain .so
    loaded_lib.export_library(tmp_path / "again.so")
    lib.export_library(tmp_path / "model.so")
    for path in ("again.so", "model.so"):
        m = graph_executor.GraphModule(tvm.runtime.load_module(tmp_path / path)["default"](dev))
        m.run(data=data)
        np.testing.assert_array_equal(m.get_output(0), out_deploy)


def test_an_exported_model_runs_where_llvmlite_is_absent(resnet, built, tmp_path):
    """The one-file model is what a deployer ships: a process without llvmlite loads and runs it."""
    _, _, _, data = resnet
    built.export_library(tmp_path / "model.so")
    np.save(tmp_path / "x.npy", data)
    code = ("import sys; sys.modules['llvmlite'] = None\n"
            "import numpy as np\n"
            "import autosched as tvm\n"
            "from autosched.contrib import graph_executor\n"
            f"lib = tvm.runtime.load_module({str(tmp_path / 'model.so')!r})\n"
            "m = graph_executor.GraphModule(lib['default'](tvm.cpu(0)))\n"
            f"m.set_input('data', np.load({str(tmp_path / 'x.npy')!r})); m.run()\n"
            f"np.save({str(tmp_path / 'y.npy')!r}, m.get_output(0).numpy())\n"
            "assert 'llvmlite' not in sys.modules or sys.modules['llvmlite'] is None\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT),
                                                                              "PATH": "/usr/bin:/bin"})
    want = graph_executor.GraphModule(built["default"](tvm.cpu()))
    want.run(data=data)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want.get_output(0))


def test_the_build_result_is_still_the_tuple_and_has_tvms_getters(built):
    graph_json, lib, params = built
    assert built.get_graph_json() is graph_json and built.get_lib() is lib and built.get_params() is params
    assert built.graph_json is graph_json and built[1] is lib and len(built) == 3
    assert json.loads(graph_json)["heads"] and built.libmod_name == "default"
    kernel = lib.function_names[0]
    assert built[kernel] is lib.get_function(kernel)  # another name: that kernel
    m = built["default"]()  # the device may be left out
    assert isinstance(m, graph_executor.GraphModule)
    assert graph_executor.GraphModule(m)._entries is m._entries  # wrapping the executor shares it
    assert m["run"] == m.run and m["get_num_outputs"]() == 1  # TVM's executor functions by name
    with pytest.raises(AttributeError, match="no function 'nope'"):
        m["nope"]


def test_get_output_is_numpy_with_tvms_numpy_method_or_fills_out(resnet, built):
    _, _, _, data = resnet
    m = graph_executor.GraphModule(built["default"](tvm.cpu(0)))
    m.run(data=data)
    y = m.get_output(0)
    assert isinstance(y, OutputArray) and isinstance(y, np.ndarray) and y.shape == (1, 10)
    assert type(y.numpy()) is np.ndarray and type(y.asnumpy()) is np.ndarray
    np.testing.assert_array_equal(y.numpy(), y)
    out = np.zeros((1, 10), "float32")
    assert m.get_output(0, out) is out
    np.testing.assert_array_equal(out, y)
    with pytest.raises(ValueError, match=r"out has shape \(10,\), the output \(1, 10\)"):
        m.get_output(0, tvm.nd.empty((10,)))
    np.testing.assert_array_equal(m.get_input("data").numpy(), data)


def test_a_device_the_library_does_not_run_on_is_refused(built):
    with pytest.raises(ValueError, match=r"built for the CPU and cannot run on cuda\(0\)"):
        built["default"](tvm.cuda(0))
    with pytest.raises(TypeError, match="expected a device"):
        built["default"]("llvm")
    with pytest.raises(TypeError, match=r"GraphModule\(relay.build\(...\)\['default'\]\(dev\)\)"):
        graph_executor.GraphModule(built.graph_json)


def test_load_module_refuses_a_tar_it_did_not_write(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with tarfile.open(tmp_path / "other.tar", "w") as t:
        t.add(tmp_path / "a.txt", arcname="a.txt")
    with pytest.raises(ValueError, match=r"other.tar is not a library written by export_library .* holds a.txt"):
        tvm.runtime.load_module(tmp_path / "other.tar")
    (tmp_path / "broken.tar").write_bytes(b"not a tar")
    with pytest.raises(ValueError, match="cannot read .*broken.tar as a tar"):
        tvm.runtime.load_module(tmp_path / "broken.tar")


def test_a_kernel_library_exports_to_a_tar_too(tmp_path):
    """``tvm.build(...).export_library("f.tar")`` (TVM's tutorials write both suffixes)."""
    A = tvm.te.placeholder((16,), name="A")
    B = tvm.te.compute((16,), lambda i: A[i] + 1, name="B")
    f = tvm.build(tvm.te.create_schedule(B.op), [A, B], "llvm", name="add_one")
    f.export_library(tmp_path / "f.tar")
    g = tvm.runtime.load_module(tmp_path / "f.tar")
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    g["add_one"](a, b)
    np.testing.assert_array_equal(b, a + 1)
    g.export_library(tmp_path / "g.tar")  # a loaded library is copied, still as a tar
    with tarfile.open(tmp_path / "g.tar") as t:
        assert t.getnames() == ["lib.so"]


def test_create_executor_runs_a_model_as_from_onnx_does():
    """from_onnx.py: ``relay.build_module.create_executor("graph", mod, tvm.cpu(0), target, params)
    .evaluate()`` under ``PassContext(opt_level=1)``, called with an NDArray."""
    model = make_espcn(image=16, upscale=2)
    x = np.random.default_rng(1).random((1, 3, 16, 16)).astype("float32")
    name = model.graph.input[0].name
    mod, params = relay.frontend.from_onnx(model, {name: x.shape})
    with tvm.transform.PassContext(opt_level=1):
        executor = relay.build_module.create_executor("graph", mod, tvm.cpu(0), "llvm", params).evaluate()
    tvm_output = executor(tvm.nd.array(x)).numpy()
    np.testing.assert_allclose(tvm_output, run_onnxruntime(model, {name: x})[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(executor(**{name: x}).numpy(), tvm_output)  # by name, numpy in
    with pytest.raises(TypeError, match=f"the model's input {name} was not given"):
        executor()
    with pytest.raises(TypeError, match="takes 1 inputs"):
        executor(x, x)
    with pytest.raises(ValueError, match="unknown kind 'jit'"):
        relay.create_executor("jit", mod)


def test_create_executor_of_an_expression_with_two_outputs():
    a = relay.var("a", shape=(4,))
    b = relay.var("b", shape=(4,))
    f = relay.Function([a, b], relay.Tuple([relay.add(a, b), relay.multiply(a, b)]))
    run = relay.create_executor("debug", device=tvm.cpu(0)).evaluate(f)
    x, y = np.arange(4, dtype="float32"), np.full(4, 2, "float32")
    s, p = run(x, y)
    assert isinstance(s, tvm.nd.NDArray)
    np.testing.assert_array_equal(s.numpy(), x + y)
    np.testing.assert_array_equal(p.numpy(), x * y)


def _layouts(graph_json: str) -> set:
    return {len(s) for s in json.loads(graph_json)["attrs"]["shape"][1]}


def test_tvms_pass_context_is_the_one_relay_reads(resnet, caplog):
    """``tvm.transform.PassContext`` and ``relay.transform.PassContext`` are one class: its opt_level and
    disabled_pass decide relay.build's passes (AlterOpLayout's blocked layouts are 5-d); a pass or option
    autosched does not have is logged once as having no effect."""
    _, mod, params, _ = resnet
    assert relay.transform.PassContext is tvm.transform.PassContext
    assert 5 in _layouts(relay.build(mod, "llvm", params=params).graph_json)  # opt_level 3 by default
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["AlterOpLayout"]):
        assert 5 not in _layouts(relay.build(mod, "llvm", params=params).graph_json)
    with tvm.transform.PassContext(opt_level=2):
        assert 5 not in _layouts(relay.build(mod, "llvm", params=params).graph_json)
    caplog.set_level(logging.INFO, logger="autosched.transform")
    with tvm.transform.PassContext(disabled_pass=["FoldScaleAxis", "FuseOps"], config={"relay.winograd": False,
                                                                                      "tir.noalias": True}):
        pass
    said = [r.getMessage() for r in caplog.records]
    assert any("disabled_pass 'FoldScaleAxis' has no effect" in m for m in said)
    assert any("config 'tir.noalias' has no effect" in m for m in said)
    assert not any("FuseOps" in m or "relay.winograd" in m for m in said)
    with pytest.raises(TypeError, match="lists of pass names"):
        tvm.transform.PassContext(disabled_pass="AlterOpLayout")


def _run_levels(mod, params, x):
    """The model's first output built at opt_level 0 (plain layouts) and 3 (blocked), run on ``x``."""
    outs = []
    for level in (0, 3):
        with tvm.transform.PassContext(opt_level=level):
            m = graph_executor.GraphModule(relay.build(mod, "llvm", params=params)["default"](tvm.cpu()))
        m.run(data=x)
        outs.append(m.get_output(0).numpy())
    return outs


@pytest.mark.parametrize("net, kwargs, nparams", [
    ("resnet", {"num_layers": 18}, 102), ("resnet", {"num_layers": 50}, 267), ("mobilenet", {"alpha": 0.25}, 137),
    ("vgg", {"num_layers": 11, "batch_norm": True}, 54), ("mlp", {"image_shape": (3, 32, 32)}, 6),
    ("resnet", {"num_layers": 18, "layout": "NHWC", "image_shape": (32, 32, 3)}, 102),
    ("mobilenet", {"alpha": 0.25, "layout": "NHWC", "image_shape": (32, 32, 3)}, 137)])
def test_relay_testing_networks_build_and_agree_at_every_opt_level(net, kwargs, nparams):
    """relay.testing's networks (TVM's benchmark and tutorial models, random weights): each builds, its class
    probabilities sum to one, and the blocked-layout build (opt_level 3) equals the plain one (0)."""
    kw = {"image_shape": (3, 32, 32), "num_classes": 10, "batch_size": 2, **kwargs}
    mod, params = getattr(relay.testing, net).get_workload(**kw)
    assert len(params) == nparams and [p.name_hint for p in mod["main"].params][0] == "data"
    assert all(isinstance(v, tvm.nd.NDArray) for v in params.values())
    x = np.random.default_rng(0).standard_normal((2, *kw["image_shape"])).astype("float32")
    outs = _run_levels(mod, params, x)
    assert outs[0].shape == (2, 10)
    np.testing.assert_allclose(outs[0].sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("net, kwargs, nweights", [
    ("squeezenet", {"version": "1.0"}, 1248424), ("squeezenet", {"version": "1.1"}, 1235496),
    ("inception_v3", {}, 23834568), ("densenet", {"batch_size": 1}, 7978856),
    ("densenet", {"batch_size": 1, "densenet_size": 161}, 28681000), ("dqn", {}, 1693362),
    ("resnet_3d", {"num_classes": 400}, 33371472)])
def test_relay_testing_networks_have_their_papers_weights(net, kwargs, nweights):
    """The networks TVM's tuning tutorials and benchmarks name (squeezenet_v1.1, inception_v3, densenet, dqn,
    resnet_3d) have the published number of weights (torchvision's counts: Inception v3 without its auxiliary head,
    resnet_3d as r3d_18; batch norm's running statistics are not weights)."""
    mod, params = getattr(relay.testing, net).get_workload(**kwargs)
    assert sum(v.numpy().size for k, v in params.items() if not k.endswith(("moving_mean", "moving_var"))) == nweights
    classes = 18 if net == "dqn" else kwargs.get("num_classes", 1000)
    assert mod["main"].checked_type.ret_type.shape == (kwargs.get("batch_size", 1), classes)


@pytest.mark.parametrize("net, kwargs", [
    ("squeezenet", {"version": "1.0", "image_shape": (3, 64, 64), "num_classes": 10}),
    ("squeezenet", {"version": "1.1", "image_shape": (3, 64, 64), "num_classes": 10}),
    ("inception_v3", {"image_shape": (3, 75, 75), "num_classes": 10}),
    ("densenet", {"image_shape": (3, 32, 32), "classes": 10}),
    ("resnet_3d", {"image_shape": (3, 4, 32, 32), "num_classes": 10})])
def test_relay_testing_cnns_build_and_agree_at_every_opt_level(net, kwargs):
    """Small images, weights scaled up so that the class probabilities are far from uniform: the blocked-layout build
    (opt_level 3, Winograd, fused concatenations) gives what the plain one (0) does."""
    mod, params = getattr(relay.testing, net).get_workload(batch_size=2, **kwargs)
    params = {k: tvm.nd.array(v.numpy() * (1.6 if v.numpy().ndim >= 4 else 1.0)) for k, v in params.items()}
    x = np.random.default_rng(0).standard_normal((2, *kwargs["image_shape"])).astype("float32")
    plain, blocked = _run_levels(mod, params, x)
    assert plain.shape == (2, 10) and plain.max() > 0.3  # not the flat 0.1s of vanishing activations
    np.testing.assert_allclose(plain.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(blocked, plain, rtol=1e-4, atol=1e-6)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_relay_testing_dqn_lstm_and_dcgan_compute_their_formulas():
    """The three networks that are not classifiers, against numpy written from their papers' formulas."""
    rng = np.random.default_rng(0)
    mod, params = relay.testing.dqn.get_workload(batch_size=2)
    p = {k: v.numpy() for k, v in params.items()}
    x = rng.standard_normal((2, 4, 84, 84)).astype("float32")
    h = x
    for k, (_, kernel, stride) in enumerate(relay.testing.dqn.CONVS):
        w = p[f"conv{k + 1}_weight"]
        win = np.lib.stride_tricks.sliding_window_view(h, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
        h = np.maximum(np.einsum("nchwij,ocij->nohw", win, w) + p[f"conv{k + 1}_bias"][:, None, None], 0)
    h = np.maximum(h.reshape(2, -1) @ p["dense1_weight"].T + p["dense1_bias"], 0)
    ref = h @ p["dense2_weight"].T + p["dense2_bias"]
    for out in _run_levels(mod, params, x):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)

    mod, params = relay.testing.lstm.get_workload(iterations=3, num_hidden=16, batch_size=2)
    p = {k: v.numpy() for k, v in params.items()}
    x = rng.standard_normal((2, 16)).astype("float32")
    h = c = np.zeros((2, 16), "float32")
    for k in range(3):
        gates = x @ p[f"i2h_{k}_weight"].T + p[f"i2h_{k}_bias"] + h @ p[f"h2h_{k}_weight"].T + p[f"h2h_{k}_bias"]
        i, f, g, o = np.split(gates, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
    for out in _run_levels(mod, params, x):
        np.testing.assert_allclose(out, h, rtol=1e-5, atol=1e-6)

    mod, params = relay.testing.dcgan.get_workload(batch_size=2, oshape=(3, 16, 16), ngf=8, random_len=10)
    p = {k: v.numpy() for k, v in params.items()}
    x = rng.standard_normal((2, 10)).astype("float32")
    eps = 2e-5

    def bn_relu(v, name):
        scale = p[f"{name}_gamma"] / np.sqrt(p[f"{name}_moving_var"] + eps)
        return np.maximum((v - p[f"{name}_moving_mean"][:, None, None]) * scale[:, None, None]
                          + p[f"{name}_beta"][:, None, None], 0)

    def deconv(v, w):  # stride 2, padding 1, 4x4: each input pixel scatters its 4x4 patch, the border cropped
        n, _, hh, ww = v.shape
        out = np.zeros((n, w.shape[1], 2 * hh + 2, 2 * ww + 2), "float64")
        for yy in range(hh):
            for xx in range(ww):
                out[:, :, 2 * yy:2 * yy + 4, 2 * xx:2 * xx + 4] += np.einsum("nc,cokl->nokl", v[:, :, yy, xx], w)
        return out[:, :, 1:-1, 1:-1]

    h = bn_relu((x @ p["g1_weight"].T).reshape(2, 16, 4, 4), "g1_bn")
    h = np.tanh(deconv(bn_relu(deconv(h, p["g2_weight"]), "g2_bn"), p["g3_weight"]))
    for out in _run_levels(mod, params, x):
        assert out.shape == (2, 3, 16, 16)
        np.testing.assert_allclose(out, h, rtol=1e-4, atol=1e-5)


def test_relay_testing_refuses_unknown_layouts_and_depths_by_name():
    with pytest.raises(relay.RelayError, match="layout 'NCHW8c' is not one of NCHW, NHWC"):
        relay.testing.resnet.get_workload(layout="NCHW8c")
    with pytest.raises(relay.RelayError, match="version '1.2' is not one of"):
        relay.testing.squeezenet.get_workload(version="1.2")
    with pytest.raises(relay.RelayError, match="densenet_size 100 is not one of"):
        relay.testing.densenet.get_workload(densenet_size=100)
    with pytest.raises(relay.RelayError, match="only the NCHW layout"):
        relay.testing.inception_v3.get_workload(layout="NHWC")
    with pytest.raises(relay.RelayError, match="square with a size of 4 times a power of 2"):
        relay.testing.dcgan.get_workload(oshape=(3, 48, 48))
    with pytest.raises(relay.RelayError, match="layout 'NDHWC' is not provided"):
        relay.testing.resnet_3d.get_workload(layout="NDHWC")
    with pytest.raises(relay.RelayError, match=r"num_layers 20 is not one of \[18, 34, 50, 101, 152\]"):
        relay.testing.resnet.get_workload(num_layers=20)


def test_create_workload_gives_a_users_network_its_parameters():
    data = relay.var("data", shape=(1, 4))
    w = relay.var("fc_weight", shape=(3, 4))
    b = relay.var("fc_bias", shape=(3,))
    mod, params = relay.testing.create_workload(relay.Function([data, w, b], relay.nn.bias_add(
        relay.nn.dense(data, w), b)))
    assert sorted(params) == ["fc_bias", "fc_weight"] and not params["fc_bias"].numpy().any()
    limit = np.sqrt(6 / 7)
    assert 0 < np.abs(params["fc_weight"].numpy()).max() <= limit  # Xavier-uniform


def test_nhwc_convolutions_and_pools_compute_what_nchw_ones_do():
    """TVM's NHWC layouts (HWIO kernels, HWOI depthwise ones) run as NCHW between transposes: equal to the NCHW
    ops on the transposed data and weights."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 9, 9, 8)).astype("float32")
    w = rng.standard_normal((3, 3, 8, 16)).astype("float32")
    dw = rng.standard_normal((3, 3, 16, 1)).astype("float32")

    def run(data, body):
        v = relay.var("d", shape=data.shape)
        m = graph_executor.GraphModule(relay.build(relay.IRModule.from_expr(relay.Function([v], body(v))),
                                                   "llvm")["default"]())
        m.run(d=data)
        return m.get_output(0).numpy()

    got = run(x, lambda d: relay.nn.global_avg_pool2d(relay.nn.max_pool2d(relay.nn.conv2d(
        relay.nn.conv2d(d, relay.const(w), padding=(1, 1), strides=(2, 2), data_layout="NHWC", kernel_layout="HWIO"),
        relay.const(dw), padding=(1, 1), groups=16, data_layout="NHWC", kernel_layout="HWOI"), (2, 2), (2, 2),
        layout="NHWC"), layout="NHWC"))
    want = run(x.transpose(0, 3, 1, 2), lambda d: relay.nn.global_avg_pool2d(relay.nn.max_pool2d(relay.nn.conv2d(
        relay.nn.conv2d(d, relay.const(w.transpose(3, 2, 0, 1)), padding=(1, 1), strides=(2, 2)),
        relay.const(dw.transpose(2, 3, 0, 1)), padding=(1, 1), groups=16), (2, 2), (2, 2))))
    assert got.shape == (1, 1, 1, 16)
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
