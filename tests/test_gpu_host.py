"""The host side of cuda builds, without a GPU: the getting-started tutorial's vector add (a symbolic n) and a
ResNet-shaped model built for cuda, their PTX assembled by ``ptxas`` for sm_80 and sm_90, the host and
device modules saved, loaded and joined again, and the launches the host wrapper makes observed through a
stand-in for the CUDA driver (tests/cuda_driver_stub.c, loaded as ``$AUTOSCHED_LIBCUDA``). The stand-in
records launches and copies; it runs no kernel, so results are checked on the CPU (each kernel's grid run
serially) and, where a GPU is present, by tests/test_gpu.py.
"""

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import autosched
from _cpus import SERIAL_CPU
from _gpu_checks import assert_coalesced
from _onnx_models import make_single_op
from autosched import relay, te
from autosched.cli import main
from autosched.codegen.nvptx import ptxas_check, ptxas_path
from autosched.runtime import cuda, load_module
from autosched.runtime.graph_executor import GraphModule

HERE = Path(__file__).resolve().parent
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA's PTX assembler) is not installed")
needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler for the driver stand-in")
ARCHS = ("sm_80", "sm_90")


class _Launch(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("nparams", ctypes.c_int), ("params", ctypes.c_uint64 * 64)]


class DriverStub:
    """What the stand-in driver saw: launches (name, grid, block, parameters), PTX loaded, copies."""

    def __init__(self, path: Path):
        self.lib = ctypes.CDLL(str(path))
        self.lib.stub_launch.restype = ctypes.POINTER(_Launch)
        self.lib.stub_counter.restype = ctypes.c_long
        self.lib.stub_last_image.restype = ctypes.c_char_p
        self.lib.stub_ops.restype = ctypes.c_char_p

    def launches(self) -> list[dict]:
        out = []
        for k in range(self.lib.stub_launch_count()):
            x = self.lib.stub_launch(k).contents
            out.append({"name": x.name.decode(), "grid": tuple(x.grid), "block": tuple(x.block),
                        "params": list(x.params[:x.nparams])})
        return out

    def counter(self, what: str) -> int:
        return self.lib.stub_counter(["modules", "htod", "dtoh", "alloc", "free"].index(what))

    @property
    def last_ptx(self) -> str:
        return self.lib.stub_last_image().decode()

    @property
    def ops(self) -> str:
        """Launches ("L"), event records ("R<id>") and waits ("S<id>"), memsets ("M<bytes>"), in order."""
        return self.lib.stub_ops().decode()

    def reset(self) -> None:
        self.lib.stub_reset()


@pytest.fixture(scope="module")
def stub_library(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("driver") / "libcuda_stub.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(out), str(HERE / "cuda_driver_stub.c")],
                   check=True, capture_output=True)
    return out


@pytest.fixture
def driver(stub_library, monkeypatch):
    """The stand-in as the process's CUDA driver for one test (a real one, if any, comes back after)."""
    monkeypatch.setenv("AUTOSCHED_LIBCUDA", str(stub_library))
    monkeypatch.setattr(cuda._Driver, "_instance", None)
    stub = DriverStub(stub_library)
    stub.reset()
    yield stub
    cuda._Driver._instance = None


