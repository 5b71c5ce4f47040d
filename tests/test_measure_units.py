"""Measurement pieces in this process: references, seeded inputs, worker classes, results, summaries."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import autosched
from _measure_workloads import INVALID, small_matmul, tiled_matmul_trace
from autosched import relay
from autosched.measure import (
    BuildResult,
    ErrorKind,
    MeasureInput,
    MeasureResult,
    RunConfig,
    make_inputs,
    prepare_task_data,
    reference_outputs,
    summarize_errors,
    tolerance,
)
from autosched.measure.data import NoReferenceError, numpy_reference
from autosched.measure.worker import BuildWorker, RunWorker, task_state, workload_shipment
from autosched.te import Trace

# one small instance of every built-in workload (and its variants), checked against its untransformed kernel
BUILTIN_CASES = [
    ("matmul", {"M": 24, "N": 40, "K": 56}),
    ("batch_matmul", {"B": 3, "M": 8, "N": 12, "K": 16}),
    ("dense", {"N": 3, "CI": 40, "CO": 24}),
    ("dense", {"N": 2, "CI": 16, "CO": 8, "bias": False, "relu": True}),
    ("dense", {"N": 2, "CI": 16, "CO": 8, "bias": True, "relu": True}),
    ("conv2d", {"H": 9, "W": 7, "CI": 5, "CO": 6}),
    ("conv2d", {"H": 10, "W": 9, "CI": 4, "CO": 3, "KH": 3, "KW": 2, "stride": 2, "padding": 2}),
    ("conv2d", {"H": 8, "W": 8, "CI": 4, "CO": 5, "layout": "NHWC", "stride": 2}),
    ("conv2d", {"H": 6, "W": 6, "CI": 3, "CO": 4, "KH": 1, "KW": 1, "padding": 0}),
    ("depthwise_conv2d", {"C": 6, "H": 9, "W": 8}),
    ("depthwise_conv2d", {"C": 4, "H": 11, "W": 11, "stride": 2, "padding": 0, "KH": 5, "KW": 5}),
    ("pool2d", {"C": 3, "H": 11, "W": 10}),
    ("pool2d", {"C": 3, "H": 9, "W": 12, "pool_type": "avg"}),
    ("pool2d", {"C": 2, "H": 8, "W": 8, "pool_type": "avg", "stride": 1, "padding": 2, "KH": 4, "KW": 4}),
    ("softmax", {"M": 5, "N": 33}),
    ("elementwise", {"C": 3, "H": 5, "W": 7, "op": "add"}),
    ("elementwise", {"C": 3, "H": 5, "W": 7, "op": "mul"}),
    ("elementwise", {"C": 3, "H": 5, "W": 7, "op": "add_relu"}),
    ("elementwise", {"C": 3, "H": 5, "W": 7, "op": "sigmoid_mul"}),
]


@pytest.mark.parametrize("name,args", BUILTIN_CASES,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(BUILTIN_CASES)])
def test_numpy_reference_matches_the_untransformed_kernel(name, args):
    task = autosched.Task(name, args=args)
    arrays = make_inputs(task, seed=3)
    ref = numpy_reference(task, arrays[:-1])
    assert ref is not None and ref.dtype == arrays[-1].dtype and ref.shape == arrays[-1].shape
    sch, targs = task.schedule()
    mod = autosched.build(sch, targs, target=task.target)
    out = arrays[-1]
    mod(*arrays[:-1], out)
    rtol, atol = tolerance(out.dtype)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


def test_every_builtin_workload_has_a_reference():
    from autosched.workloads import list_workloads
    from autosched.workloads.reference import get_reference

    builtins = [w.name for w in list_workloads() if w.func.__module__ == "autosched.workloads.builtin"]
    assert builtins and all(get_reference(n) is not None for n in builtins)


def test_seeded_inputs_are_reproducible_and_make_reductions_exact():
    task = small_matmul(96)
    a = make_inputs(task, seed=1)
    b = make_inputs(task, seed=1)
    c = make_inputs(task, seed=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    # multiples of 1/8 in [-1, 1], both signs and zero
    vals = np.unique(a[0])
    assert np.all(vals * 8 == np.round(vals * 8)) and vals.min() == -1 and vals.max() == 1 and 0 in vals
    # a float32 matmul in any summation order equals the float64 reference exactly
    ref = reference_outputs(task, a[:-1])
    assert np.array_equal((a[0] @ a[1]).astype(np.float32), ref)
    assert np.array_equal(np.einsum("ik,kj->ij", a[0][:, ::-1], a[1][::-1, :]), ref)


def test_tolerance_by_dtype():
    assert tolerance("float32") == (1e-4, 1e-5)
    assert tolerance("int32") == (0.0, 0.0)
    assert tolerance("float16")[0] > tolerance("float32")[0] > tolerance("float64")[0]


def test_reference_falls_back_to_the_untransformed_kernel_in_a_separate_process():
    import _measure_workloads  # noqa: F401 - registers measure_noref / measure_oob

    task = autosched.Task("measure_noref")
    arrays = make_inputs(task)
    ref = reference_outputs(task, arrays[:-1])
    np.testing.assert_allclose(ref, (arrays[0].astype(np.float64) ** 2).sum(axis=1), rtol=1e-6)
    with pytest.raises(NoReferenceError, match="crashed .*SIGSEGV"):
        reference_outputs(autosched.Task("measure_oob"), make_inputs(autosched.Task("measure_oob"))[:-1])


def test_a_gpu_task_without_a_numpy_reference_is_checked_against_its_cpu_build():
    """Untransformed, a GPU computation is no kernel (its padding would be computed for the whole grid before
    the convolution that reads it), so the reference of a cuda task is its untransformed schedule built for
    this CPU: a model's fused kernels tuned for a GPU are checked, not recorded as unchecked."""
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 6, 6])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    w = oh.make_tensor("w", onnx.TensorProto.FLOAT, [8, 4, 3, 3], np.linspace(-1, 1, 288).tolist())
    graph = oh.make_graph([oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                           oh.make_node("Relu", ["c"], ["y"])], "g", [x], [y], [w])
    mod, params = relay.frontend.from_onnx(oh.make_model(graph))
    (task,) = relay.extract_tasks(mod, params, target="cuda -arch=sm_80")
    data = prepare_task_data(task)
    assert data.reference is not None
    a, wt = (data.arrays[0].astype(np.float64), data.arrays[1].astype(np.float64))
    xp = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 8, 6, 6))
    for i in range(6):
        for j in range(6):
            want[0, :, i, j] = np.tensordot(wt, xp[0, :, i:i + 3, j:j + 3], axes=3)
    np.testing.assert_allclose(data.reference, np.maximum(want, 0), rtol=1e-6, atol=1e-6)


