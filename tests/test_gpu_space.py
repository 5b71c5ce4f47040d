"""The cuda spaces reach the structure of vendor GEMM kernels, checked on the PTX without a GPU: shared tiles
for both operands, 128-bit global loads, a register tile of several rows and columns per thread, and code
that CUDA's ``ptxas`` accepts for sm_80 and sm_90.
"""

import re

import numpy as np
import pytest

import autosched
from _cpus import SERIAL_CPU
from autosched import te
from autosched.codegen.nvptx import ptxas_check, ptxas_path, ptxas_registers
from autosched.tir import stmt as S
from autosched.tir.gpu import prepare_kernel, serialize_bindings
from autosched.workloads.reference import get_reference

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA's PTX assembler) is not installed")

CASES = [
    ("matmul", dict(M=256, N=256, K=256)),
    ("conv2d", dict(H=14, W=14, CI=32, CO=64, layout="NHWC")),
]
SAMPLES = 40


def structure(task, trace) -> dict:
    """What a candidate kernel is made of: its shared arrays, widest global load, register tile, PTX."""
    func = autosched.lower(*task.apply(trace), target=task.target)
    allocs = [s.buffer for s in S.walk_stmts(func.body) if isinstance(s, S.Allocate)]
    local = [b for b in allocs if b.scope == "local"]
    tile = sorted((int(d) for d in local[0].shape if int(d) > 1), reverse=True) if local else []
    ptx = autosched.build(*task.apply(trace), target=task.target).get_source("ptx")
    return {"shared": sorted(b.name for b in allocs if b.scope == "shared"), "tile": tile, "ptx": ptx,
            "v4_global_loads": len(re.findall(r"ld\.global(?:\.nc)?\.v4\.[bf]32", ptx))}


def vendor_like(task, kind="generated"):
    """The first sampled candidate with the vendor kernels' structure, and how many samples were looked at."""
    traces = task.space(kind).sample(SAMPLES, np.random.default_rng(0))
    for n, trace in enumerate(traces, 1):
        st = structure(task, trace)
        both_shared = len({name.split(".")[0] for name in st["shared"]}) >= 2  # (conv2d: its padded data)
        if both_shared and st["v4_global_loads"] and len(st["tile"]) >= 2:
            return trace, st, n
    raise AssertionError(f"none of {len(traces)} samples of {task} stages both operands in shared memory, "
                         "loads them 128 bits at a time and keeps a 2-D register tile")


#: the spaces that hold vendor-like kernels (the conv2d template stages the weights only: its data tile is
#: read through the cache)
VENDOR_LIKE = [(*CASES[0], "generated"), (*CASES[0], "template"), (*CASES[1], "generated")]
VENDOR_IDS = ["matmul-generated", "matmul-template", "conv2d_nhwc-generated"]


@needs_ptxas
@pytest.mark.parametrize("name,args,kind", VENDOR_LIKE, ids=VENDOR_IDS)
def test_the_space_holds_vendor_like_kernels_that_ptxas_accepts(name, args, kind):
    task = autosched.Task(name, args, target="cuda -arch=sm_80")
    trace, st, _ = vendor_like(task, kind)
    assert "bar.sync" in st["ptx"]
    for arch in ("sm_80", "sm_90"):
        sched = autosched.Task(name, args, target=f"cuda -arch={arch}")
        ptx = autosched.build(*sched.apply(trace), target=sched.target).get_source("ptx")
        assert f".target {arch}" in ptx
        regs = ptxas_registers(ptxas_check(ptx, arch))
        assert regs and all(r <= 255 for r in regs.values())


@pytest.mark.parametrize("name,args", CASES, ids=["matmul", "conv2d_nhwc"])
def test_vendor_like_kernels_compute_the_right_thing(name, args):
    """The vector fetches and vector stores of such a kernel, its bound loops run serially on the CPU, give
    numpy's result."""
    task = autosched.Task(name, args, target="cuda")
    cpu = autosched.Task(name, args)
    trace, _, _ = vendor_like(task)
    rng = np.random.default_rng(0)
    ins = [(rng.integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8.0).astype("float32")
           for t in cpu.tensors()[:-1]]
    want = get_reference(name)([a.astype(np.float64) for a in ins], **cpu.args).astype("float32")
    kernel, _ = prepare_kernel(autosched.lower(*task.apply(trace)))
    got = np.full(want.shape, np.nan, "float32")
    autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(*ins, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=trace.dumps())


