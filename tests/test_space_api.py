"""The space interface: reproducibility, JSON, mutation, crossover, sizes, recovery of foreign traces,
GPU templates, registration of templates and sketch rules, errors, the CLI and the doc page's examples."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.space import (
    GeneratedSpace,
    SketchRule,
    SpaceError,
    TemplateSpace,
    factorizations,
    make_space,
    point_from_json,
    point_to_json,
    register_sketch_rule,
    register_template,
    sketch_rules,
    unregister_sketch_rule,
)
from autosched.te import Trace
from autosched.workloads.reference import get_reference

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["template", "generated"]
SMALL = {
    "matmul": dict(M=32, N=32, K=16),
    "conv2d": dict(H=8, W=8, CI=4, CO=8),
    "softmax": dict(M=8, N=32),
    "dense": dict(N=2, CI=32, CO=24, relu=True),
}


def task(name):
    return autosched.Task(name, SMALL[name])


def lowers(t, trace):
    sch, args = t.apply(trace)
    return autosched.lower(sch, args)


# ------------------------------------------------------------------ reproducibility and JSON
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax"])
def test_same_seed_same_traces(name, kind):
    a = task(name).space(kind).sample(10, np.random.default_rng(11))
    b = make_space(task(name), kind).sample(10, np.random.default_rng(11))  # a fresh space, a fresh task
    assert [t.dumps() for t in a] == [t.dumps() for t in b]
    c = make_space(task(name), kind).sample(10, np.random.default_rng(12))
    assert [t.dumps() for t in a] != [t.dumps() for t in c]
    rng1, rng2 = np.random.default_rng(5), np.random.default_rng(5)
    sp = task(name).space(kind)
    assert sp.mutate(a[0], rng1) == sp.mutate(a[0], rng2)
    assert sp.crossover(a[0], a[1], rng1) == sp.crossover(a[0], a[1], rng2)


SUBPROCESS_CODE = """
import json, sys, numpy as np, autosched
out = []
for kind in ("template", "generated"):
    t = autosched.Task("conv2d", dict(H=8, W=8, CI=4, CO=8))
    out.append([tr.to_json() for tr in t.space(kind).sample(5, np.random.default_rng(3))])
