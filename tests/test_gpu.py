"""GPU kernels (``cuda`` target): the GPU rules, PTX that CUDA's ``ptxas`` accepts, and, on the CPU, the
grid's result (every bound loop run serially) equal to numpy. Kernels run on a GPU only where one is present.

Sizes are small: what is under test is the schedules' lowering and code, not the GPU's speed.
"""

import re

import numpy as np
import pytest

import autosched
from _cpus import SERIAL_CPU
from _gpu_checks import assert_coalesced, store_runs
from autosched import te
from autosched.cli import main
from autosched.codegen.nvptx import ptxas_path
from autosched.runtime.cuda import cuda_available
from autosched.te import expr as E
from autosched.te.expr import IntImm
from autosched.tir import stmt as S
from autosched.tir.gpu import prepare_kernel, serialize_bindings
from autosched.workloads.reference import get_reference

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA's PTX assembler) is not installed")
needs_gpu = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")

SAMPLES = 20
CASES = [
    ("matmul", dict(M=64, N=64, K=32)),
    ("conv2d", dict(H=14, W=14, CI=16, CO=32)),
    ("elementwise", dict(C=8, H=14, W=14, op="sigmoid_mul")),
]
GPU_LIMITS = ("threads per block", "shared memory", "over the limit", "__syncthreads")


def inputs(task, seed=0):
    rng = np.random.default_rng(seed)
    ins = [(rng.integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8.0).astype(t.dtype)
           for t in task.tensors()[:-1]]
    out = task.tensors()[-1]
    return ins, np.full(tuple(int(d) for d in out.shape), np.nan, dtype=out.dtype)


SPACES = ["template", "generated"]


def valid_samples(task, n, kind="template"):
    """``n`` sampled schedules of a space of a cuda task: each passes the GPU rules (spaces of cuda tasks
    redraw the points that do not, and say which limits they hit)."""
    space = task.space(kind)
    n = min(n, space.size())  # the elementwise template has 15 points
    traces = space.sample(n, np.random.default_rng(0))
    assert all(any(k in msg for k in GPU_LIMITS) for msg in space._failures), space._failures
    assert len(traces) == n, f"only {len(traces)} samples of {task}"
    for trace in traces:
        prepare_kernel(autosched.lower(*task.apply(trace)))
    return traces


@needs_ptxas
@pytest.mark.parametrize("kind", SPACES)
@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_sampled_gpu_schedules_give_ptx_that_ptxas_accepts(name, args, kind):
    task = autosched.Task(name, args, target="cuda -arch=sm_80")
    shared_seen = False
    for trace in valid_samples(task, SAMPLES, kind):
        mod = autosched.build(*task.apply(trace), target=task.target)  # runs ptxas: it raises on refusal
        ptx = mod.get_source("ptx")
        assert ".visible .entry main(" in ptx and "%tid.x" in ptx and "%ctaid.x" in ptx
        if ".shared" in ptx:
            shared_seen = True
            assert "bar.sync" in ptx
    assert shared_seen or name == "elementwise"


@pytest.mark.parametrize("kind", SPACES)
@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_the_grid_computes_the_right_thing(name, args, kind):
    """Each GPU kernel with its bound loops run serially on the CPU equals numpy: the block-wide regions of
    the shared copies, the thread indices and the split tails are right."""
    task = autosched.Task(name, args, target="cuda")
    cpu = autosched.Task(name, args)
    ins, out0 = inputs(cpu)
    want = get_reference(name)([a.astype(np.float64) for a in ins], **cpu.args).astype(out0.dtype)
    for trace in valid_samples(task, 6, kind):
        sch, targs = task.apply(trace)
        kernel, _ = prepare_kernel(autosched.lower(sch, targs))
        out = out0.copy()
        autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(*ins, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=trace.dumps())


