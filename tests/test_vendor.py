"""The vendor reference that ``autosched tune`` closes with: each built-in workload's ONNX form computes what
the workload computes (so the comparison is with the same arithmetic), and a figure comes back timed."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from autosched import Task
from autosched.measure.alternating import alternating_medians
from autosched.measure.data import make_inputs, numpy_reference
from autosched.search import vendor
from autosched.search.vendor import onnx_graph, vendor_figures, vendor_reference

ort = pytest.importorskip("onnxruntime")

SMALL = [
    ("matmul", dict(M=24, N=40, K=32)),
    ("batch_matmul", dict(B=3, M=8, N=16, K=12)),
    ("dense", dict(N=2, CI=32, CO=24, bias=True, relu=True)),
    ("dense", dict(N=2, CI=32, CO=24, bias=False, relu=False)),
    ("conv2d", dict(N=1, H=9, W=11, CI=4, CO=6, KH=3, KW=3, stride=1, padding=1)),
    ("conv2d", dict(N=1, H=9, W=11, CI=4, CO=6, KH=3, KW=3, stride=2, padding=1, layout="NHWC")),
    ("depthwise_conv2d", dict(N=1, C=5, H=10, W=10, KH=3, KW=3, stride=2, padding=1)),
    ("pool2d", dict(N=1, C=3, H=9, W=9, pool_type="max")),
    ("pool2d", dict(N=1, C=3, H=9, W=9, pool_type="avg")),
    ("softmax", dict(M=4, N=33)),
    ("elementwise", dict(N=1, C=2, H=3, W=5, op="sigmoid_mul")),
    ("elementwise", dict(N=1, C=2, H=3, W=5, op="add_relu")),
]


@pytest.mark.parametrize(("name", "params"), SMALL, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SMALL)])
def test_each_onnx_form_computes_the_workload(name, params):
    task = Task(name, params, target="llvm")
    inputs = make_inputs(task, seed=0)[:-1]
    model, feeds = onnx_graph(task, inputs)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    (got,) = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    want = numpy_reference(task, inputs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_reference_is_the_fastest_installed_library_timed_now():
    task = Task("matmul", dict(M=64, N=64, K=64), target="llvm")
    ref = vendor_reference(task, threads=1, budget=0.05, pause=0.0)
    assert ref is not None and ref.library.split()[0] in ("onnxruntime", "numpy")
    assert 0 < ref.seconds < 0.1 and ref.gflops == pytest.approx(task.flop / ref.seconds / 1e9)


def test_every_installed_library_is_listed_with_its_own_figure():
    # numpy's BLAS is timed without threadpoolctl only at its own default thread count: one per CPU
    task = Task("matmul", dict(M=48, N=32, K=16), target="llvm")
    figures = vendor_figures(task, threads=os.cpu_count(), budget=0.02, pause=0.0)
    assert [f.library.split()[0] for f in figures] == ["onnxruntime", "numpy"]
    for f in figures:
        assert f.seconds > 0 and f.gflops == pytest.approx(task.flop / f.seconds / 1e9)
    # a workload only onnxruntime expresses lists it alone
    conv = Task("depthwise_conv2d", dict(N=1, C=4, H=6, W=6, KH=3, KW=3, stride=1, padding=1), target="llvm")
    assert [f.library.split()[0] for f in vendor_figures(conv, threads=1, budget=0.02, pause=0.0)] == ["onnxruntime"]


def test_a_workload_no_library_expresses_has_no_reference():
    task = Task("matmul", dict(M=8, N=8, K=8, dtype="float64"), target="llvm")
    assert vendor_reference(task, threads=1, budget=0.01) is None and vendor_figures(task, 1, 0.01) == []


def test_the_libraries_alternate_in_rounds_with_a_pause_before_each_block(monkeypatch):
    # fake timer and sleep: which library each block times, the pauses, and that each keeps its best block
    log: list[tuple] = []
    order: list = []  # the libraries' functions, in the order of their first block
    blocks = [[3e-3, 1e-3, 2e-3], [5e-3, 6e-3, 4e-3]]  # per library (in set-up order), per round

    def timer(fn, seconds):
        if fn not in order:
            order.append(fn)
        k = order.index(fn)
        n = sum(1 for e in log if e[:2] == ("time", k))
        log.append(("time", k, seconds))
        return blocks[k][n]

    monkeypatch.setattr(vendor, "median_time", timer)
    monkeypatch.setattr(vendor, "alternating_medians",
                        functools.partial(alternating_medians, sleep=lambda s: log.append(("sleep", s))))
    task = Task("matmul", dict(M=48, N=32, K=16), target="llvm")
    figures = vendor_figures(task, threads=os.cpu_count(), budget=0.375, pause=0.25)
    assert vendor.ROUNDS == 3
    assert log == [e for k in (0, 1, 1, 0, 0, 1) for e in (("sleep", 0.25), ("time", k, 0.125))]
    assert [(f.library.split()[0], f.seconds) for f in figures] == [("onnxruntime", 1e-3), ("numpy", 4e-3)]