def vector_add():
    """The tutorial: n = te.var("n"), split by 64, the outer loop on blockIdx.x, the inner on threadIdx.x."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def arrays(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32"),
            np.zeros(n, "float32")]


@pytest.fixture(scope="module")
def myadd():
    """Built for the oldest of ARCHS, so that ptxas checks it for each (a plain "cuda" names the GPU's own
    arch where there is one: sm_90 PTX is no sm_80 code)."""
    s, args = vector_add()
    return autosched.build(s, args, target=f"cuda -arch={ARCHS[0]}", name="myadd")


# ----------------------------------------------------------------------------- the tutorial's vector add
@needs_ptxas
@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add_ptx_assembles(myadd, arch):
    ptx = myadd.imported_modules[0].get_source()
    assert ".visible .entry myadd(" in ptx and "%ctaid.x" in ptx and "%tid.x" in ptx
    assert "Used" in ptxas_check(ptx, arch)


@needs_cc
def test_the_host_wrapper_computes_the_grid_from_n_on_each_call(myadd, driver):
    a, b, c = arrays(1000)
    myadd(a, b, c)
    a1, b1, c1 = arrays(1)
    myadd(a1, b1, c1)
    myadd(*arrays(0))  # nothing to compute: no launch (the driver refuses a grid of 0 blocks)
    first, second = driver.launches()
    assert (first["name"], first["grid"], first["block"]) == ("myadd", (16, 1, 1), (64, 1, 1))
    assert (second["grid"], second["block"]) == ((1, 1, 1), (64, 1, 1))
    # parameters: three device pointers, then n
    assert first["params"][3] == 1000 and second["params"][3] == 1
    assert len(set(first["params"][:3])) == 3 and all(first["params"][:3])
    # one PTX load, the three arrays copied in each call, the output copied back, everything freed
    assert driver.counter("modules") == 1 and driver.last_ptx.startswith(myadd.get_source()[:200])
    assert driver.counter("htod") == 9 and driver.counter("dtoh") == 3
    assert driver.counter("alloc") == driver.counter("free") == 9


@needs_cc
def test_device_caller_launches_back_to_back_on_resident_arrays(myadd, driver):
    call = myadd.entry_func.device_caller(arrays(4096))
    call(5)
    assert [x["grid"] for x in driver.launches()] == [(64, 1, 1)] * 5 and driver.counter("htod") == 3


def test_a_grid_over_the_limit_is_refused_by_the_host_naming_the_shape():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.y"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    mod = autosched.build(s, [A, B], target="cuda")
    assert mod["main"].launch_dims([100]) == ((1, 100, 1), (4, 1, 1))
    with pytest.raises(ValueError, match=r"n = 70000 needs 70000 blocks along blockIdx.y \(n\), over CUDA's limit"):
        mod["main"].launch_dims([70000])


# ----------------------------------------------------------------------------- save, load, import
@needs_cc
def test_host_and_device_modules_saved_apart_and_joined_again(myadd, driver, tmp_path):
    """The tutorial's round trip: export the host library, save the PTX, load both, import, call."""
    myadd.export_library(tmp_path / "myadd.so")
    myadd.imported_modules[0].save(tmp_path / "myadd.ptx")
    assert (tmp_path / "myadd.ptx").read_text() == myadd.get_source("ptx")
    host = load_module(tmp_path / "myadd.so")
    dev = load_module(tmp_path / "myadd.ptx")
    assert isinstance(host, cuda.CUDAModule) and isinstance(dev, cuda.PTXModule) and dev.kernels == ["myadd"]
    host.import_module(dev)
    assert host.imported_modules == [dev]  # the loaded PTX replaces the copy the library carried
    assert host["myadd"].launch == myadd["myadd"].launch and host["myadd"].sig == myadd["myadd"].sig
    host(*arrays(1000))
    assert driver.last_ptx == myadd.get_source("ptx")
    assert [(x["name"], x["grid"], x["block"]) for x in driver.launches()] == [("myadd", (16, 1, 1), (64, 1, 1))]


@needs_cc
def test_single_file_export_carries_the_ptx(myadd, driver, tmp_path):
    myadd.export_library(tmp_path / "myadd_pack.so")
    packed = load_module(tmp_path / "myadd_pack.so")
    assert [m.kernels for m in packed.imported_modules] == [["myadd"]]
    assert packed.get_source("ptx") == myadd.get_source("ptx")
    packed(*arrays(1))
    assert driver.launches()[0]["grid"] == (1, 1, 1) and driver.last_ptx == myadd.get_source("ptx")


def test_a_host_module_without_device_code_says_what_to_import(myadd):
    host = cuda.CUDAModule(None, myadd.sigs, myadd.launches, "myadd")
    with pytest.raises(cuda.CUDAError, match=r"no device code for kernel 'myadd'.*import_module"):
        host.device_module("myadd")
    with pytest.raises(AttributeError, match="through the host module"):
        myadd.imported_modules[0].get_function("myadd")