def test_summarize_errors_names_the_most_common_kinds_with_an_example():
    results = [MeasureResult(costs=[1e-3])] + [
        MeasureResult(error_kind=ErrorKind.COMPILE_ERROR, error_msg=f"bad {i}") for i in range(3)
    ] + [MeasureResult(error_kind=ErrorKind.RUNTIME_CRASH, error_msg="boom\n  at x")]
    s = summarize_errors(results)
    assert s.startswith("4 of 5 candidates failed: 3 x compile_error (e.g. 'bad 0'); 1 x runtime_crash")
    assert "'boom at x'" in s
    assert summarize_errors(results[:1]) == "all 1 candidates measured"


def test_results_stay_compatible():
    r = MeasureResult(costs=[3.0, 1.0, 2.0], build_seconds=0.5, run_seconds=0.25)
    assert r.ok and r.cost == 2.0 and r.spread == 1.0
    assert MeasureResult.from_json(r.to_json()).to_json() == r.to_json()
    b = BuildResult(error_kind=ErrorKind.BUILD_TIMEOUT, error_msg="slow", build_seconds=2.0)
    m = b.as_measure_result()
    assert not b.ok and not m.ok and m.error_kind == "build_timeout" and m.build_seconds == 2.0
    assert set(ErrorKind.BUILD) < set(ErrorKind.ALL)


def test_run_config_validates_and_gives_generous_deadlines():
    with pytest.raises(ValueError):
        RunConfig(repeat=0)
    with pytest.raises(ValueError):
        RunConfig(timeout=0)
    cfg = RunConfig(number=1, repeat=5, min_repeat_ms=10)
    assert cfg.deadline_after_warmup(1e-3) > 5 * 10e-3
    assert cfg.replace(repeat=2).repeat == 2