print(json.dumps(out))
"""


@pytest.mark.subprocess
def test_same_seed_same_traces_across_processes():
    here = []
    for kind in KINDS:
        here.append([tr.to_json() for tr in task("conv2d").space(kind).sample(5, np.random.default_rng(3))])
    for hashseed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        res = subprocess.run([sys.executable, "-c", SUBPROCESS_CODE], capture_output=True, text=True, env=env,
                             cwd=ROOT, timeout=120)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == json.loads(json.dumps(here))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["matmul", "conv2d", "dense"])
def test_traces_round_trip_json(name, kind):
    t = task(name)
    space = t.space(kind)
    fresh = make_space(task(name), kind)  # knows none of these traces
    for trace in space.sample(6, np.random.default_rng(0)):
        text = json.dumps(trace.to_json())
        back = Trace.from_json(json.loads(text))
        assert back == trace and back.dumps() == trace.dumps()
        assert str(lowers(t, back)) == str(lowers(t, trace))
        assert t.apply(json.loads(text))[0].trace == trace  # Task.apply takes the JSON list too
        # a foreign trace is matched to its decisions; the decisions give the trace back
        point = fresh.point_of(back)
        assert fresh.trace_of(point) == trace
        assert point_from_json(json.dumps(point_to_json(point))) == point


def test_point_of_a_foreign_trace_is_fast():
    t = autosched.Task("conv2d")  # ResNet layer: big tile candidate lists
    traces = t.space("generated").sample(10, np.random.default_rng(1))
    fresh = make_space(autosched.Task("conv2d"), "generated")
    t0 = time.perf_counter()
    for tr in traces:
        assert fresh.trace_of(fresh.point_of(tr)) == tr
    assert (time.perf_counter() - t0) / len(traces) < 0.5


def test_trace_from_another_space_is_rejected():
    gen = task("matmul").space("generated").sample(1, np.random.default_rng(0))[0]
    with pytest.raises(SpaceError, match="not a point of this space"):
        make_space(task("matmul"), "template").point_of(gen)
    with pytest.raises(SpaceError):
        task("matmul").space("generated").point_of(task("conv2d").space("template").sample(
            1, np.random.default_rng(0))[0])


# -------------------------------------------------------------------- mutation, crossover
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax", "dense"])
def test_mutate_gives_a_different_legal_trace(name, kind):
    t = task(name)
    space = t.space(kind)
    rng = np.random.default_rng(21)
    traces = space.sample(6, rng)
    for tr in traces:
        child = space.mutate(tr, rng)
        assert child != tr
        lowers(t, child)
        before, after = space.point_of(tr), space.point_of(child)
        changed = [k for k in before if k in after and before[k] != after[k]]
        assert len(changed) >= 1
        mixed = space.crossover(tr, child, rng)
        lowers(t, mixed)
        pm = space.point_of(mixed)
        assert all(pm[k] in (before.get(k), after.get(k)) for k in pm if k in before and k in after)


def test_mutation_operators_cover_every_kind():
    """Tile sizes, unroll depth, parallel granularity and compute location all get mutated."""
    t = task("conv2d")
    space = t.space("generated")
    rng = np.random.default_rng(4)
    seen = set()
    traces = space.sample(10, rng)
    for _ in range(12):
        for tr in traces:
            before = space.point_of(tr)
            after = space.point_of(space.mutate(tr, rng))
            decisions = {d.name: d for d in space.decisions(tr)}
            for k in before:
                if k in after and before[k] != after[k]:
                    seen.add(decisions[k].kind)
    assert {"tile", "unroll", "parallel", "location"} <= seen


def test_tile_mutation_moves_one_factor():
    t = task("matmul")
    space = t.space("generated")
    rng = np.random.default_rng(9)
    moved = 0
    for tr in space.sample(10, rng):
        for _ in range(5):
            before = space.point_of(tr)
            after = space.point_of(space.mutate(tr, rng))
            for k, v in before.items():
                if k.startswith("tile/") and after.get(k) not in (None, v):
                    assert np.prod(after[k]) == np.prod(v)  # still a perfect tiling of the same extent
                    moved += 1
    assert moved > 0


# ---------------------------------------------------------------------------------- sizes
def test_template_size_is_exact():
    t = autosched.Task("softmax", dict(M=4, N=16))
    space = t.space("template")
    assert space.size() == np.prod([len(k) for k in space.knobs]) == len(space)
    every = list(space)
    assert len(set(every)) == space.size()
    assert sorted(space.sample(1000, np.random.default_rng(0)), key=Trace.dumps) == sorted(every, key=Trace.dumps)
    for i in (0, 3, space.size() - 1):
        assert space.index_of(space.point_at(i)) == i
        assert space.point_of(space.get(i)) == space.point_at(i)


@pytest.mark.parametrize("target", ["llvm -mcpu=sapphirerapids -num-cores=4", "llvm -mcpu=haswell -num-cores=8"])
def test_the_default_schedule_is_the_template_at_its_default_knobs(target):
    """One definition per CPU schedule: run with every knob at its default it is the workload's default (expert)
    schedule, and that configuration is a point of the workload's template."""
    from autosched.workloads.cpu import SCHEDULES
    from autosched.workloads.knobs import DefaultConfig

    assert {w for w, kind in autosched.space.list_templates() if kind == "llvm"} >= set(SCHEDULES)
    for name, fn in SCHEDULES.items():
        for args in ({}, SMALL.get(name, {})):
            task = autosched.Task(name, args, target=target)
            cfg, (sch, tensors) = DefaultConfig(), task.schedule()
            with task.target:
                fn(cfg, sch, tensors, **task.args)
            assert sch.trace.dumps() == task.default_trace().dumps(), name
            space = task.space("template")
            assert [k.name for k in space.knobs] == list(cfg.values), name
            assert space.trace_of(cfg.values).dumps() == task.default_trace().dumps(), name


def test_generated_size_is_a_sane_estimate():
    big = autosched.Task("conv2d").space("generated").size()
    small = task("conv2d").space("generated").size()
    assert big > small > 1000
    tiny = autosched.Task("elementwise", dict(C=2, H=2, W=4)).space("generated")
    distinct = tiny.sample(200, np.random.default_rng(0))
    assert 1 <= len(distinct) <= 4 * tiny.size()


def test_factorizations():
    assert factorizations(12, 2) == ((1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1))
    assert all(np.prod(c) == 56 for c in factorizations(56, 4))
    assert len(factorizations(56, 4)) == 80  # 56 = 2^3 * 7: C(3 + 3, 3) placements of the 2s, 4 of the 7
    assert all(c[1] <= 4 for c in factorizations(64, 2, 4))


