"""The cuda spaces reach the structure of vendor GEMM kernels, checked on the PTX without a GPU: shared tiles
for both operands, 128-bit global loads, a register tile of several rows and columns per thread, and code
that CUDA's ``ptxas`` accepts for sm_80 and sm_90.
"""

import re

import numpy as np
import pytest

import autosched
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


@needs_ptxas
@pytest.mark.parametrize("kind", ["generated", "template"])
@pytest.mark.parametrize("name,args", CASES, ids=["matmul", "conv2d_nhwc"])
def test_the_space_holds_vendor_like_kernels_that_ptxas_accepts(name, args, kind):
    if kind == "template" and name == "conv2d":
        pytest.skip("the conv2d template stages the weights only (its data tile is read through the cache)")
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
    autosched.build(serialize_bindings(kernel), target="llvm")(*ins, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=trace.dumps())


@needs_ptxas
def test_a_misaligned_vector_stays_scalar():
    """A 4-wide vector whose first element is not a multiple of 4 (a row of 6 floats) is loaded element by
    element: the GPU faults on a 128-bit load from an address that is not 16-byte aligned."""
    from autosched import te

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
