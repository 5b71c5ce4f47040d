"""Every fallback says so: each test provokes one and checks its WARNING, its flag or its error.

A build that does not do what its schedule says (codegen), a result that was not checked (measure), a cost
model that ranks at random after records exist, kernels on default schedules (relay.build), and ONNX shape
inference that fails.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.codegen import llvm as cg_llvm
from autosched.measure import MeasureInput, MeasureResult, RunConfig, measure
from autosched.measure.result import ResultFlag


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Each fallback warns once per process: forget which ones this process has said."""
    monkeypatch.setattr(cg_llvm, "_warned", set())


def _scale(n: int = 32, m: int = 32):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B


def _run(mod, A_shape):
    a = np.random.default_rng(0).standard_normal(A_shape).astype("float32")
    b = np.zeros_like(a)
    mod(a, b)
    np.testing.assert_allclose(b, 2 * a)


def _warnings(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == logger]


def test_a_vectorized_loop_that_cannot_vectorise_warns_once_and_is_flagged(fresh_warnings, caplog):
    A, B = _scale()
    sch = te.create_schedule(B.op)
    i, j = B.op.axis
    sch[B].vectorize(i)  # the outer loop: its body holds the loop j
    with caplog.at_level(logging.WARNING, logger="autosched.codegen"):
        mod = autosched.build(sch, [A, B])
        autosched.build(sch, [A, B], name="again")
    _run(mod, (32, 32))
    assert mod.unhonoured == [ResultFlag.SCALAR]
    (msg,) = _warnings(caplog, "autosched.codegen")
    assert "vectorized loop 'i' compiles as a scalar loop: its body holds the loop 'j'" in msg
    assert "vectorize an innermost loop" in msg and "'scalar'" in msg


def test_unrolling_past_the_limit_warns_and_is_flagged(fresh_warnings, caplog):
    A, B = _scale()
    sch = te.create_schedule(B.op)
    i, j = B.op.axis
    sch[B].unroll(i)
    sch[B].unroll(j)  # 32 x 32 copies: over UNROLL_LIMIT
    with caplog.at_level(logging.WARNING, logger="autosched.codegen"):
        mod = autosched.build(sch, [A, B])
    _run(mod, (32, 32))
    assert mod.unhonoured == [ResultFlag.NOT_UNROLLED]
    (msg,) = _warnings(caplog, "autosched.codegen")
    assert f"would make 1024 copies of its body, over the limit of {cg_llvm.UNROLL_LIMIT}" in msg
    # within the limit: honoured, nothing said
    caplog.clear()
    sch = te.create_schedule(B.op)
    sch[B].unroll(B.op.axis[1])
    assert autosched.build(sch, [A, B], name="within").unhonoured == []
    assert not _warnings(caplog, "autosched.codegen")


def test_a_function_unrolls_into_a_bounded_size_in_all(fresh_warnings, caplog):
    """Each nest within UNROLL_LIMIT, but together past EMIT_BUDGET: the nests past it stay loops (LLVM's
    compile time grows faster than the code), flagged and said once; the results are right either way."""
    n_stages, extent = 12, 256  # 12 x 256 = 3,072 stores if every nest were unrolled
    A = te.placeholder((extent,), name="A")
    t = A
    for k in range(n_stages):
        t = te.compute((extent,), lambda i, prev=t: prev[i] * 2.0, name=f"s{k}")
    sch = te.create_schedule(t.op)
    for st in sch.stages:
        if not st.is_placeholder:
            st.unroll(st.op.axis[0])
    with caplog.at_level(logging.WARNING, logger="autosched.codegen"):
        mod = autosched.build(sch, [A, t], name="chain")
    a = np.random.default_rng(0).standard_normal(extent).astype("float32")
    out = np.zeros_like(a)
    mod(a, out)
    np.testing.assert_allclose(out, a * 2.0 ** n_stages, rtol=1e-6)
    assert mod.unhonoured == [ResultFlag.NOT_UNROLLED]
    (msg,) = _warnings(caplog, "autosched.codegen")
    assert f"over what is left of the function's budget of {cg_llvm.EMIT_BUDGET}" in msg
    ir_text = mod.get_source("ll-unopt")
    stores = ir_text.count("store float")
    assert cg_llvm.EMIT_BUDGET // 2 <= stores <= cg_llvm.EMIT_BUDGET + n_stages, stores  # unrolled up to it


def test_parallel_loops_without_libgomp_warn_and_are_flagged(fresh_warnings, monkeypatch, caplog):
    # the state a host without libgomp leaves behind (found once per process)
    monkeypatch.setattr(cg_llvm, "_gomp_state", {"ok": False, "path": None,
                                                 "why": "libgomp (GNU OpenMP) was not found"})
    A, B = _scale()
    sch = te.create_schedule(B.op)
    sch[B].parallel(B.op.axis[0])
    with caplog.at_level(logging.WARNING, logger="autosched.codegen"):
        mod = autosched.build(sch, [A, B], name="serial_par")
    _run(mod, (32, 32))
    assert mod.unhonoured == [ResultFlag.SERIAL]
    assert "GOMP_parallel" not in mod.get_source("ll-unopt")
    (msg,) = _warnings(caplog, "autosched.codegen")
    assert "parallel loop 'i' compiles serial: libgomp (GNU OpenMP) was not found" in msg and "apt install" in msg