def test_sampling_is_fast():
    for name in ("conv2d", "matmul"):
        space = make_space(autosched.Task(name), "generated")
        space.sample(2, np.random.default_rng(0))  # warm caches
        t0 = time.perf_counter()
        traces = space.sample(50, np.random.default_rng(1))
        per = (time.perf_counter() - t0) / len(traces)
        assert per < 0.02, f"{name}: {per * 1e3:.1f} ms per sample"


# ------------------------------------------------------------------------------ the GPU
@pytest.mark.parametrize("name,args", [("matmul", dict(M=32, N=32, K=16)),
                                       ("conv2d", dict(H=8, W=8, CI=4, CO=8)),
                                       ("conv2d", dict(H=8, W=8, CI=4, CO=8, layout="NHWC"))])
def test_gpu_templates_lower_and_llvm_rejects_them(name, args):
    gpu = autosched.Task(name, args, target="cuda")
    space = gpu.space("template")
    traces = space.sample(6, np.random.default_rng(0))
    cpu = autosched.Task(name, args)
    ins = [(np.random.default_rng(1).integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8).astype("float32")
           for t in cpu.tensors()[:-1]]
    want = get_reference(name)(ins, **cpu.args)
    for tr in traces:
        text = str(lowers(gpu, tr))
        assert "blockIdx.x" in text and "threadIdx.x" in text
        with pytest.raises(autosched.ScheduleError, match="bind"):
            autosched.build(*gpu.apply(tr), target="llvm")
        # without the bindings the same loops run serially on the CPU, and compute the right thing
        serial = Trace([s for s in tr if s.kind != "bind"])
        out = np.zeros(tuple(int(d) for d in cpu.tensors()[-1].shape), "float32")
        autosched.build(*cpu.apply(serial))(*ins, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_generated_space_for_cuda_binds_blocks_and_threads():
    traces = autosched.Task("matmul", dict(M=64, N=64, K=32), target="cuda").space("generated").sample(
        4, np.random.default_rng(0))
    assert traces and all({s.thread for s in t if s.kind == "bind"} >= {"blockIdx.x", "threadIdx.x"}
                          for t in traces)


# ---------------------------------------------------------------------- registration
@autosched.register_workload("test_space_axpy")
def axpy(N: int = 96, alpha: float = 2.0):
    x = te.placeholder((N,), name="x")
    y = te.placeholder((N,), name="y")
    return [x, y, te.compute((N,), lambda i: x[i] * alpha + y[i], name="axpy")]


@register_template("test_space_axpy", "llvm")
def axpy_llvm(cfg, sch, tensors, N, alpha):
    out = tensors[-1]
    cfg.define_split("tile", N, num_outputs=3, policy="power2", max_factor=16)
    cfg.define_annotate("ann", [None, None], policy="try_unroll_vec")
    cfg.define_reorder("order", [None, None], policy="identity")
    cfg.define_knob("parallel", [True, False])
    o, m, i = cfg["tile"].apply(sch, out, out.op.axis[0])
    if cfg["parallel"].val:
        sch[out].parallel(o)
    cfg["ann"].apply(sch, out, [m, i])


def test_user_template_with_every_knob_kind():
    t = autosched.Task("test_space_axpy")
    space = t.space("template")
    assert [k.kind for k in space.knobs] == ["split", "annotate", "reorder", "other"]
    assert space.size() == len(space.knobs[0]) * 6 * 1 * 2
    x, y = np.arange(96, dtype="float32"), np.ones(96, dtype="float32")
    for tr in space.sample(30, np.random.default_rng(0)):
        out = np.zeros(96, "float32")
        autosched.build(*t.apply(tr))(x, y, out)
        np.testing.assert_allclose(out, 2 * x + y)
        cfg = space.config(tr)
        assert cfg["tile"][0] * cfg["tile"][1] * cfg["tile"][2] >= 96  # power2: the outer part rounds up


def test_template_registration_errors():
    with pytest.raises(ValueError, match="already has a template"):
        register_template("test_space_axpy", "llvm")(lambda cfg, sch, tensors, **kw: None)

    @autosched.register_workload("test_space_fickle")
    def fickle(N: int = 8):
        x = te.placeholder((N,), name="x")
        return [x, te.compute((N,), lambda i: x[i] + 1.0, name="y")]

    @register_template("test_space_fickle", "llvm")
    def fickle_llvm(cfg, sch, tensors, N):
        cfg.define_knob("a", [0, 1])
        if cfg["a"].val:
            cfg.define_knob("b", [0, 1])  # declared only for some configurations

    t = autosched.Task("test_space_fickle")
    with pytest.raises(SpaceError, match="declare every knob"):
        t.space("template").sample(4, np.random.default_rng(0))
    with pytest.raises(SpaceError, match="no template"):
        autosched.Task("softmax", target="cuda").space("template")
    with pytest.raises(ValueError, match="unknown space kind"):
        make_space(t, "random")


class ExplodingRule(SketchRule):
    name = "exploding"

    def condition(self, ctx, stage):
        return stage.is_output

    def apply(self, ctx, stage):
        stage.vectorize(stage.op.axis[0])
        stage.parallel(stage.op.axis[0])  # already vectorized: ScheduleError


def test_failing_rule_ends_with_a_clear_error():
    space = GeneratedSpace(task("softmax"), rules=[ExplodingRule()])
    t0 = time.perf_counter()
    with pytest.raises(SpaceError, match="sketch rule 'exploding' on stage 'softmax'.*already marked"):
        space.sample(5, np.random.default_rng(0))
    assert time.perf_counter() - t0 < 10


class Chunked(SketchRule):
    """Elementwise outputs: all axes fused, chunks of a sampled size in parallel."""

    name = "test_chunked"

    def condition(self, ctx, stage):
        return stage.is_output and not stage.is_reduction

    def apply(self, ctx, stage):
        fused = stage.fuse(*stage.op.axis)
        outer, inner = stage.split(fused, factor=ctx.decide(f"chunk/{ctx.key(stage)}", (8, 32), kind="tile"))
        stage.parallel(outer)
        stage.vectorize(inner)


def test_registered_sketch_rule_is_used():
    register_sketch_rule(Chunked(), before="default")
    try:
        assert [r.name for r in sketch_rules()].index("test_chunked") == len(sketch_rules()) - 2
        with pytest.raises(ValueError, match="already registered"):
            register_sketch_rule(Chunked())
        t = autosched.Task("elementwise", dict(C=2, H=4, W=8))
        space = make_space(t, "generated")
        traces = space.sample(5, np.random.default_rng(0))
        assert {space.point_of(tr)["chunk/add_relu"] for tr in traces} == {8, 32}
        a, b = (np.arange(64, dtype="float32").reshape(1, 2, 4, 8) - 30 for _ in range(2))
        for tr in traces:
            out = np.zeros_like(a)
            autosched.build(*t.apply(tr))(a, b, out)
            np.testing.assert_allclose(out, np.maximum(a + b, 0))
    finally:
        unregister_sketch_rule("test_chunked")
    assert "test_chunked" not in [r.name for r in sketch_rules()]


def test_validate_lower_option():
    space = task("conv2d").space("generated", validate="lower")
    assert isinstance(space, GeneratedSpace) and space is not task("conv2d").space("generated")
    assert len(space.sample(3, np.random.default_rng(0))) == 3
    assert isinstance(task("conv2d").space("template"), TemplateSpace)


# ------------------------------------------------------------------------------------ CLI
def test_cli_lists_builtin_workloads_with_defaults(capsys):
    from autosched.cli import main

    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for line in ("matmul(M=1024, N=1024, K=1024, dtype='float32')",
                 "conv2d(N=1, H=56, W=56, CI=64, CO=64, KH=3, KW=3, stride=1, padding=1, layout='NCHW', "
                 "dtype='float32')"):
        assert line in out
    for name in ("batch_matmul(", "dense(", "depthwise_conv2d(", "pool2d(", "softmax(", "elementwise("):
        assert name in out
    assert main(["workloads", "matmul", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["params"][0] == {"name": "M", "default": 1024, "required": False}
    assert "llvm" in data["templates"] and "cuda" in data["templates"]


def test_cli_errors_exit_2(capsys):
    from autosched.cli import main

    assert main(["workloads", "no_such_workload"]) == 2
    assert "unknown workload 'no_such_workload'" in capsys.readouterr().err
    assert main(["workloads", "--no-such-flag"]) == 2  # one line, as every usage error (issue 40)
    err = capsys.readouterr().err
    assert "unrecognized arguments: --no-such-flag" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------ the doc page
def test_doc_examples_run(capsys):
    text = (ROOT / "docs" / "spaces.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    ns: dict = {}
    try:
        for b in blocks:
            exec(compile(b, "docs/spaces.md", "exec"), ns)
    finally:
        unregister_sketch_rule("fuse_elementwise_output")
    out = capsys.readouterr().out
    assert "chunk/add_relu" in out


def _accumulator_vectors(space, trace, lanes):
    """Vectors the register block of a matmul sample holds: rows x vectors per row of the innermost tiles."""
    point = space.point_of(trace)
    rows = point[next(k for k in point if k.startswith("tile/") and k.endswith("/s0"))][-1]
    cols = point[next(k for k in point if k.startswith("tile/") and k.endswith("/s1"))][-1]
    return rows * -(-cols // lanes)


@pytest.mark.parametrize("cpu,lanes", [("haswell", 8), ("skylake-avx512", 16)])
@pytest.mark.parametrize("cores", [2, 16])
def test_samples_keep_the_cores_busy_and_fill_their_vectors(cpu, lanes, cores):
    """The prior of the generated space, from the target: every parallel loop of a sampled conv2d keeps at least
    three-quarters of the target's cores busy (fusing only the batch axis of 1 ran a third of the samples on one
    core), the vectorized tile of the output row is rarely under a quarter of a vector (nearly scalar code; half
    the samples were, before the tile prior counted each tile once rather than once per outer factorization),
    and the padding is kept as a stage of its own three times in four (inlined, its guard sits in the
    reduction's innermost loops)."""
    from autosched.space.rules import parallel_efficiency

    task = autosched.Task("conv2d", target=f"llvm -mcpu={cpu} -num-cores={cores}")
    space = task.space("generated")
    traces = space.sample(60, np.random.default_rng(0))
    rows, inlined = [], 0
    for trace in traces:
        sch, args = task.apply(trace)
        loops = [int(n) for n in re.findall(r"parallel \(\S+, 0, (\d+)\)", str(autosched.lower(sch, args)))]
        assert loops and all(parallel_efficiency(n, cores) >= 0.75 for n in loops), (loops, trace.dumps())
        point = space.point_of(trace)
        rows.append(next(v for k, v in point.items() if k.startswith("tile/") and k.endswith("/s3"))[-1])
        inlined += point["inline/pad"]
    assert np.mean([4 * t < lanes for t in rows]) < 0.1, rows
    assert np.mean([t in (lanes // 2, 14, 28, 56) or t == lanes for t in rows]) > 0.5, rows
    assert inlined < 0.4 * len(traces)


def test_register_blocks_fit_the_targets_registers():
    """A register block (the innermost tiles of a stage's spatial axes) holds at most the target's vector registers
    less two for operands: 16 on AVX2, 32 with AVX-512. Blocks that would spill are not in the space at all (on
    conv2d they ran at a fifth of the speed and took ten times as long to compile), and blocks that fill half of
    them are sampled; a reduction axis has no such limit."""
    from autosched.space.rules import tile_candidates

    def vectors(cands, lanes, block):
        return {block * -(-c[-1] // lanes) for c in cands}

    avx2, _ = tile_candidates(64, 4, True, 8, registers=16, block=8)
    avx512, _ = tile_candidates(64, 4, True, 8, registers=32, block=8)
    assert max(vectors(avx2, 8, 8)) == 8 and max(vectors(avx512, 8, 8)) == 16  # 8 rows x 1 or 2 vectors
    rows, _ = tile_candidates(64, 4, False, 8, registers=16, block=1)
    assert max(c[-1] for c in rows) == 8  # the next divisor, 16 rows, leaves no room beside the operands
    reduction, _ = tile_candidates(64, 2, False, 16)
    assert max(c[-1] for c in reduction) == 64
    for cpu, lanes, regs in (("haswell", 8, 16), ("skylake-avx512", 16, 32)):
        t = autosched.Task("matmul", dict(M=256, N=256, K=64), target=f"llvm -mcpu={cpu}")
        space = t.space("generated")
        sizes = [_accumulator_vectors(space, tr, lanes) for tr in space.sample(200, np.random.default_rng(4))]
        assert max(sizes) <= regs - 2, (cpu, max(sizes))
        assert np.mean([s >= regs // 2 for s in sizes]) > 0.08, cpu  # blocks that fill half are sampled (0.16, 0.11)