@pytest.fixture(scope="module")
def build_worker(tmp_path_factory):
    return BuildWorker(str(tmp_path_factory.mktemp("cache")))


def _build(worker: BuildWorker, inp: MeasureInput) -> BuildResult:
    return worker.build(workload_shipment(inp.task), task_state(inp.task), inp.trace.to_json())


def test_build_worker_caches_by_content_and_reports_invalid_traces(build_worker):
    task = small_matmul(32)
    first = _build(build_worker, MeasureInput(task, Trace()))
    again = _build(build_worker, MeasureInput(task, Trace()))
    # a different trace that gives the same loops (an identity reorder) is the same library
    same_ir = _build(build_worker, MeasureInput(task, Trace.from_json([["reorder", 2, [0, 1, 2]]])))
    other = _build(build_worker, MeasureInput(task, tiled_matmul_trace(task)))
    assert first.ok and not first.cached and first.build_seconds > 0
    assert again.cached and same_ir.cached
    assert again.artifact_path == first.artifact_path == same_ir.artifact_path
    assert other.ok and other.artifact_path != first.artifact_path
    bad = _build(build_worker, MeasureInput(task, INVALID))
    assert bad.error_kind == ErrorKind.INVALID_SCHEDULE and "input placeholder" in bad.error_msg


def test_run_worker_times_checks_and_flushes(build_worker):
    task = small_matmul(48)
    built = _build(build_worker, MeasureInput(task, tiled_matmul_trace(task)))
    data = prepare_task_data(task, num_threads=1)
    w = RunWorker()
    w.put_data(data)
    assert w.load(data.key, built.artifact_path) is None
    warm = w.warmup(1, None, True)
    assert isinstance(warm, float) and warm > 0
    costs = w.time(number=2, repeat=3, min_repeat_ms=1.0)
    assert len(costs) == 3 and all(c > 0 for c in costs)
    # cold-cache timing: the arguments are evicted before each repeat
    assert w.load(data.key, built.artifact_path) is None
    assert isinstance(w.warmup(1, None, True), float)
    assert len(w.time(number=1, repeat=2, min_repeat_ms=0, flush_cache=True)) == 2
    # the same kernel against a wrong reference is a wrong result, never a time
    bad = prepare_task_data(task, num_threads=1)
    bad.key, bad.reference = "wrong", bad.reference + 1
    w.put_data(bad)
    assert w.load("wrong", built.artifact_path) is None
    kind, msg = w.warmup(1, None, True)
    assert kind == ErrorKind.WRONG_RESULT and f"{48 * 48} of {48 * 48} outputs differ" in msg
    assert w.time() is None
    # a library that is not there
    kind, msg = w.load(data.key, "/nonexistent/x.so")
    assert kind == ErrorKind.COMPILE_ERROR
    w.cleanup()


def test_runner_buffers_are_aligned_copies():
    from autosched.measure.worker import aligned_copy

    for shape, dtype in (((3, 5), "float32"), ((7,), "int8"), ((2, 3, 4), "float64"), ((1,), "float32")):
        a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
        b = aligned_copy(a)
        assert b.ctypes.data % 64 == 0 and b.flags.c_contiguous and b.flags.writeable
        assert np.array_equal(a, b) and not np.shares_memory(a, b)


def test_libraries_link_with_ld_or_with_the_compiler_driver(tmp_path, monkeypatch):
    import subprocess

    from autosched.measure import worker

    task = small_matmul(32)
    built = []
    for cc in (None, "gcc"):  # ld directly (the fast path), then $CC as export_library links
        monkeypatch.setattr(worker, "_LD", {})
        if cc:
            monkeypatch.setenv("CC", cc)
        w = BuildWorker(str(tmp_path / (cc or "ld")))
        r = _build(w, MeasureInput(task, tiled_matmul_trace(task)))
        assert r.ok, r.error_msg
        built.append(r)
        mod = autosched.runtime.load_module(r.artifact_path)
        arrays = make_inputs(task)
        mod(*arrays)
        np.testing.assert_array_equal(arrays[-1], reference_outputs(task, arrays[:-1]))
    needed = subprocess.run(["readelf", "-d", built[0].artifact_path], capture_output=True, text=True).stdout
    assert "libm.so" in needed  # standalone: its libraries are recorded