def matmul_gpu(n=64, tile=8, threads=8, shared=True):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    bi, ti = s[C].split(i, factor=tile)
    bj, tj = s[C].split(j, factor=tile)
    s[C].reorder(bi, bj, ti, tj)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(tj, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], tj)
    (kk,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(kk, factor=8)
    if shared:
        AS = s.cache_read(A, "shared", [CL])
        s[AS].compute_at(s[CL], ko)
        fused = s[AS].fuse(*s[AS].op.axis)
        _, tx = s[AS].split(fused, factor=threads)
        s[AS].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_shared_copy_covers_the_block_and_is_fenced_by_barriers():
    s, args = matmul_gpu()
    text = str(autosched.lower(s, args, target="cuda"))
    # the block computes an 8x8 tile of C; per k-step of 8 it needs an 8x8 tile of A (not one row per thread)
    assert "allocate A.shared: float32[8, 8], shared" in text
    assert text.count("__syncthreads()") == 2
    body = text[text.index("allocate A.shared"):]
    assert body.index("__syncthreads()") < body.index("A.shared[") < body.rindex("__syncthreads()")


def test_launch_dimensions_come_from_the_bound_loops():
    s, args = matmul_gpu(n=64, tile=8)
    _, launch = prepare_kernel(autosched.lower(s, args))
    assert launch.grid == (8, 8, 1) and launch.block == (8, 8, 1) and launch.shared_bytes == 8 * 8 * 4


@needs_ptxas
def test_get_source_and_save_load(tmp_path):
    s, args = matmul_gpu()
    mod = autosched.build(s, args, target="cuda")
    assert "bar.sync" in mod.get_source("ptx") and "ptx_kernel" in mod.get_source("ll")
    mod.save(tmp_path / "k.cuda.json")
    again = autosched.runtime.load_module(tmp_path / "k.cuda.json")
    assert again.get_source("ptx") == mod.get_source("ptx")
    assert again["main"].launch == {"grid": [8, 8, 1], "block": [8, 8, 1], "shared_bytes": 256}


# ------------------------------------------------------------------- illegal schedules
def elementwise(n=4096):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op), A, B


def gpu_error(s, args, match):
    with pytest.raises(autosched.ScheduleError, match=match):
        autosched.lower(s, args, target="cuda")


def test_too_many_threads_in_one_dimension():
    s, A, B = elementwise()
    bx, tx = s[B].split(B.op.axis[0], factor=2048)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    gpu_error(s, [A, B], "threadIdx.x has extent 2048, over the limit of 1024")


def test_too_many_threads_per_block():
    s, A, B = elementwise(64 * 64 * 4)
    o, i = s[B].split(B.op.axis[0], factor=64)
    o, j = s[B].split(o, factor=64)
    s[B].bind(o, te.thread_axis("blockIdx.x"))
    s[B].bind(j, te.thread_axis("threadIdx.y"))
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    gpu_error(s, [A, B], "4096 threads per block")


def test_parallel_inside_a_kernel():
    s, A, B = elementwise()
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    tx, inner = s[B].split(tx, factor=4)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].parallel(inner)
    gpu_error(s, [A, B], "parallel")


def test_unbound_stage():
    s, A, B = elementwise()
    gpu_error(s, [A, B], "not inside any loop bound to a GPU block or thread")
    A2 = te.placeholder((64,), name="A")
    T = te.compute((64,), lambda i: A2[i] + 1.0, name="T")
    U = te.compute((64,), lambda i: T[i] * 2.0, name="U")
    s2 = te.create_schedule(U.op)
    s2[U].bind(U.op.axis[0], te.thread_axis("threadIdx.x"))
    gpu_error(s2, [A2, U], "intermediate 'T' is computed at the root")


def test_same_index_bound_twice_on_one_path():
    s, A, B = elementwise()
    o, i = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(o, te.thread_axis("threadIdx.x"))
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    gpu_error(s, [A, B], "bound to threadIdx.x inside loop")


