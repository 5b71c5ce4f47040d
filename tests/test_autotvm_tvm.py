"""TVM's AutoTVM tutorials with ``tvm`` mapped onto autosched: autotvm_matmul_x86 (a template with knobs and
with splits, its task and config space, RandomTuner and XGBTuner with log_to_file, the template called under
apply_history_best gives the best schedule) and autotvm_relay_x86's tuning part (extract_from_program, XGBTuner
with a progress bar, relay.build under apply_history_best), at a few trials each."""

import io
import json

import numpy as np
import pytest

import autosched as tvm
from _onnx_models import make_resnet18
from autosched import autotvm, relay, te
from autosched.autotvm.task.space import FallbackConfigEntity
from autosched.autotvm.tuner import GridSearchTuner, RandomTuner, XGBTuner
from autosched.contrib import graph_executor
from autosched.database import Database


def _matmul(N, L, M, dtype):
    """The tutorial's computation and its untransformed schedule: (s, [A, B, C], (y, x, k))."""
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    return s, [A, B, C], (*s[C].op.axis, s[C].op.reduce_axis[0])


@autotvm.template("tutorial/matmul_v1")
def matmul_v1(N, L, M, dtype):
    s, (A, B, C), (y, x, k) = _matmul(N, L, M, dtype)
    cfg = autotvm.get_config()
    cfg.define_knob("tile_y", [1, 2, 4, 8, 16])
    cfg.define_knob("tile_x", [1, 2, 4, 8, 16])
    yo, yi = s[C].split(y, cfg["tile_y"].val)
    xo, xi = s[C].split(x, cfg["tile_x"].val)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


@autotvm.template("tutorial/matmul")
def matmul(N, L, M, dtype):
    s, (A, B, C), (y, x, k) = _matmul(N, L, M, dtype)
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


def _check(func, n: int) -> None:
    a, b = (np.random.default_rng(k).uniform(size=(n, n)).astype("float32") for k in (0, 1))
    c = tvm.nd.empty((n, n))
    func(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(a @ b, c.numpy(), rtol=1e-4)


@pytest.mark.parametrize("template, tuner_cls", [("tutorial/matmul_v1", GridSearchTuner),
                                                  ("tutorial/matmul", RandomTuner),
                                                  ("tutorial/matmul", XGBTuner)])
def test_the_matmul_tutorial_tunes_a_template_and_builds_its_best(template, tuner_cls, tmp_path):
    N = 64
    task = autotvm.task.create(template, args=(N, N, N, "float32"), target="llvm")
    space = task.config_space
    assert len(space) == (25 if template.endswith("v1") else 49)  # 5 x 5 tiles; 7 x 7 factor pairs of 64
    log = str(tmp_path / "matmul.log")
    measure_option = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=5))
    tuner = tuner_cls(task)
    tuner.tune(n_trial=8, measure_option=measure_option, callbacks=[autotvm.callback.log_to_file(log)])
    records = [json.loads(x) for x in open(log)]
    assert len({json.dumps(r["trace"]) for r in records}) == 8 and all(r["workload"]["name"] == template
                                                                      for r in records)
    with Database(log) as db:
        best = db.best(task, k=1)[0]
    fn = matmul_v1 if template.endswith("v1") else matmul
    with autotvm.apply_history_best(log):
        with tvm.target.Target("llvm"):
            s, arg_bufs = fn(N, N, N, "float32")
            func = tvm.build(s, arg_bufs)
    assert s.trace == best.trace  # the template called under the log: the log's best schedule
    _check(func, N)
    s, arg_bufs = fn(N, N, N, "float32")  # outside: the fallback (inner loops of 1: the axis whole outside)
    assert s.trace.to_json()[:2] == [["split", 2, 0, 1, None], ["split", 2, 2, 1, None]]
    _check(tvm.build(s, arg_bufs), N)