# ----------------------------------------------------------------------------- relay.build for cuda
@pytest.fixture(scope="module")
def resnet():
    from _onnx_models import make_resnet18

    model = make_resnet18(image=32, width=8, num_classes=10)
    return relay.frontend.from_onnx(model, shape={"data": (1, 3, 32, 32)})


@pytest.fixture(scope="module")
def resnet_cuda(resnet):
    mod, params = resnet
    return relay.build(mod, target=f"cuda -arch={ARCHS[0]}", params=params)  # checked for each of ARCHS


@needs_ptxas
def test_relay_build_for_cuda_gives_graph_ptx_and_params(resnet_cuda):
    graph_json, lib, params = resnet_cuda
    graph = json.loads(graph_json)
    calls = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert calls.count("__nop") == 1  # batch_flatten: a view of the pooled tensor, no kernel
    kernels = [k for k in calls if k != "__nop"]
    ops = " ".join(kernels)
    for op in ("conv2d", "max_pool2d", "global_avg_pool2d", "dense"):
        assert op in ops
    distinct = sorted(set(kernels))  # 23 calls of 18 kernels (the identical residual blocks share theirs)
    assert len(kernels) == 23 and len(distinct) == 18 and sorted(lib.function_names) == distinct
    ptx = lib.imported_modules[0]
    assert sorted(ptx.kernels) == distinct
    for arch in ARCHS:
        report = ptxas_check(ptx.get_source(), arch)
        assert report.count("Compiling entry function") == len(distinct)
    inputs = {graph["nodes"][k]["name"] for k in graph["arg_nodes"]}
    assert inputs == set(params) | {"data"} and all(isinstance(v, np.ndarray) for v in params.values())
    assert sum(v.ndim == 4 and v.shape[2:] in ((7, 7), (3, 3), (1, 1)) and v.shape[1] > 1 for v in params.values()
               ) == 20  # the 20 conv weights (batch norm folded into them and into biases)


def test_the_cuda_kernels_of_a_model_compute_what_the_cpu_build_does(resnet):
    """Each of the model's GPU kernels with its grid run serially on the CPU, in the same graph: equal to
    the CPU build of the model."""
    from autosched.codegen.build import build_many
    from autosched.relay.backend.build_module import _GraphBuilder, optimize
    from autosched.target import Target
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    mod, params = resnet
    with Target("cuda"):
        fused = optimize(mod, params)
    gb = _GraphBuilder(fused["main"], "cuda", use_records=False)
    graph_json = gb.run()
    serial = build_many([serialize_bindings(prepare_kernel(f)[0]) for f in gb.prims], SERIAL_CPU)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype("float32")
    got = GraphModule(graph_json, serial, gb.params)
    got.run(data=x)
    want = GraphModule(*relay.build(mod, target="llvm", params=params))
    want.run(data=x)
    np.testing.assert_allclose(got.get_output(0), want.get_output(0), rtol=1e-4, atol=1e-5)


@needs_cc
def test_the_graph_executor_runs_a_cuda_graph_on_device_memory(resnet_cuda, driver, tmp_path):
    graph_json, lib, params = resnet_cuda
    graph = json.loads(graph_json)
    ops = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    ops = [k for k in ops if k != "__nop"]  # (a reshape: no launch)
    m = GraphModule(graph_json, lib, params)
    assert driver.counter("htod") == len(params)  # parameters uploaded once
    x = np.ones((1, 3, 32, 32), "float32")
    m.set_input("data", x)
    m.run()
    m.run()
    launches = driver.launches()
    assert [x["name"] for x in launches] == ops * 2  # every kernel, in graph order, no copies in between
    assert driver.counter("htod") == len(params) + 1 and driver.counter("dtoh") == 0
    out = m.get_output(0)
    assert out.shape == (1, 10) and driver.counter("dtoh") == 1
    np.testing.assert_array_equal(m.get_input("data"), x)  # the input round-trips through device memory
    # the launch of a conv2d kernel: its grid and block are the default schedule's, its pointers distinct
    first = launches[0]
    assert first["block"][0] * first["block"][1] * first["block"][2] <= 1024 and len(set(first["params"])) == 4
    # a deployable folder: graph, library with the PTX embedded, params
    from autosched.runtime import graph_executor

    graph_executor.export(tmp_path / "deploy", graph_json, lib, params)
    again = graph_executor.load(tmp_path / "deploy")
    again.run(data=x)
    assert [x["name"] for x in driver.launches()[len(launches):]] == ops
    # TVM's one-file export: the host library carries the PTX, the graph and the parameters
    resnet_cuda.export_library(tmp_path / "model.so")
    loaded = load_module(tmp_path / "model.so")
    assert isinstance(loaded.lib, cuda.CUDAModule) and sorted(loaded.params) == sorted(params)
    with pytest.raises(ValueError, match="built for a cuda GPU and cannot run on cpu"):
        loaded["default"](autosched.cpu(0))
    before = len(driver.launches())
    graph_executor.GraphModule(loaded["default"](autosched.cuda(0))).run(data=x)
    assert [x["name"] for x in driver.launches()[before:]] == ops