def vector_add(factor=64, nparts=None):
    """The getting-started tutorial's kernel: C = A + B over a symbolic n, split and bound."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=factor) if nparts is None else s[C].split(C.op.axis[0], nparts=nparts)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_symbolic_grid_is_an_expression_of_the_shapes_and_the_tail_is_guarded():
    s, args = vector_add()
    kernel, launch = prepare_kernel(autosched.lower(s, args, name="myadd"))
    assert str(launch.grid[0]) == "(n + 63) // 64" and launch.grid[1:] == (1, 1) and launch.block == (64, 1, 1)
    assert launch.to_json(kernel.scalar_params)["grid"] == [["//", ["+", ["var", 0], 63], 64], 1, 1]
    assert "if (i.outer*64 + i.inner < n)" in str(kernel)  # the last block's extra threads store nothing


def test_symbolic_thread_extent_is_refused():
    s, args = vector_add(nparts=64)  # 64 blocks of n/64 threads: the block size would change with n
    gpu_error(s, args, "threads of a block are fixed when the kernel is built")


def test_too_much_shared_memory():
    A = te.placeholder((1024, 1024), name="A")
    B = te.compute((1024, 1024), lambda i, j: A[i, j] + A[j, i], name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    i, j = B.op.axis
    bi, ti = s[B].split(i, factor=256)
    s[B].reorder(bi, j, ti)
    s[B].bind(bi, te.thread_axis("blockIdx.x"))
    s[B].bind(ti, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], bi)
    fused = s[AS].fuse(*s[AS].op.axis)
    _, tx = s[AS].split(fused, factor=256)
    s[AS].bind(tx, te.thread_axis("threadIdx.x"))
    gpu_error(s, [A, B], "bytes of shared memory")


def test_a_split_tail_around_a_shared_copy_leaves_the_copy_to_every_thread():
    """60 rows in blocks of 16: the last block's 4 spare threads skip the stores, but not the shared copy
    or its barriers (the split's guard is on the stores, where TVM puts it): the kernel is accepted, no
    barrier is under a thread-dependent condition, and its grid equals numpy."""
    A = te.placeholder((60, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((60,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    AS = s.cache_read(A, "shared", [BL])
    bi, ti = s[B].split(B.op.axis[0], factor=16)  # 60 = 3 x 16 + 12: the last block's threads diverge
    s[B].bind(bi, te.thread_axis("blockIdx.x"))
    s[B].bind(ti, te.thread_axis("threadIdx.x"))
    s[BL].compute_at(s[B], ti)
    ko, _ = s[BL].split(BL.op.reduce_axis[0], factor=8)
    s[AS].compute_at(s[BL], ko)
    fused = s[AS].fuse(*s[AS].op.axis)
    _, tx = s[AS].split(fused, factor=16)
    s[AS].bind(tx, te.thread_axis("threadIdx.x"))
    kernel, _ = prepare_kernel(autosched.lower(s, [A, B]))  # _check_barriers: none under a guard on a thread
    a = np.random.default_rng(0).standard_normal((60, 64)).astype("float32")
    out = np.full(60, np.nan, "float32")
    autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    if ptxas_path() is not None:
        assert "bar.sync" in autosched.build(s, [A, B], target="cuda -arch=sm_80").get_source("ptx")


def test_a_barrier_in_a_loop_whose_trip_count_depends_on_the_thread_is_refused():
    """A loop that runs a different number of times in different threads (a padding guard made a loop bound)
    must hold no barrier: the threads would wait at different __syncthreads() and the block would hang."""
    A = S.Buffer("A", [IntImm(64)], "float32")
    sh = S.Buffer("sh", [IntImm(32)], "float32", "shared")
    t, i = E.Var("t", "int32"), E.Var("i", "int32")
    copy = S.For(E.Var("c", "int32"), IntImm(32), "thread_binding",
                 S.BufferStore(sh, S.BufferLoad(A, [t]), [t]), "threadIdx.x")
    use = S.BufferStore(A, S.BufferLoad(sh, [IntImm(31) - t]), [t + 32])
    body = S.For(t, IntImm(32), "thread_binding",
                 S.Allocate(sh, S.For(i, E.Min(t, IntImm(4)), "serial", S.SeqStmt([copy, use]))), "threadIdx.x")
    with pytest.raises(autosched.ScheduleError, match="__syncthreads"):
        prepare_kernel(S.PrimFunc("main", [A], [], body))


def conv_with_an_inner_shared_copy():
    """An NCHW convolution reading its padding in place, the weights staged in shared memory inside the
    window's loops: the padding guard depends on the thread (its pixel) and on the window's row."""
    task = autosched.Task("conv2d", dict(H=14, W=14, CI=16, CO=32))
    data, weight, out = task.tensors()
    s = te.create_schedule(out.op)
    s[next(t for t in out.op.input_tensors if "pad" in t.op.name)].compute_inline()
    OL = s.cache_write(out, "local")
    n, f, y, x = s[out].op.axis
    fo, fi = s[out].split(f, factor=4)
    yo, yi = s[out].split(y, factor=7)
    s[out].reorder(n, fo, yo, yi, x, fi)
    s[out].bind(s[out].fuse(n, fo, yo), te.thread_axis("blockIdx.x"))
    tx = s[out].fuse(yi, x)
    s[out].bind(tx, te.thread_axis("threadIdx.x"))
    s[OL].compute_at(s[out], tx)
    rc, rh, rw = s[OL].op.reduce_axis
    rco, rci = s[OL].split(rc, factor=2)
    s[OL].reorder(rco, rh, rw, rci, *s[OL].op.axis)
    WS = s.cache_read(weight, "shared", [OL])
    s[WS].compute_at(s[OL], rw)
    _, ft = s[WS].split(s[WS].fuse(*s[WS].op.axis), factor=8)
    s[WS].bind(ft, te.thread_axis("threadIdx.x"))
    return task, s, [data, weight, out]


def test_a_stage_guard_never_skips_a_shared_copy():
    """The padding guard of the convolution's steps stays inside the weights' copy: every thread fetches its
    part and meets every barrier (the guard used to become the bounds of the window loops around the copy,
    so threads at the image's edge skipped it), and the grid, threads in lockstep, equals numpy."""
    task, s, args = conv_with_an_inner_shared_copy()
    kernel, _ = prepare_kernel(autosched.lower(s, args))
    for loop in (x for x in S.walk_stmts(kernel.body) if isinstance(x, S.For) and x.kind != "thread_binding"):
        if any(isinstance(b, S.Barrier) for b in S.walk_stmts(loop.body)):
            assert isinstance(loop.extent, IntImm), f"a barrier inside a loop of {loop.extent} iterations"
    ins, out = inputs(task)
    want = get_reference("conv2d")([a.astype(np.float64) for a in ins], **task.args).astype("float32")
    autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(*ins, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    if ptxas_path() is not None:
        autosched.build(s, args, target="cuda -arch=sm_80")


def test_the_cpu_run_of_the_grid_shows_a_missing_barrier():
    """The serial CPU run of a kernel keeps its threads in lockstep between barriers: the shared matmul with
    its barriers equals numpy, and without them it does not (threads read tiles others have not copied)."""
    s, args = matmul_gpu()
    kernel, _ = prepare_kernel(autosched.lower(s, args))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))

    def run(k):
        c = np.zeros((64, 64), "float32")
        autosched.build(serialize_bindings(k), target=SERIAL_CPU)(a, b, c)
        return c

    np.testing.assert_allclose(run(kernel), a @ b, rtol=1e-4, atol=1e-4)

    def strip(x):
        if isinstance(x, S.SeqStmt):
            return S.SeqStmt([strip(y) for y in x.seq if not isinstance(y, S.Barrier)])
        return S.map_children(x, strip)

    racy = S.PrimFunc(kernel.name, kernel.params, kernel.scalar_params, strip(kernel.body), dict(kernel.attrs))
    assert not any(isinstance(x, S.Barrier) for x in S.walk_stmts(racy.body))
    assert not np.allclose(run(racy), a @ b, rtol=1e-4, atol=1e-4)


def test_float64_exp_is_refused_clearly():
    A = te.placeholder((256,), name="A", dtype="float64")
    B = te.compute((256,), lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    with pytest.raises(autosched.CodegenError, match="float32 only"):
        autosched.build(s, [A, B], target="cuda")


# ------------------------------------------------------------------- on a GPU
@needs_gpu
@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_kernels_run_on_the_gpu_and_equal_numpy(name, args):
    task = autosched.Task(name, args, target="cuda")
    cpu = autosched.Task(name, args)
    ins, out0 = inputs(cpu)
    want = get_reference(name)([a.astype(np.float64) for a in ins], **cpu.args).astype(out0.dtype)
    for trace in valid_samples(task, 5):
        out = out0.copy()
        autosched.build(*task.apply(trace), target=task.target)(*ins, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=trace.dumps())


@needs_gpu
def test_the_runner_measures_gpu_kernels():
    from autosched.measure import LocalBuilder, LocalRunner, MeasureInput

    task = autosched.Task("matmul", dict(M=64, N=64, K=32), target="cuda")
    inps = [MeasureInput(task, t) for t in valid_samples(task, 4)]
    with LocalBuilder(n_parallel=1) as b, LocalRunner() as r:
        results = r.run(inps, b.build(inps))
    assert all(res.error_kind is None and len(res.costs) > 0 for res in results), results


@needs_ptxas
def test_the_builder_makes_ptx_artifacts_for_cuda_candidates():
    """The measurement builder (worker processes) lowers, checks and compiles cuda candidates; the artifact
    loads as a CUDA module (running it needs a GPU)."""
    from autosched.measure import LocalBuilder, MeasureInput

    task = autosched.Task("matmul", dict(M=64, N=64, K=32), target="cuda")
    inps = [MeasureInput(task, t) for t in valid_samples(task, 3)]
    with LocalBuilder(n_parallel=1) as b:
        results = b.build(inps)
        assert all(r.error_kind is None for r in results), results
        for r in results:
            assert r.artifact_path.endswith(".cuda.json")
            mod = autosched.runtime.load_module(r.artifact_path)
            assert ".visible .entry " in mod.get_source("ptx")


@needs_ptxas
def test_a_block_that_needs_too_many_registers_is_refused_at_build():
    """1024 threads with a 32-element register tile each need more registers than a block may have: the
    driver would refuse the launch, so the build refuses it, naming the counts and what to change."""
    task = autosched.Task("matmul", dict(M=512, N=512, K=64), target="cuda -arch=sm_90")
    trace = task.space("template").trace_of({"shared": False, "tile_i": (1, 16, 32), "tile_j": (8, 64),
                                             "tile_k": (2, 32), "unroll_k": True})
    with pytest.raises(autosched.ScheduleError, match=r"1024 threads per block x \d+ registers.*65536"):
        autosched.build(*task.apply(trace), target=task.target)


def test_ptxas_report_gives_registers_per_kernel():
    from autosched.codegen.nvptx import check_registers, ptxas_registers

    report = ("ptxas info    : Compiling entry function 'k0' for 'sm_90'\n"
              "ptxas info    : Used 40 registers, used 1 barriers, 576 bytes smem\n"
              "ptxas info    : Compiling entry function 'k1' for 'sm_90'\n"
              "ptxas info    : Used 128 registers\n")
    assert ptxas_registers(report) == {"k0": 40, "k1": 128}
    check_registers("k0", 64, (32, 32, 1))  # exactly 65536
    with pytest.raises(autosched.ScheduleError, match="k1: 1024 threads per block x 65 registers"):
        check_registers("k1", 65, (1024, 1, 1))


@needs_ptxas
def test_the_gpu_peak_kernel_assembles():
    """The FMA loop that measures the GPU's fp32 peak is PTX ptxas accepts, with its FMAs not folded away."""
    from autosched.codegen.nvptx import compile_ptx, ptxas_check
    from autosched.measure.peak import _GPU_CHAINS, _gpu_kernel_ir

    ptx = compile_ptx(_gpu_kernel_ir(), "sm_90")
    assert ptx.count("fma.rn.f32") >= _GPU_CHAINS and "st.global" in ptx
    assert "Used" in ptxas_check(ptx, "sm_90")


def test_peak_for_a_cuda_target_without_a_gpu_says_so(capsys):
    if cuda_available():
        pytest.skip("this checks the error on a machine without a GPU, and a GPU is here")
    assert main(["peak", "--target", "cuda"]) == 2
    assert "no CUDA" in capsys.readouterr().err


def test_tune_for_a_cuda_target_without_a_gpu_stops_before_it_starts(capsys, tmp_path):
    """Every candidate would fail to run: one line says why, with the way out, and no database is made."""
    if cuda_available():
        pytest.skip("this checks the error on a machine without a GPU, and a GPU is here")
    db = tmp_path / "t.db"
    assert main(["tune", "--workload", "matmul", "--target", "cuda", "--trials", "4", "--backend", "local",
                 "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--target cuda: no CUDA" in err and "--ray-address" in err and err.count("\n") == 1, err
    assert not db.exists()


@needs_gpu
def test_a_cuda_target_builds_for_the_gpu_here():
    """``cuda`` without -arch is the GPU's own architecture (sm_90 on an H100), in the target string that keys
    the records and in the PTX the build prints."""
    from autosched.runtime.cuda import device_info

    arch = device_info()[1]
    task = autosched.Task("matmul", dict(M=64, N=64, K=32), target="cuda")
    assert task.target.arch == arch and task.target.key == f"cuda -arch={arch}"
    mod = autosched.build(*task.apply(valid_samples(task, 1)[0]), target=task.target)
    assert mod.arch == arch and f".target {arch}" in mod.get_source("ptx")


def _streaming_add(n):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=256)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return autosched.build(s, [A, B, C], target="cuda", name="stream_add")


@needs_gpu
def test_events_time_the_gpu_and_a_flushed_l2_makes_launches_cold():
    """CUDA events around a batch give the GPU's time per launch (no more than the host's wall clock of the
    same batch); with the L2 flushed before each launch (cuMemsetD8 over twice the L2 size the driver reports)
    a kernel whose 24 MB of arrays fit in the L2 reads them from DRAM, and takes longer."""
    import time

    from autosched.runtime.cuda import _Driver, clock_state

    n = 2 << 20  # three float32 arrays of 8 MiB: 24 MiB, inside an H100's 50 MiB L2 (and an A100's 40)
    mod = _streaming_add(n)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    call = mod.entry_func.device_caller([a, b, np.zeros(n, "float32")])
    call(10)
    warm = min(call.time(50) for _ in range(5))
    t0 = time.perf_counter()
    call(50)
    wall = (time.perf_counter() - t0) / 50
    cold = min(call.time_cold(20) for _ in range(5))
    drv = _Driver.get()
    l2 = drv.l2_bytes
    assert l2 > 0 and drv._l2_buffer is not None and drv._l2_buffer[1] == 2 * l2
    assert 0 < warm <= wall * 1.05, (warm, wall)
    assert cold > warm, f"cold {cold * 1e6:.2f} us, warm {warm * 1e6:.2f} us (L2 {l2 >> 20} MiB)"
    ev = mod.time_evaluator(mod.entry_name, autosched.cuda(0), number=20, repeat=3)(a, b, np.zeros(n, "float32"))
    ev_cold = mod.time_evaluator(mod.entry_name, autosched.cuda(0), number=10, repeat=3,
                                 f_preproc="l2_cache_flush_cuda")(a, b, np.zeros(n, "float32"))
    assert 0 < ev.min < ev_cold.max
    state = clock_state()
    print(f"warm {warm * 1e6:.2f} us, cold {cold * 1e6:.2f} us, host wall {wall * 1e6:.2f} us per launch; "
          f"time_evaluator {ev.median * 1e6:.2f} / cold {ev_cold.median * 1e6:.2f} us; L2 {l2 >> 20} MiB; {state}")
    assert state["gpu_arch"].startswith("sm_") and re.fullmatch(r"P\d+|unknown", state["pstate"])
    assert all(state[k] == "unknown" or int(state[k]) > 0 for k in ("sm_clock_mhz", "mem_clock_mhz"))


@needs_gpu
def test_the_runner_times_cold_and_records_the_gpu_clocks():
    """The measurement runner's cold-cache option on a GPU (RunConfig(flush_cache=True), `tune --cold-cache`):
    results carry the GPU, its architecture and its clocks in ``machine``."""
    from autosched.measure import LocalBuilder, LocalRunner, MeasureInput
    from autosched.measure.runner import RunConfig

    task = autosched.Task("matmul", dict(M=64, N=64, K=32), target="cuda")
    inps = [MeasureInput(task, t) for t in valid_samples(task, 2)]
    with LocalBuilder(n_parallel=1) as b, LocalRunner(config=RunConfig(flush_cache=True, repeat=3)) as r:
        results = r.run(inps, b.build(inps))
    assert all(res.error_kind is None and len(res.costs) == 3 for res in results), results
    for res in results:
        assert res.machine["gpu_arch"] == task.target.arch, res.machine
        assert {"gpu", "sm_clock_mhz", "mem_clock_mhz", "pstate"} <= set(res.machine), res.machine
    print([res.machine for res in results])


@needs_gpu
def test_gpu_peak_is_measured():
    from autosched.measure.peak import measure_gpu_peak

    peak = measure_gpu_peak(repeat=2)
    assert peak.gflops > 1000 and "sm_" in peak.cpu


# ------------------------------------------------------------------- coalesced stores
def test_the_stride_check_sees_uncoalesced_stores():
    """The check itself: a thread that computes 4 consecutive elements stores 4 elements from its neighbour."""
    s, A, B = elementwise(1024)
    rest, inner = s[B].split(B.op.axis[0], factor=4)
    bx, tx = s[B].split(rest, factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    assert store_runs(autosched.lower(s, [A, B], target="cuda")) == [("B", {4}, 1)]


@pytest.mark.parametrize("kind", SPACES)
@pytest.mark.parametrize("name,args", CASES + [("conv2d", dict(H=14, W=14, CI=16, CO=32, layout="NHWC"))],
                         ids=[c[0] for c in CASES] + ["conv2d_nhwc"])
def test_sampled_gpu_schedules_store_coalesced(name, args, kind):
    """In every sampled point of the cuda templates and generated spaces, consecutive threadIdx.x write
    consecutive addresses of the output."""
    task = autosched.Task(name, args, target="cuda")
    for trace in valid_samples(task, 8, kind):
        assert_coalesced(autosched.lower(*task.apply(trace), target="cuda"), trace.dumps())