def test_codegen_flags_are_result_flags():
    assert set(cg_llvm.UNHONOURED) <= set(ResultFlag.ALL)


# -- measurement: the flags reach the result, the database and `db best` --

def _vectorize_outer_trace(task):
    sch, (A, B, C) = task.schedule()
    sch[C].vectorize(C.op.axis[0])
    return sch.trace


def test_measured_results_carry_build_flags_and_unchecked(tmp_path, capsys):
    import _measure_workloads  # noqa: F401 - registers measure_noref (no numpy reference)
    from autosched.cli import main
    from autosched.database.database import open_database

    task = autosched.Task("matmul", args={"M": 16, "N": 16, "K": 16})
    noref = autosched.Task("measure_noref")
    cfg = RunConfig(number=1, repeat=2, timeout=2.0, num_threads=1, reference_timeout=10.0)
    scalar, plain = measure([MeasureInput(task, _vectorize_outer_trace(task)),
                             MeasureInput(task, task.default_trace())], backend="local", config=cfg)
    assert scalar.ok and scalar.flags == [ResultFlag.SCALAR]
    assert plain.ok and plain.flags == []
    # no reference in time (the untransformed kernel runs in a process that cannot start in a microsecond)
    (unchecked,) = measure([MeasureInput(noref, noref.default_trace())], backend="local",
                           config=cfg.replace(reference_timeout=1e-6))
    assert unchecked.ok and unchecked.flags == [ResultFlag.UNCHECKED]
    db_path = tmp_path / "f.db"
    db, _ = open_database(str(db_path))
    try:
        db.commit(noref, noref.default_trace(), unchecked)
        assert db.best(noref)[0].flags == [ResultFlag.UNCHECKED]
    finally:
        db.close()
    assert main(["db", "--db", str(db_path), "best", "--workload", "measure_noref", "--param", "n=32",
                 "--param", "m=24"]) == 0
    # (a record whose two repeats of a sub-microsecond kernel disagree is also marked noisy: "[unchecked, noisy]")
    assert re.search(r"\[unchecked(, noisy)?\]", capsys.readouterr().out)


# -- the cost model --

def test_a_cost_model_that_cannot_train_after_records_says_so(caplog):
    from autosched.cost_model.model import XGBCostModel

    task = autosched.Task("matmul", args={"M": 16, "N": 16, "K": 16})
    cands = [MeasureInput(task, task.default_trace()), MeasureInput(task, _vectorize_outer_trace(task))]
    model = XGBCostModel(seed=0)
    with caplog.at_level(logging.WARNING, logger="autosched.cost_model"):
        model.predict(cands)  # before any record: random, and rightly silent
        assert not caplog.records
        model.update(cands, [MeasureResult(error_kind="compile_error")] * 2)
        scores = model.predict(cands)
        model.predict(cands)
    assert not model.trained and scores.shape == (2,)
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "2 records but is not trained (none of the 2 measured candidates has a time" in msg


# -- relay.build and ONNX import --

def test_relay_build_ends_with_one_line_saying_how_many_kernels_were_tuned(caplog):
    from autosched import relay

    x = relay.var("x", shape=(1, 8), dtype="float32")
    w = relay.var("w", shape=(4, 8), dtype="float32")
    f = relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w)))
    params = {"w": np.ones((4, 8), "float32")}
    with caplog.at_level(logging.INFO, logger="autosched.relay"):
        res = relay.build(f, "llvm", params=params)
    last = caplog.records[-1]
    assert last.name == "autosched.relay.summary" and last.levelno == logging.WARNING
    assert last.getMessage() == res.summary
    assert res.summary.startswith(f"relay.build: {len(res.kernels)} kernels, 0 tuned (from records), "
                                  f"{len(res.kernels)} with default schedules; no tuning records given")


def test_onnx_shape_inference_failure_is_a_warning_with_the_reason(caplog):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from autosched.relay.frontend import from_onnx

    graph = helper.make_graph([helper.make_node("Relu", ["a"], ["b"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    # no opset import for the default domain: ONNX cannot infer shapes; the importer is told the opset
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("x.y", 1)])
    with caplog.at_level(logging.WARNING, logger="autosched.relay"):
        mod, _ = from_onnx(model, opset=13)
    assert "nn.relu" in str(mod)
    (msg,) = _warnings(caplog, "autosched.relay")
    assert "ONNX shape inference failed" in msg and "No opset import for domain" in msg