# ----------------------------------------------------------------------------- default schedules coalesce
def test_relay_cuda_defaults_store_coalesced(resnet):
    """Every kernel of the model under its default cuda schedule: consecutive threadIdx.x store consecutive
    addresses (runs of at least 8 floats, or whole rows)."""
    from autosched.relay.backend.build_module import _GraphBuilder, optimize
    from autosched.target import Target
    from autosched.tir.gpu import prepare_kernel

    mod, params = resnet
    with Target("cuda"):
        fused = optimize(mod, params)
    gb = _GraphBuilder(fused["main"], "cuda", use_records=False)
    gb.run()
    for f in gb.prims:
        assert_coalesced(prepare_kernel(f)[0], f.name)


def test_bench_gpu_says_no_cuda_device():
    root = HERE.parent
    env = {**os.environ, "AUTOSCHED_LIBCUDA": "/nonexistent/libcuda.so.1", "PYTHONPATH": str(root)}
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_gpu.py"), "--trials", "1"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 2 and "no CUDA device" in res.stderr


def test_the_generated_cuda_space_tunes_fused_kernels(resnet):
    """A model's kernels with an epilogue (conv2d + bias + relu) have cuda sketches: the epilogue is tiled,
    reading the accumulators in registers; samples store coalesced and compute what the CPU build does."""
    from autosched.relay.backend.build_module import extract_tasks
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    mod, params = resnet
    tasks = extract_tasks(mod, params, "cuda")
    assert len(tasks) == 18
    rng = np.random.default_rng(0)
    for task in tasks:
        for trace in task.space("generated").sample(2, np.random.default_rng(0)):
            kernel = autosched.lower(*task.apply(trace), target="cuda")
            assert_coalesced(kernel, task.label)
    conv = next(t for t in tasks if t.label.startswith("conv2d+add+relu"))
    cpu = autosched.Task(conv.name, conv.args)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in cpu.tensors()[:-1]]
    want = np.zeros([int(d) for d in cpu.tensors()[-1].shape], "float32")
    autosched.build(*cpu.default_schedule())(*ins, want)
    for trace in conv.space("generated").sample(3, np.random.default_rng(1)):
        kernel, _ = prepare_kernel(autosched.lower(*conv.apply(trace)))
        got = np.zeros_like(want)
        autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(*ins, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=trace.dumps())


# ----------------------------------------------------------------------------- the GPU's own architecture
@pytest.fixture
def fresh_arch():
    """The driver is asked for the GPU's architecture once per process: ask again in this test, and after it."""
    from autosched import target

    target._gpu_arch.cache_clear()
    yield
    target._gpu_arch.cache_clear()


