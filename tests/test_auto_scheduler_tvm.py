"""TVM's auto_scheduler flows with ``tvm`` mapped onto autosched: the matmul tutorial (register_workload,
SearchTask, TuningOptions with RecordToFile, tune, apply_best, print_best) and the network tutorial
(extract_tasks, TaskScheduler, ApplyHistoryBest around relay.build), at a few trials each; the schedule code
print_best writes, run again, gives the same trace."""

import json

import numpy as np
import pytest

import autosched as tvm
from _onnx_models import make_resnet18
from autosched import auto_scheduler, relay, te
from autosched.contrib import graph_executor
from autosched.database import Database
from autosched.database.record import LogFormatError, TuningRecord
from autosched.te.trace_code import schedule_code


@auto_scheduler.register_workload
def matmul_add(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    C = te.placeholder((N, M), name="C", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul",
                        attrs={"layout_free_placeholders": [B]})
    out = te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")
    return [A, B, C, out]


def _tensor(sch, name: str):
    return next(st for st in sch.stages if st.name == name).op.output(0)


def _replay_code(task, code: str):
    """Run schedule code on a fresh schedule with each tensor in a variable of its name; the schedule."""
    sch, args = task.schedule()
    env = {"s": sch, "te": te, **{st.name: st.op.output(0) for st in sch.stages}}
    exec(code, env)  # noqa: S102 - the code under test
    return sch


def test_the_matmul_tutorial_tunes_applies_and_prints_the_best(tmp_path):
    N = L = M = 64
    target = tvm.target.Target("llvm")
    task = tvm.auto_scheduler.SearchTask(func=matmul_add, args=(N, L, M, "float32"), target=target)
    assert str(task.compute_dag) == ("A = PLACEHOLDER [64, 64]\nB = PLACEHOLDER [64, 64]\n"
                                     "C = PLACEHOLDER [64, 64]\nmatmul(i, j) += A[i, k]*B[k, j]\n"
                                     "out(i, j) = matmul[i, j] + C[i, j]\n")
    log_file = str(tmp_path / "matmul.json")
    tune_option = auto_scheduler.TuningOptions(num_measure_trials=8, num_measures_per_round=8, verbose=2,
                                               measure_callbacks=[auto_scheduler.RecordToFile(log_file)])
    task.tune(tune_option)
    lines = [json.loads(x) for x in open(log_file)]
    assert len(lines) >= 8 and all(x["workload"]["name"] == "matmul_add" for x in lines)

    sch, args = task.apply_best(log_file)
    func = tvm.build(sch, args, target)
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(size=(64, 64)).astype("float32") for _ in range(3))
    out = tvm.nd.empty((64, 64), device=tvm.cpu())
    func(tvm.nd.array(a), tvm.nd.array(b), tvm.nd.array(c), out)
    np.testing.assert_allclose(out.numpy(), a @ b + c, rtol=1e-3)

    code = task.print_best(log_file)
    assert code.startswith("# s = te.create_schedule(out.op)") and "s[out]" in code
    assert _replay_code(task, code).trace == sch.trace  # the printed code makes the best schedule

    # a second run resumes from the log: its records are known, only new candidates are measured
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=4, num_measures_per_round=4,
                                           measure_callbacks=[auto_scheduler.RecordToFile(log_file)]))
    again = [json.loads(x) for x in open(log_file)]
    distinct = lambda recs: {json.dumps(x["trace"]) for x in recs}  # noqa: E731
    assert len(distinct(again)) == len(distinct(lines)) + 4  # 4 new schedules (the best few are timed again)

    # the tutorial's resume_search: a SketchPolicy with an XGBModel updated from the log, preloading it
    cost_model = auto_scheduler.XGBModel()
    cost_model.update_from_file(log_file)
    policy = auto_scheduler.SketchPolicy(task, cost_model,
                                         init_search_callbacks=[auto_scheduler.PreloadMeasuredStates(log_file)])
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=4, num_measures_per_round=4,
                                           measure_callbacks=[auto_scheduler.RecordToFile(log_file)]),
              search_policy=policy)
    assert len(distinct([json.loads(x) for x in open(log_file)])) == len(distinct(again)) + 4
    elsewhere = str(tmp_path / "other.json")
    with pytest.raises(ValueError, match="autosched resumes from the log it writes"):
        task.tune(auto_scheduler.TuningOptions(num_measure_trials=4,
                                               measure_callbacks=[auto_scheduler.RecordToFile(elsewhere)]),
                  search_policy=policy)
    with pytest.raises(TypeError, match="XGBModel or a RandomModel"):
        auto_scheduler.SketchPolicy(task, "xgb")
    with pytest.raises(FileNotFoundError, match="no tuning log"):
        auto_scheduler.XGBModel().update_from_file(elsewhere)