@needs_ptxas
def test_a_misaligned_vector_stays_scalar():
    """A 4-wide vector whose first element is not a multiple of 4 (a row of 6 floats) is loaded element by
    element: the GPU faults on a 128-bit load from an address that is not 16-byte aligned."""
    A = te.placeholder((64, 6), name="A")
    B = te.compute((64, 6), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(s[B].op.axis[0], te.thread_axis("threadIdx.x"))
    jo, ji = s[B].split(s[B].op.axis[1], factor=2)
    s[B].vectorize(ji)
    ptx = autosched.build(s, [A, B], target="cuda -arch=sm_80").get_source("ptx")
    assert re.search(r"ld\.global(?:\.nc)?\.v2\.[bf]32", ptx)  # 6*i + 2*jo: a multiple of 2
    assert not re.search(r"\.v4\.", ptx)
    A4 = te.placeholder((64, 6), name="A")
    C = te.compute((64, 4), lambda i, j: A4[i, j + 1], name="C")
    s = te.create_schedule(C.op)
    s[C].bind(s[C].op.axis[0], te.thread_axis("threadIdx.x"))
    s[C].vectorize(s[C].op.axis[1])
    ptx = autosched.build(s, [A4, C], target="cuda -arch=sm_80").get_source("ptx")
    assert not re.search(r"ld\.global(?:\.nc)?\.v[24]\.[bf]32", ptx)  # 6*i + 1: no wide load


def double_buffered(task, kind):
    """The first sampled candidate whose shared copies are double-buffered, and its lowered kernel."""
    for trace in task.space(kind).sample(SAMPLES, np.random.default_rng(1)):
        if any(step.kind == "double_buffer" for step in trace.steps):
            return trace, autosched.lower(*task.apply(trace), target=task.target)
    raise AssertionError(f"none of {SAMPLES} samples of {task}'s {kind} space double-buffers its shared copies")


def pipelined_loops(func):
    """The serial loops of a lowered kernel whose body is the pipeline's steady state: the next tiles' global
    loads into registers, the compute, those registers stored into the other shared copies, one barrier."""
    out = []
    for s in S.walk_stmts(func.body):
        if not (isinstance(s, S.For) and s.kind == "serial" and isinstance(s.body, S.SeqStmt)):
            continue
        seq = s.body.seq
        if len(seq) < 4 or not isinstance(seq[-1], S.Barrier) or any(isinstance(x, S.Barrier) for x in seq[:-1]):
            continue
        load, store = seq[0], seq[-2]
        if not (isinstance(load, S.IfThenElse) and isinstance(store, S.IfThenElse)):
            continue
        loaded = {x.buffer.scope for x in S.walk_stmts(load) if isinstance(x, S.BufferStore)}
        stored = {x.buffer.scope for x in S.walk_stmts(store) if isinstance(x, S.BufferStore)}
        if loaded == {"local"} and stored == {"shared"}:
            out.append(s)
    return out


@pytest.mark.parametrize("name,args,kind", VENDOR_LIKE, ids=VENDOR_IDS)  # (the conv2d template has no such knob)
def test_double_buffered_copies_load_the_next_tile_while_this_one_is_computed(name, args, kind):
    """A double-buffered candidate's reduction loop is software-pipelined (tir.pipeline): one barrier per
    iteration instead of two, global loads issued before the compute, and it still computes numpy's
    result when its grid runs on the CPU (threads in lockstep, each with its own staging registers)."""
    task = autosched.Task(name, args, target="cuda -arch=sm_80")
    trace, func = double_buffered(task, kind)
    loops = pipelined_loops(func)
    assert len(loops) == 1, func
    shared = [s.buffer for s in S.walk_stmts(func.body) if isinstance(s, S.Allocate) and s.buffer.scope == "shared"]
    assert shared and all(int(b.shape[0]) == 2 for b in shared)
    cpu = autosched.Task(name, args)
    rng = np.random.default_rng(0)
    ins = [(rng.integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8.0).astype("float32")
           for t in cpu.tensors()[:-1]]
    want = get_reference(name)([a.astype(np.float64) for a in ins], **cpu.args).astype("float32")
    got = np.full(want.shape, np.nan, "float32")
    autosched.build(serialize_bindings(func), target=SERIAL_CPU)(*ins, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=trace.dumps())


@needs_ptxas
def test_a_pipelined_matmul_issues_its_loads_before_its_fmas():
    """In the PTX of a double-buffered matmul, the loop's 128-bit global loads come before its FMAs and the
    shared stores after them, and ptxas accepts it for sm_80 and sm_90; without double buffering, the two
    copies of a k tile share one pair of barriers."""
    task = autosched.Task("matmul", dict(M=256, N=256, K=256), target="cuda -arch=sm_80")
    space = task.space("template")
    point = {**space.point_at(0), "tile_i": (2, 16, 8), "tile_j": (4, 16, 4), "tile_k": (16, 16),
             "shared": True, "vector_fetch": 4, "unroll_k": True, "double_buffer": True}
    trace = space.generate(point)[0]
    ptx = autosched.build(*task.apply(trace), target=task.target).get_source("ptx")
    ops = re.findall(r"^\s+(ld\.global\.nc\.v4|st\.shared\.v4|fma\.rn|bar\.sync)", ptx, re.M)
    assert ops.count("bar.sync") == 3  # two around the prologue's copies, one per iteration
    loop = ops[ops.index("bar.sync", ops.index("bar.sync") + 1) + 1:]  # after the prologue
    loads, stores = loop.index("ld.global.nc.v4"), loop.index("st.shared.v4")
    assert loads < stores and loop[loads:stores].count("fma.rn") >= loop.count("fma.rn") // 2, ops
    assert "st.shared.v4" not in loop[:loads] and "ld.global.nc.v4" not in loop[stores:], ops
    single = space.generate({**point, "double_buffer": False})[0]
    ptx = autosched.build(*task.apply(single), target=task.target).get_source("ptx")
    assert ptx.count("bar.sync") == 2  # both copies between one pair of barriers, not a pair each
    for arch in ("sm_80", "sm_90"):
        sched = autosched.Task("matmul", dict(M=256, N=256, K=256), target=f"cuda -arch={arch}")
        regs = ptxas_registers(ptxas_check(autosched.build(*sched.apply(trace), target=sched.target)
                                           .get_source("ptx"), arch))
        assert regs and all(r <= 255 for r in regs.values())


def test_a_te_double_buffer_of_one_operand_stays_correct():
    """``double_buffer`` as TVM users write it: both copies doubled are pipelined; one copy doubled and the
    other not keeps alternating two copies (no pipeline), and both give numpy's result."""
    n, tile = 64, 8
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-4, 5, size=(n, n)).astype("float32") for _ in range(2))
    for doubled in (("A",), ("A", "B")):
        s = te.create_schedule(C.op)
        AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
        i, j = s[C].op.axis
        bi, ti = s[C].split(i, factor=tile)
        bj, tj = s[C].split(j, factor=tile)
        s[C].reorder(bi, bj, ti, tj)
        s[C].bind(bi, te.thread_axis("blockIdx.y"))
        s[C].bind(bj, te.thread_axis("blockIdx.x"))
        s[C].bind(ti, te.thread_axis("threadIdx.y"))
        s[C].bind(tj, te.thread_axis("threadIdx.x"))
        ko, _ = s[C].split(s[C].op.reduce_axis[0], factor=tile)
        for cache in (AA, BB):
            s[cache].compute_at(s[C], ko)
            y, x = s[cache].op.axis
            s[cache].bind(y, te.thread_axis("threadIdx.y"))
            s[cache].bind(x, te.thread_axis("threadIdx.x"))
        for cache, name in ((AA, "A"), (BB, "B")):
            if name in doubled:
                s[cache].double_buffer()
        func = autosched.lower(s, [A, B, C], target="cuda -arch=sm_80")
        assert len(pipelined_loops(func)) == (len(doubled) == 2), func
        got = np.full((n, n), np.nan, "float32")
        autosched.build(serialize_bindings(func), target=SERIAL_CPU)(a, b, got)
        np.testing.assert_array_equal(got, a @ b)