@needs_cc
def test_a_cuda_target_without_arch_takes_the_gpus(stub_library, monkeypatch, fresh_arch):
    """``cuda`` builds for the GPU here (the stand-in says compute capability 9.0, then 8.6), and the string
    says so: the tasks' keys (what records are stored under) and the PTX agree; -arch= is kept as given."""
    from autosched.target import Target

    monkeypatch.setenv("AUTOSCHED_LIBCUDA", str(stub_library))
    monkeypatch.delenv("AUTOSCHED_STUB_CC", raising=False)
    t = Target("cuda")
    assert (str(t), t.arch, t.key) == ("cuda -arch=sm_90", "sm_90", "cuda -arch=sm_90")
    assert Target("cuda -arch=sm_80").arch == "sm_80" and Target(t) == t
    task = autosched.Task("elementwise", dict(C=2, H=4, W=8, op="sigmoid_mul"), target="cuda")
    assert task.target.key == "cuda -arch=sm_90"
    s, args = vector_add()
    mod = autosched.build(s, args, target="cuda", name="myadd")
    assert mod.arch == "sm_90" and ".target sm_90" in mod.get_source("ptx")
    monkeypatch.setenv("AUTOSCHED_STUB_CC", "86")
    from autosched import target as target_module

    target_module._gpu_arch.cache_clear()
    assert Target("cuda").arch == "sm_86"


def test_without_a_gpu_a_cuda_target_builds_for_sm_80(monkeypatch, fresh_arch):
    monkeypatch.setenv("AUTOSCHED_LIBCUDA", "/nonexistent/libcuda.so.1")
    from autosched.target import DEFAULT_CUDA_ARCH, Target, host_gpu_arch

    assert host_gpu_arch() is None and DEFAULT_CUDA_ARCH == "sm_80"
    assert str(Target("cuda")) == "cuda -arch=sm_80" and Target("cuda").key == "cuda -arch=sm_80"


@needs_cc
def test_the_build_summary_speaks_of_the_gpu(stub_library, monkeypatch, fresh_arch):
    """relay.build's closing line on a cuda target: other GPUs' records, and the command that tunes for this
    GPU with its real architecture (it used to say "tune for this CPU ... -arch=sm_80" on an sm_90 GPU)."""
    import types

    import autosched.database.apply as apply
    from autosched.relay.backend.build_module import build_summary

    monkeypatch.setenv("AUTOSCHED_LIBCUDA", str(stub_library))
    monkeypatch.delenv("AUTOSCHED_STUB_CC", raising=False)
    task = autosched.Task("elementwise", dict(C=2, H=4, W=8, op="sigmoid_mul"), target="cuda")
    class Records:  # a database that holds this kernel's records for an sm_80 GPU only
        def targets(self, task):
            return {"cuda -arch=sm_80"}

        def __str__(self):
            return "tuning.db"

    monkeypatch.setattr(apply, "current_contexts",
                        lambda: [types.SimpleNamespace(database=Records(), allow_other_cpus=False)])
    line, warn = build_summary([{"task": task, "tuned": False}], {}, task.target)
    assert warn and "CPU" not in line, line
    assert "have records only for other GPUs (cuda -arch=sm_80: 1 kernels)" in line
    assert "tune for this GPU with `autosched tune --model MODEL.onnx --db tuning.db --target 'cuda -arch=sm_90'`" \
        in line
    cpu_line, _ = build_summary([{"task": autosched.Task("elementwise", task.args), "tuned": False}], {}, "llvm")
    assert "tune for this CPU" in cpu_line


# ----------------------------------------------------------------------------- timing on the GPU: CUDA events
@needs_cc
def test_device_calls_time_batches_between_two_events(myadd, driver):
    call = myadd.entry_func.device_caller(arrays(4096))
    driver.reset()
    t = call.time(5)
    # one event recorded before the five launches and one after, then a wait for the second
    assert re.fullmatch(r"R(\d+) L L L L L R(\d+) S\2 ", driver.ops), driver.ops
    assert 2e-6 <= t < 0.1  # the stand-in's events: the host clock, plus 2 us of "GPU time" per launch
    driver.reset()
    call(3)  # a plain call launches and waits for the context: no events
    assert driver.ops == "L L L "