def test_schedule_code_covers_caches_compute_at_fuse_rfactor_and_pragmas():
    task = auto_scheduler.SearchTask(func=matmul_add, args=(32, 32, 32, "float32"))
    sch, args = task.schedule()
    A, B, C, out = args
    matmul = _tensor(sch, "matmul")
    CL = sch.cache_write(matmul, "local")
    AA = sch.cache_read(A, "local", [CL])
    io, ii = sch[out].split(sch[out].op.axis[0], factor=8)
    sch[out].reorder(io, sch[out].op.axis[1], ii)
    f = sch[out].fuse(io, sch[out].op.axis[1])
    sch[out].parallel(f)
    sch[out].pragma(ii, "auto_unroll_max_step", 16)
    sch[CL].compute_at(sch[out], f)
    sch[AA].compute_at(sch[CL], sch[CL].op.reduce_axis[0])
    code = schedule_code(task, sch.trace)
    assert 'matmul_local = s.cache_write(matmul, "local")' in code
    assert 'A_local = s.cache_read(A, "local", [matmul_local])' in code
    assert _replay_code(task, code).trace == sch.trace

    sch2, args2 = task.schedule()
    mm = _tensor(sch2, "matmul")
    ko, ki = sch2[mm].split(sch2[mm].op.reduce_axis[0], factor=8)
    rf = sch2.rfactor(mm, ki)
    sch2[rf].vectorize(sch2[rf].op.axis[0])
    code2 = schedule_code(task, sch2.trace)
    assert "matmul_rf = s.rfactor(matmul, matmul_k_inner, factor_axis=0)" in code2
    assert _replay_code(task, code2).trace == sch2.trace


def test_the_network_tutorial_extracts_tunes_and_builds_with_the_log(tmp_path):
    model = make_resnet18(image=32, width=8, num_classes=10)
    mod, params = relay.frontend.from_onnx(model, {"data": (1, 3, 32, 32)})
    target = tvm.target.Target("llvm")
    tasks, task_weights = auto_scheduler.extract_tasks(mod["main"], params, target)
    assert len(tasks) == len(task_weights) > 5 and all(w >= 1 for w in task_weights) and sum(task_weights) > len(
        tasks)  # the identical residual blocks share tasks
    assert "conv2d_nchwc" in str(tasks[0].compute_dag) and tasks[0].workload_key
    log_file = str(tmp_path / "net.json")
    tuner = auto_scheduler.TaskScheduler(tasks, task_weights)
    tune_option = auto_scheduler.TuningOptions(
        num_measure_trials=8, num_measures_per_round=4,
        runner=auto_scheduler.LocalRunner(repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True),
        measure_callbacks=[auto_scheduler.RecordToFile(log_file)])
    tuner.tune(tune_option)
    with Database(log_file) as db:
        tuned = [t for t in tasks if db.best(t)]
    assert len(tuned) == 2  # two rounds of 4
    with auto_scheduler.ApplyHistoryBest(log_file):
        with tvm.transform.PassContext(opt_level=3, config={"relay.backend.use_auto_scheduler": True}):
            lib = relay.build(mod, target=target, params=params)
    assert sum(k["tuned"] for k in lib.kernels) == 2
    dev = tvm.device(str(target), 0)
    module = graph_executor.GraphModule(lib["default"](dev))
    x = np.random.default_rng(0).uniform(size=(1, 3, 32, 32)).astype("float32")
    module.set_input("data", tvm.nd.array(x))
    module.run()
    want = graph_executor.GraphModule(relay.build(mod, target=target, params=params)["default"](dev))
    want.run(data=x)
    np.testing.assert_allclose(module.get_output(0).numpy(), want.get_output(0), rtol=1e-4, atol=1e-5)


def test_what_autosched_does_not_take_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="must end in .jsonl or .json"):
        auto_scheduler.RecordToFile(tmp_path / "log.txt")
    with pytest.raises(ValueError, match="no RPC runner"):
        auto_scheduler.TuningOptions(runner="rpc")
    with pytest.raises(ValueError, match="one RecordToFile log per run"):
        auto_scheduler.TuningOptions(measure_callbacks=[auto_scheduler.RecordToFile(tmp_path / "a.json"),
                                                        auto_scheduler.RecordToFile(tmp_path / "b.json")])
    with pytest.raises(ValueError, match="give the workload function"):
        auto_scheduler.SearchTask(workload_key='["matmul_add", 64, 64, 64, "float32"]')
    task = auto_scheduler.SearchTask(func=matmul_add, args=(16, 16, 16, "float32"))
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(ValueError, match="has no record of task matmul_add"):
        task.print_best(tmp_path / "empty.json")
    # a TVM auto_scheduler log is recognised as such, not loaded
    tvm_line = {"i": [["[\"matmul_add\", 16, 16, 16, \"float32\"]", "llvm -keys=cpu", [], "", 1, []],
                      [[], [["SP", 2, 0, 16, [4], 1]]]], "r": [[1e-5], 0, 0.3, 1605490318], "v": "v0.6"}
    (tmp_path / "tvm.json").write_text(json.dumps(tvm_line) + "\n")
    with pytest.raises(LogFormatError, match="a TVM auto_scheduler record"):
        TuningRecord.from_json(tvm_line)


def test_a_log_not_written_yet_builds_with_default_schedules(tmp_path, caplog):
    """TVM's tune_network tutorials build under ApplyHistoryBest(log) with their tuning call commented out: the
    missing log applies nothing (TVM reads it as empty), a warning names it, and no file is created; autosched's
    own apply_history_best still refuses a path that does not exist (a mistyped database)."""
    x = relay.var("x", shape=(1, 8))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    log_file = tmp_path / "resnet-50-NHWC-B1-llvm.json"
    with caplog.at_level("WARNING", logger="autosched.auto_scheduler"):
        with auto_scheduler.ApplyHistoryBest(str(log_file)):
            lib = relay.build(mod, target="llvm")
    assert "no tuning log at" in caplog.text and str(log_file) in caplog.text and not log_file.exists()
    assert sum(k["tuned"] for k in lib.kernels) == 0
    with pytest.raises(FileNotFoundError, match="no tuning log"):
        tvm.apply_history_best(str(log_file))