def test_the_relay_tutorial_tunes_a_models_tasks_with_a_progress_bar(tmp_path):
    model = make_resnet18(image=32, width=8, num_classes=10)
    mod, params = relay.frontend.from_onnx(model, {"data": (1, 3, 32, 32)})
    target = "llvm"
    tasks = autotvm.task.extract_from_program(mod["main"], target=target, params=params)
    assert len(tasks) > 5 and all(t.weight >= 1 for t in tasks)
    log = str(tmp_path / "resnet-autotuning.json")
    out = io.StringIO()
    for i, task in enumerate(tasks[:2]):
        prefix = f"[Task {i + 1:2d}/{len(tasks):2d}] "
        assert len(task.config_space) > 8  # a fused kernel: the generated space's estimated size
        tuner_obj = XGBTuner(task, loss_type="rank")
        tuner_obj.tune(n_trial=min(4, len(task.config_space)), early_stopping=100,
                       measure_option=autotvm.measure_option(builder=autotvm.LocalBuilder(build_func="default"),
                                                             runner=autotvm.LocalRunner(number=2, repeat=1)),
                       callbacks=[autotvm.callback.progress_bar(4, prefix=prefix, stream=out),
                                  autotvm.callback.log_to_file(log)])
    assert "[Task  1/" in out.getvalue() and "Progress: (4/4)" in out.getvalue()
    with autotvm.apply_history_best(log):
        with tvm.transform.PassContext(opt_level=3, config={}):
            lib = relay.build(mod, target=target, params=params)
    assert sum(k["tuned"] for k in lib.kernels) == 2
    with autotvm.tophub.context(target, extra_files=log):  # (as TVM's TOPI tests wrap builds)
        assert sum(k["tuned"] for k in relay.build(mod, target=target, params=params).kernels) == 2
    with autotvm.tophub.context(target):  # no pre-tuned records here: the defaults
        assert sum(k["tuned"] for k in relay.build(mod, target=target, params=params).kernels) == 0
    module = graph_executor.GraphModule(lib["default"](tvm.device(str(target), 0)))
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype("float32")
    module.set_input("data", x)
    module.run()
    want = graph_executor.GraphModule(relay.build(mod, target=target, params=params)["default"](tvm.cpu(0)))
    want.run(data=x)
    np.testing.assert_allclose(module.get_output(0).numpy(), want.get_output(0), rtol=1e-4, atol=1e-5)


def test_what_autotvm_names_autosched_does_not_take_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no RPC runner"):
        autotvm.measure_option(builder="local", runner="rpc")
    with pytest.raises(ValueError, match="must end in .jsonl, .json, .log"):
        autotvm.callback.log_to_file(tmp_path / "x.txt")
    with pytest.raises(ValueError, match="build_func 'ndk'"):
        autotvm.LocalBuilder(build_func="ndk")

    @autotvm.template("tutorial/bad")
    def bad(n):
        A = te.placeholder((n,), name="A")
        return te.create_schedule(te.compute((n,), lambda i: A[i] * 2, name="B").op)

    with pytest.raises(TypeError, match=r"must return \(schedule, \[tensors\]\)"):
        bad(8)


def test_a_fallback_context_hands_out_the_configurations_of_templates_called_without_records():
    """TVM's ``autotvm.FallbackContext`` (TOPI's tests subclass it) and ``task.space.FallbackConfigEntity``: under
    the context a template called with no record takes the context's configuration of its workload, one per
    (target, workload), so a knob the caller fixed is the one the schedule uses."""
    class Fixed(autotvm.FallbackContext):
        def _query_inside(self, target, workload):
            key = (str(target), workload)
            if key not in self.memory:
                cfg = FallbackConfigEntity()
                cfg.define_knob("tile_y", [8])  # the caller's choice, before the template defines its knobs
                cfg.define_knob("tile_x", [4])
                self.memory[key] = cfg
            return self.memory[key]

    with tvm.target.Target("llvm"), Fixed() as ctx:
        s, args = matmul_v1(32, 32, 32, "float32")
        assert list(ctx.memory) == [("llvm", ("tutorial/matmul_v1", 32, 32, 32, "float32"))]
        cfg = next(iter(ctx.memory.values()))
        assert cfg.is_fallback and (cfg["tile_y"].val, cfg["tile_x"].val) == (8, 4)
        code = str(tvm.lower(s, args, simple_mode=True))
        assert "for (i.inner, 0, 8)" in code and "for (j.inner, 0, 4)" in code, code
        _check(tvm.build(s, args, "llvm"), 32)
    s, args = matmul_v1(32, 32, 32, "float32")  # outside it: AutoTVM's fallback (the first candidates, 1)
    assert ".inner" not in str(tvm.lower(s, args, simple_mode=True))