@needs_cc
def test_cold_timing_flushes_the_l2_before_each_launch(myadd, driver, monkeypatch):
    """Cold: the L2 cache is flushed (cuMemsetD8 over twice the size the driver reports) before each launch,
    and events time each launch alone; the host waits once for a queue of such launches."""
    monkeypatch.setenv("AUTOSCHED_STUB_L2", str(1 << 20))
    call = myadd.entry_func.device_caller(arrays(4096))
    driver.reset()
    t = call.time_cold(3)
    flush = f"M{2 << 20}"
    assert re.fullmatch(rf"({flush} R\d+ L R\d+ ){{3}}S\d+ ", driver.ops), driver.ops
    assert 2e-6 <= t < 0.1
    driver.reset()
    call.time_cold(40)  # more than a queue (32): two waits
    ops = driver.ops.split()
    assert ops.count(flush) == 40 and ops.count("L") == 40 and sum(o.startswith("S") for o in ops) == 2
    assert driver.counter("alloc") == 0  # the flushing buffer was allocated once, by the first cold call


@needs_cc
def test_time_evaluator_times_a_cuda_function_with_events(myadd, driver, monkeypatch):
    monkeypatch.setenv("AUTOSCHED_STUB_L2", str(1 << 20))
    a, b, c = arrays(1000)
    res = myadd.time_evaluator(myadd.entry_name, autosched.cuda(0), number=4, repeat=2)(a, b, c)
    assert len(res.results) == 2 and all(r >= 2e-6 for r in res.results)
    assert len(re.findall(r"R\d+ L L L L R\d+ S\d+", driver.ops)) == 2, driver.ops
    driver.reset()
    cold = myadd.time_evaluator(myadd.entry_name, autosched.cuda(0), number=2, repeat=2,
                                f_preproc="l2_cache_flush_cuda")(a, b, c)
    assert len(cold.results) == 2 and driver.ops.count(f"M{2 << 20} ") == 4
    cpu = autosched.build(*vector_add_cpu(), target="llvm")
    with pytest.raises(ValueError, match="not a cuda function"):
        cpu.time_evaluator(cpu.entry_name, number=1, f_preproc="l2_cache_flush_cuda")(*arrays(16))


def vector_add_cpu():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return te.create_schedule(C.op), [A, B, C]


# ----------------------------------------------------------------------------- the measurement runner on a GPU
@pytest.fixture
def gpu_candidate(tmp_path, stub_library, monkeypatch, fresh_arch):
    """A cuda candidate as the builder leaves it (``.cuda.json``) and its task's data, with the stand-in as the
    driver and as NVML."""
    from autosched.measure.data import prepare_task_data

    monkeypatch.setenv("AUTOSCHED_LIBCUDA", str(stub_library))
    monkeypatch.setenv("AUTOSCHED_LIBNVML", str(stub_library))
    monkeypatch.setenv("AUTOSCHED_STUB_L2", str(1 << 20))
    monkeypatch.delenv("AUTOSCHED_STUB_CC", raising=False)
    monkeypatch.setattr(cuda._Driver, "_instance", None)
    task = autosched.Task("elementwise", dict(C=2, H=4, W=8, op="sigmoid_mul"), target="cuda")
    trace = task.space("template").sample(1, np.random.default_rng(0))[0]
    path = tmp_path / "candidate.cuda.json"
    autosched.build(*task.apply(trace), target=task.target).save(path)
    stub = DriverStub(stub_library)
    stub.reset()
    yield task, prepare_task_data(task, check=False), str(path), stub
    cuda._Driver._instance = None


@needs_cc
@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
def test_the_runner_times_gpu_candidates_with_events_and_records_the_clocks(gpu_candidate, monkeypatch, cold):
    """The run worker times a cuda candidate by events around each repeat's batch (or, with the cold-cache
    option ``flush_cache``, around each launch after an L2 flush) and reports the GPU's clocks (NVML) with
    where it was timed: what the engine puts in the result's ``machine``."""
    from autosched.measure import worker as worker_module
    from autosched.measure.worker import RunService

    task, data, path, stub = gpu_candidate
    monkeypatch.setattr(worker_module, "HEAT_SECONDS", 0.0)  # the stand-in keeps at most 4096 launches
    service = RunService()
    service.put_data(data)
    assert service.load(data.key, path, None)[0] is None
    assert isinstance(service.warmup(1, None, False), float)
    stub.reset()
    costs, _, _, machine = service.time(3, 2, 0.0, cold)
    assert len(costs) == 2 and all(c >= 2e-6 for c in costs)
    # one timing of 2 repeats, or more where the load meter saw other processes on the cores (pytest -n 8 on
    # the GPU machine) and the worker timed again
    if cold:
        assert re.fullmatch(rf"(((M{2 << 20} R\d+ L R\d+ ){{3}}S\d+ ){{2}})+", stub.ops), stub.ops
    else:
        assert re.fullmatch(r"((R\d+ L L L R\d+ S\d+ ){2})+", stub.ops), stub.ops
    assert {k: machine[k] for k in ("gpu", "gpu_arch", "sm_clock_mhz", "mem_clock_mhz", "pstate")} == {
        "gpu": "autosched driver stub", "gpu_arch": "sm_90", "sm_clock_mhz": "1755", "mem_clock_mhz": "2619",
        "pstate": "P0"}
    assert machine["host"] and machine["host_cpu"]
    service.cleanup()


@needs_cc
def test_without_nvml_the_clocks_are_unknown(gpu_candidate, monkeypatch):
    monkeypatch.setenv("AUTOSCHED_LIBNVML", "/nonexistent/libnvidia-ml.so.1")
    state = cuda.clock_state()
    assert state == {"gpu": "autosched driver stub", "gpu_arch": "sm_90", "sm_clock_mhz": "unknown",
                     "mem_clock_mhz": "unknown", "pstate": "unknown"}
    monkeypatch.setenv("AUTOSCHED_LIBCUDA", "/nonexistent/libcuda.so.1")
    monkeypatch.setattr(cuda._Driver, "_instance", None)
    assert set(cuda.clock_state().values()) == {"unknown"}  # no driver either: still no error


@pytest.mark.parametrize("target", ["cuda", "llvm"])
def test_tune_cold_cache_sets_the_runners_cold_cache_option(target, tmp_path, monkeypatch, fresh_arch, driver):
    """`autosched tune --cold-cache` is the runner's flush_cache: on a GPU every timed launch follows an L2
    flush (number and min_repeat_ms as usual); on a CPU a repeat is one run after the caches are flushed."""
    import autosched.cli.tune as tune_cli

    seen = {}

    def measurer(*args, config=None, **kwargs):
        seen["config"] = config
        raise ImportError("stopped by the test before anything is measured")

    monkeypatch.setattr(tune_cli, "Measurer", measurer)
    main(["tune", "--workload", "matmul", "--param", "M=16", "--param", "N=16", "--param", "K=16", "--trials", "1",
          "--target", target, "--backend", "local", "--db", str(tmp_path / "t.db"), "--cold-cache", "-q"])
    cfg = seen["config"]
    assert cfg.flush_cache
    assert (cfg.number, cfg.min_repeat_ms) == ((1, 10.0) if target == "cuda" else (1, 0.0))



@needs_cc
def test_tune_model_for_cuda_fails_when_every_candidate_of_every_task_fails(driver, tmp_path, capsys):
    """The stand-in runs no kernel, so every output is wrong, and each task's reference (its untransformed
    schedule, built for the CPU) says so: `tune --model` ends with exit 1 and one line that says why, not a
    summary of nothing with exit 0."""
    w = np.random.default_rng(0).standard_normal((8, 4, 3, 3)).astype("float32")
    path = tmp_path / "conv.onnx"
    onnx.save(make_single_op("Conv", [("x", (1, 4, 8, 8))], initializers={"w": w}, extra_inputs=["w"],
                             kernel_shape=[3, 3], pads=[1, 1, 1, 1]), str(path))
    rc = main(["tune", "--model", str(path), "--target", "cuda -arch=sm_80", "--trials", "8", "--backend", "local",
               "--db", str(tmp_path / "t.db"), "-q"])
    err = capsys.readouterr().err
    assert rc == 1, err
    last = err.splitlines()[-1]
    assert last.startswith("autosched tune: error: no candidate could be measured") and "wrong_result" in last, err
