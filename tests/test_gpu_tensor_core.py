"""Tensor cores (``wmma``): float16 tiles multiplied by a warp's ``wmma.mma.sync``. TVM users' code
(``tir.call_intrin("handle", "tir.tvm_mma_sync", ...)`` in tensor intrinsics, fragments cached in the
``wmma.*`` scopes) and the ``matmul_mixed`` template's kernels are checked without a GPU: their grid run on
the CPU (each thread doing its warp's tile operations) equals numpy, their PTX holds the warp matrix
instructions and ``ptxas`` accepts it for sm_80 and sm_90. They run on a GPU where one is present.
"""

import re

import numpy as np
import pytest

import autosched
from _cpus import SERIAL_CPU
from autosched import te, tir
from autosched.codegen.nvptx import ptxas_check, ptxas_path, ptxas_registers
from autosched.errors import CodegenError, ScheduleError
from autosched.measure import LocalBuilder, MeasureInput
from autosched.runtime.cuda import cuda_available
from autosched.te import intrin as te_intrin
from autosched.te.tensor_core import wmma_load, wmma_mma, wmma_store
from autosched.te.trace import Trace
from autosched.tir import stmt as S
from autosched.tir.gpu import prepare_kernel, serialize_bindings

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA's PTX assembler) is not installed")
needs_gpu = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")


# --------------------------------------------------------------- TVM users' intrinsics
def user_load(scope, layout="row_major"):
    """A tile of shared memory into a fragment, written as TVM's tensor-core examples write it."""
    a = te.placeholder((16, 16), "float16", name="a")
    c = te.compute((16, 16), lambda i, j: a[i, j], name="c")
    ba = tir.decl_buffer(a.shape, a.dtype, "ba", strides=[te.var("sa"), 1], scope="shared", offset_factor=16)
    bc = tir.decl_buffer(c.shape, c.dtype, "bc", scope=scope, offset_factor=256)

    def body(ins, outs):
        ib = tir.ir_builder.create()
        ib.emit(tir.call_intrin("handle", "tir.tvm_load_matrix_sync", outs[0].data, 16, 16, 16,
                                outs[0].elem_offset // 256, ins[0].access_ptr("r"), ins[0].strides[0], layout))
        return ib.get()

    return te.decl_tensor_intrin(c.op, body, binds={a: ba, c: bc})


def user_gemm(b_transposed=False):
    a = te.placeholder((16, 16), "float16", name="a")
    b = te.placeholder((16, 16), "float16", name="b")
    k = te.reduce_axis((0, 16), name="k")
    bk = (lambda j: b[j, k]) if b_transposed else (lambda j: b[k, j])
    c = te.compute((16, 16), lambda i, j: te.sum(a[i, k].astype("float32") * bk(j).astype("float32"), axis=k),
                   name="c")
    bufs = {t: tir.decl_buffer(t.shape, t.dtype, t.name, scope=s, offset_factor=256)
            for t, s in ((a, "wmma.matrix_a"), (b, "wmma.matrix_b"), (c, "wmma.accumulator"))}

    def body(ins, outs):
        ba, bb = ins
        (bc,) = outs
        fill = tir.ir_builder.create()
        fill.emit(tir.call_intrin("handle", "tir.tvm_fill_fragment", bc.data, 16, 16, 16, bc.elem_offset // 256,
                                  0.0))
        mma = tir.ir_builder.create()
        mma.emit(tir.call_intrin("handle", "tir.tvm_mma_sync", bc.data, bc.elem_offset // 256, ba.data,
                                 ba.elem_offset // 256, bb.data, bb.elem_offset // 256, bc.data,
                                 bc.elem_offset // 256))
        return mma.get(), fill.get(), mma.get()

    return te.decl_tensor_intrin(c.op, body, binds=bufs)


def user_store():
    a = te.placeholder((16, 16), "float32", name="a")
    c = te.compute((16, 16), lambda i, j: a[i, j], name="c")
    ba = tir.decl_buffer(a.shape, a.dtype, "ba", scope="wmma.accumulator", offset_factor=256)
    bc = tir.decl_buffer(c.shape, c.dtype, "bc", strides=[te.var("sc"), 1], offset_factor=16)

    def body(ins, outs):
        ib = tir.ir_builder.create()
        ib.emit(tir.call_intrin("handle", "tir.tvm_store_matrix_sync", ins[0].data, 16, 16, 16,
                                ins[0].elem_offset // 256, outs[0].access_ptr("w"), outs[0].strides[0],
                                "row_major"))
        return ib.get()

    return te.decl_tensor_intrin(c.op, body, binds={a: ba, c: bc})


def fetch_by_the_block(s, T):
    """A shared copy filled by the 2 x 2 warps of a block: its elements fused, 32 lanes along threadIdx.x."""
    fused = s[T].fuse(*T.op.axis)
    fused, tx = s[T].split(fused, 32)
    fused, ty = s[T].split(fused, 2)
    _, tz = s[T].split(fused, 2)
    s[T].bind(tx, te.thread_axis("threadIdx.x"))
    s[T].bind(ty, te.thread_axis("threadIdx.y"))
    s[T].bind(tz, te.thread_axis("threadIdx.z"))


def user_matmul(n=64, b_transposed=False, warp_axis="threadIdx.y", pad=None):
    """C = A @ B (or A @ B^T) on tensor cores: 32x32 per block, a 16x16 tile per warp (2x2 warps), k in
    steps of 16 through shared memory."""
    A = te.placeholder((n, n), "float16", name="A")
    B = te.placeholder((n, n), "float16", name="B")
    k = te.reduce_axis((0, n), name="k")
    bk = (lambda j: B[j, k]) if b_transposed else (lambda j: B[k, j])
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k].astype("float32") * bk(j).astype("float32"), axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    AF, BF = s.cache_read(AS, "wmma.matrix_a", [C]), s.cache_read(BS, "wmma.matrix_b", [C])
    CF = s.cache_write(C, "wmma.accumulator")
    i, j = C.op.axis
    bi, ii = s[C].split(i, 32)
    bj, jj = s[C].split(j, 32)
    wi, fi = s[C].split(ii, 16)
    wj, fj = s[C].split(jj, 16)
    s[C].reorder(bi, bj, wi, wj, fi, fj)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(wi, te.thread_axis("threadIdx.z"))
    s[C].bind(wj, te.thread_axis(warp_axis))
    s[CF].compute_at(s[C], wj)
    ci, cj = CF.op.axis
    ko, ki = s[CF].split(CF.op.reduce_axis[0], 16)
    s[CF].reorder(ko, ci, cj, ki)
    for T in (AF, BF, AS, BS):
        s[T].compute_at(s[CF], ko)
    for T in (AS, BS):
        if pad is not None:
            s[T].storage_align(T.op.axis[0], 16, pad)
        fetch_by_the_block(s, T)
    s[AF].tensorize(AF.op.axis[0], user_load("wmma.matrix_a"))
    s[BF].tensorize(BF.op.axis[0], user_load("wmma.matrix_b", "col_major" if b_transposed else "row_major"))
    s[CF].tensorize(ci, user_gemm(b_transposed))
    s[C].tensorize(fi, user_store())
    return s, [A, B, C]


def halves(shape, seed):
    """float16 values that products and sums of a few hundred keep exact in float32."""
    return (np.random.default_rng(seed).integers(-4, 5, size=shape) / 4).astype("float16")


def run_on_cpu(s, args, *ins, out_shape, out_dtype="float32"):
    kernel, _ = prepare_kernel(autosched.lower(s, args))
    out = np.full(out_shape, np.nan, out_dtype)
    autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(*ins, out)
    return out


@pytest.mark.parametrize("b_transposed", [False, True], ids=["B", "B^T (col_major)"])
def test_tvm_style_tensor_core_matmul_computes_the_product(b_transposed):
    s, args = user_matmul(64, b_transposed)
    a, b = halves((64, 64), 0), halves((64, 64), 1)
    want = a.astype(np.float64) @ (b.T if b_transposed else b).astype(np.float64)
    np.testing.assert_array_equal(run_on_cpu(s, args, a, b, out_shape=(64, 64)), want)


def test_a_partial_block_of_warps_skips_its_tiles_but_not_the_copies():
    """48 x 48 in blocks of 2 x 2 warps: the last block's second row and column of warps are past the end.
    Their guard stays outside the 16x16 tiles (it is decided at the warp), they still help fill the shared
    tiles and reach every barrier, and they load, multiply and store nothing."""
    s, args = user_matmul(48)
    a, b = halves((48, 48), 0), halves((48, 48), 1)
    np.testing.assert_array_equal(run_on_cpu(s, args, a, b, out_shape=(48, 48)),
                                  a.astype(np.float64) @ b.astype(np.float64))


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tvm_style_tensor_core_ptx_has_the_warp_matrix_instructions(arch):
    ptx = autosched.build(*user_matmul(64, True), target=f"cuda -arch={arch}").get_source("ptx")
    assert "wmma.load.a.sync.aligned.row.m16n16k16.shared.f16" in ptx
    assert "wmma.load.b.sync.aligned.col.m16n16k16.shared.f16" in ptx
    assert "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32" in ptx
    assert "wmma.store.d.sync.aligned.row.m16n16k16" in ptx and "bar.sync" in ptx
    assert ptxas_registers(ptxas_check(ptx, arch))


def test_an_output_written_only_by_warp_stores_is_copied_back_from_the_gpu():
    """C's only writes are wmma.store builtins, not element stores: the host function must still list it
    among the outputs it downloads after the launch (on an H200 C came back all zeros)."""
    func = autosched.build(*user_matmul(64, True), target="cuda -arch=sm_80")["main"]
    assert [func.sig["args"][k]["name"] for k in func.sig["outputs"]] == ["C"]
    task = autosched.Task("matmul_mixed", dict(M=64, N=64, K=64), target="cuda -arch=sm_80")
    trace = task.space("template").sample(1, np.random.default_rng(0))[0]  # (the runner checked garbage: every
    func = autosched.build(*task.apply(trace), target=task.target)["main"]  # tensor-core candidate was 'wrong')
    assert func.sig["outputs"] == [2]


def test_a_tvm_style_tensor_core_convolution_computes_the_convolution():
    """The blocked layout of TVM's tensor-core convolution example (batch and channels in 16-blocks, the
    fragments 6-D with 16x16 tiles innermost, the reductions over the window and the channel blocks split
    around the warp's tiles) at a small size."""
    nb, hw, cb, ob, kk = 2, 4, 2, 2, 3  # batch 32, 4x4 pixels, 32 -> 32 channels, 3x3 with padding 1
    A = te.placeholder((nb, hw, hw, cb, 16, 16), "float16", name="A")
    W = te.placeholder((kk, kk, cb, ob, 16, 16), "float16", name="W")
    Apad = te.compute((nb, hw + 2, hw + 2, cb, 16, 16), lambda n, h, w, i, nn, ii: tir.if_then_else(
        tir.all(h >= 1, h - 1 < hw, w >= 1, w - 1 < hw), A[n, h - 1, w - 1, i, nn, ii], tir.const(0.0, "float16")),
        name="Apad")
    kh, kw = te.reduce_axis((0, kk), name="kh"), te.reduce_axis((0, kk), name="kw")
    ic, ii = te.reduce_axis((0, cb), name="ic"), te.reduce_axis((0, 16), name="ii")
    Conv = te.compute((nb, hw, hw, ob, 16, 16), lambda n, h, w, o, nn, oo: te.sum(
        Apad[n, h + kh, w + kw, ic, nn, ii].astype("float32") * W[kh, kw, ic, o, ii, oo].astype("float32"),
        axis=[ic, kh, kw, ii]), name="Conv")
    s = te.create_schedule(Conv.op)
    s[Apad].compute_inline()
    AS, WS = s.cache_read(Apad, "shared", [Conv]), s.cache_read(W, "shared", [Conv])
    AF, WF = s.cache_read(AS, "wmma.matrix_a", [Conv]), s.cache_read(WS, "wmma.matrix_b", [Conv])
    ConvF = s.cache_write(Conv, "wmma.accumulator")
    n, h, w, o, nn, oo = Conv.op.axis
    pix = s[Conv].fuse(h, w)
    s[Conv].reorder(pix, n, o, nn, oo)
    s[Conv].bind(pix, te.thread_axis("blockIdx.z"))
    s[Conv].bind(n, te.thread_axis("threadIdx.y"))
    s[Conv].bind(o, te.thread_axis("threadIdx.z"))
    s[ConvF].compute_at(s[Conv], o)
    _, _, _, _, fn, fo = ConvF.op.axis
    ic, kh, kw, ii = ConvF.op.reduce_axis
    s[ConvF].reorder(ic, kh, kw, fn, fo, ii)
    for T in (AF, WF, AS, WS):
        s[T].compute_at(s[ConvF], kw)
    for T in (AS, WS):
        ax = T.op.axis
        fused = s[T].fuse(ax[-2], ax[-1])
        _, tx = s[T].split(fused, 32)
        s[T].bind(tx, te.thread_axis("threadIdx.x"))
    s[AF].tensorize(AF.op.axis[-2], user_load("wmma.matrix_a"))
    s[WF].tensorize(WF.op.axis[-2], user_load("wmma.matrix_b"))
    s[ConvF].tensorize(fn, user_gemm())
    s[Conv].tensorize(nn, user_store())
    a, wt = halves(A.shape, 2), halves(W.shape, 3)
    got = run_on_cpu(s, [A, W, Conv], a, wt, out_shape=tuple(int(d) for d in Conv.shape))
    x = a.astype(np.float64).transpose(0, 4, 1, 2, 3, 5).reshape(nb * 16, hw, hw, cb * 16)  # NHWC
    x = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    wk = wt.astype(np.float64).transpose(0, 1, 2, 4, 3, 5).reshape(kk, kk, cb * 16, ob * 16)
    want = sum(np.einsum("nhwc,co->nhwo", x[:, dy:dy + hw, dx:dx + hw], wk[dy, dx])
               for dy in range(kk) for dx in range(kk))
    want = want.reshape(nb, 16, hw, hw, ob, 16).transpose(0, 2, 3, 4, 1, 5)
    np.testing.assert_array_equal(got, want)
    if ptxas_path() is not None:
        ptx = autosched.build(s, [A, W, Conv], target="cuda -arch=sm_80").get_source("ptx")
        assert ptx.count("wmma.mma.sync") >= 1 and "wmma.store.d" in ptx


@pytest.mark.parametrize("shape", [(32, 8, 16), (8, 32, 16)], ids=["m32n8k16", "m8n32k16"])
def test_blocked_matmuls_on_the_other_tile_shapes(shape):
    """A matmul in blocked layouts whose innermost tiles are the fragments (A: m x k, B: k x n, C: m x n
    tiles, as TVM's tensor-core batch matmul lays them out), with the ready intrinsics of each shape."""
    m, n, kt = shape
    bi, bj, bk = 4, 4, 4  # tiles of C along i and j, of the reduction
    A = te.placeholder((bi, bk, m, kt), "float16", name="A")
    B = te.placeholder((bk, bj, kt, n), "float16", name="B")
    k1, k2 = te.reduce_axis((0, bk), name="k1"), te.reduce_axis((0, kt), name="k2")
    C = te.compute((bi, bj, m, n), lambda i, j, ii, jj: te.sum(
        A[i, k1, ii, k2].astype("float32") * B[k1, j, k2, jj].astype("float32"), axis=[k1, k2]), name="C")
    s = te.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    AF, BF = s.cache_read(AS, "wmma.matrix_a", [C]), s.cache_read(BS, "wmma.matrix_b", [C])
    CF = s.cache_write(C, "wmma.accumulator")
    i, j, ii, jj = C.op.axis
    io, wi = s[C].split(i, factor=2)
    jo, wj = s[C].split(j, factor=2)
    s[C].reorder(io, jo, wi, wj, ii, jj)
    s[C].bind(io, te.thread_axis("blockIdx.y"))
    s[C].bind(jo, te.thread_axis("blockIdx.x"))
    s[C].bind(wi, te.thread_axis("threadIdx.z"))
    s[C].bind(wj, te.thread_axis("threadIdx.y"))
    s[CF].compute_at(s[C], wj)
    _, _, fi, fj = CF.op.axis
    ko, ki = s[CF].split(k1, factor=2)
    s[CF].reorder(ko, ki, fi, fj, k2)
    for T in (AF, BF):
        s[T].compute_at(s[CF], ki)
    for T in (AS, BS):
        s[T].compute_at(s[CF], ko)
        fetch_by_the_block(s, T)
    s[AF].tensorize(AF.op.axis[-2], wmma_load("a", shape=shape))
    s[BF].tensorize(BF.op.axis[-2], wmma_load("b", shape=shape))
    s[CF].tensorize(fi, wmma_mma(shape))
    s[C].tensorize(ii, wmma_store(shape))
    a, b = halves(tuple(int(d) for d in A.shape), 8), halves(tuple(int(d) for d in B.shape), 9)
    got = run_on_cpu(s, [A, B, C], a, b, out_shape=tuple(int(d) for d in C.shape))
    a2 = a.astype(np.float64).transpose(0, 2, 1, 3).reshape(bi * m, bk * kt)
    b2 = b.astype(np.float64).transpose(0, 2, 1, 3).reshape(bk * kt, bj * n)
    np.testing.assert_array_equal(got.transpose(0, 2, 1, 3).reshape(bi * m, bj * n), a2 @ b2)
    if ptxas_path() is not None:
        ptx = autosched.build(s, [A, B, C], target="cuda -arch=sm_80").get_source("ptx")
        assert f"wmma.mma.sync.aligned.row.row.m{m}n{n}k{kt}.f32.f32" in ptx


# --------------------------------------------------------------- the matmul_mixed template
MIXED = dict(M=128, N=128, K=64)


def test_the_template_space_computes_the_product():
    task = autosched.Task("matmul_mixed", MIXED, target="cuda")
    a, b = halves((128, 64), 4), halves((64, 128), 5)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for trace in task.space("template").sample(6, np.random.default_rng(0)):
        got = run_on_cpu(*task.apply(trace), a, b, out_shape=(128, 128))
        np.testing.assert_array_equal(got, want, err_msg=trace.dumps())


@needs_ptxas
def test_template_kernels_are_tensor_core_kernels_that_ptxas_accepts():
    """At 1024: shared tiles of A and B filled with 128-bit loads, rows padded, the warp's fragments loaded from
    shared memory and multiplied by wmma.mma.sync, the accumulators stored to C; sm_80 and sm_90."""
    task = autosched.Task("matmul_mixed", dict(M=1024, N=1024, K=1024), target="cuda -arch=sm_80")
    traces = task.space("template").sample(6, np.random.default_rng(0))
    padded = 0
    for trace in traces:
        ptx = autosched.build(*task.apply(trace), target=task.target).get_source("ptx")
        assert re.search(r"ld\.global\.nc\.v4\.b32", ptx)
        assert "wmma.load.a.sync.aligned.row.m16n16k16.shared.f16" in ptx
        assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in ptx
        assert "wmma.store.d.sync.aligned.row.m16n16k16" in ptx
        func = autosched.lower(*task.apply(trace))
        shared = [x.buffer for x in S.walk_stmts(func.body) if isinstance(x, S.Allocate) and x.buffer.scope == "shared"]
        assert len(shared) == 2
        padded += any(b.strides is not None for b in shared)
    assert padded  # rows a few halves longer than the tile: the warp's 16 rows spread over the banks
    trace = traces[0]
    for arch in ("sm_80", "sm_90"):
        sched = autosched.Task("matmul_mixed", dict(M=1024, N=1024, K=1024), target=f"cuda -arch={arch}")
        ptx = autosched.build(*sched.apply(trace), target=sched.target).get_source("ptx")
        regs = ptxas_registers(ptxas_check(ptx, arch))
        assert regs and all(r <= 255 for r in regs.values())


def test_double_buffered_tensor_core_tiles_are_pipelined_and_right():
    """With its shared tiles doubled, the WMMA kernel issues the next k step's global loads (into registers,
    ``X.next``) before this step's wmma builtins, stores them after, and still computes the product."""
    task = autosched.Task("matmul_mixed", MIXED, target="cuda")
    space = task.space("template")
    traces = [t for t in space.sample(24, np.random.default_rng(3)) if space.point_of(t)["double_buffer"]
              and space.point_of(t)["tile_k"][0] > 1]
    assert traces
    a, b = halves((128, 64), 6), halves((64, 128), 7)
    for trace in traces[:2]:
        kernel, _ = prepare_kernel(autosched.lower(*task.apply(trace)))
        staged = {x.buffer.name for x in S.walk_stmts(kernel.body) if isinstance(x, S.Allocate)}
        assert {"A.shared.next", "B.shared.next"} <= staged, "no pipelined loop"
        body = str(kernel)
        assert body.index("A.shared.next[") < body.index("tvm_mma_sync") < body.rindex("= A.shared.next[")
        got = run_on_cpu(*task.apply(trace), a, b, out_shape=(128, 128))
        np.testing.assert_array_equal(got, a.astype(np.float64) @ b.astype(np.float64), err_msg=trace.dumps())


@needs_ptxas
def test_candidates_build_in_worker_processes():
    """A worker replays the trace in a fresh process: the tensor-core intrinsics it names are declared there
    on demand."""
    task = autosched.Task("matmul_mixed", MIXED, target="cuda -arch=sm_80")
    inps = [MeasureInput(task, t) for t in task.space("template").sample(2, np.random.default_rng(1))]
    with LocalBuilder(n_parallel=1) as b:
        results = b.build(inps)
    assert all(r.error_kind is None for r in results), results


def test_a_trace_names_its_intrinsics_and_replays_where_they_were_never_declared():
    task = autosched.Task("matmul_mixed", MIXED, target="cuda")
    trace = task.space("template").sample(1, np.random.default_rng(2))[0]
    names = [n for n in list(te_intrin._INTRINSICS) if n.startswith("wmma.")]
    assert set(names) >= {wmma_load("a").name, wmma_load("b").name, wmma_mma().name, wmma_store().name}
    for n in names:
        del te_intrin._INTRINSICS[n]
    sch, args = task.apply(Trace.loads(trace.dumps()))
    assert "tvm_mma_sync" in str(autosched.lower(sch, args))


@pytest.fixture(scope="module")
def dense_f16():
    """A dense layer in float16 (weights [out, in]: B read transposed), registered for this module."""
    @autosched.register_workload("test_dense_f16", override=True)
    def dense(N=64, CI=64, CO=128):
        x = te.placeholder((N, CI), "float16", name="x")
        w = te.placeholder((CO, CI), "float16", name="w")
        k = te.reduce_axis((0, CI), name="k")
        y = te.compute((N, CO), lambda i, j: te.sum(x[i, k].astype("float32") * w[j, k].astype("float32"), axis=k),
                       name="y")
        return [x, w, y]

    return "test_dense_f16"


@pytest.fixture(scope="module")
def batched_f16():
    """Attention's scores in float16: Q [b, n, d] times K [b, n, d] transposed, summed in float32."""
    @autosched.register_workload("test_batched_f16", override=True)
    def scores(B=2, N=32, D=48):
        q = te.placeholder((B, N, D), "float16", name="q")
        k = te.placeholder((B, N, D), "float16", name="k")
        d = te.reduce_axis((0, D), name="d")
        s = te.compute((B, N, N), lambda b, i, j: te.sum(q[b, i, d].astype("float32") * k[b, j, d].astype(
            "float32"), axis=d), name="s")
        return [q, k, s]

    return "test_batched_f16"


@pytest.mark.parametrize("which", ["matmul_mixed", "dense", "batched"])
def test_the_generated_space_reaches_tensor_cores_for_any_mixed_matmul(which, dense_f16, batched_f16):
    """The generated space's gpu_tensor_core rule recognises C = A @ B, A @ B^T and their batched form in
    float16 (any te computation of that form), most of its samples are WMMA kernels, and every sample
    computes the product."""
    name, args = {"matmul_mixed": ("matmul_mixed", dict(M=128, N=64, K=64)), "dense": (dense_f16, {}),
                  "batched": (batched_f16, {})}[which]
    task = autosched.Task(name, args, target="cuda -arch=sm_80")
    ins = [halves(tuple(int(d) for d in t.shape), k) for k, t in enumerate(task.tensors()[:-1])]
    a, b = (x.astype(np.float64) for x in ins)
    want = a @ (b if which == "matmul_mixed" else np.swapaxes(b, -1, -2))
    wmma = 0
    for trace in task.space("generated").sample(6, np.random.default_rng(0)):
        sch, targs = task.apply(trace)
        np.testing.assert_array_equal(run_on_cpu(sch, targs, *ins, out_shape=want.shape), want, err_msg=trace.dumps())
        if ptxas_path() is not None:
            wmma += "wmma.mma.sync" in autosched.build(sch, targs, target=task.target).get_source("ptx")
    assert wmma >= 3 or ptxas_path() is None


def test_tensor_cores_stay_out_of_float32_and_pre_volta_spaces():
    """The rule leaves float32 matmuls and GPUs without tensor cores (sm_61) to the other rules."""
    for name, target in (("matmul", "cuda -arch=sm_80"), ("matmul_mixed", "cuda -arch=sm_61")):
        args = dict(M=64, N=64, K=64)
        task = autosched.Task(name, args, target=target)
        for trace in task.space("generated").sample(4, np.random.default_rng(0)):
            assert "tensorize" not in trace.dumps() and "wmma" not in trace.dumps()


# --------------------------------------------------------------- errors
def test_a_warp_operation_that_depends_on_threadidx_x_is_refused():
    s, args = user_matmul(64, warp_axis="threadIdx.x")
    with pytest.raises(ScheduleError, match="threads of a warp"):
        prepare_kernel(autosched.lower(s, args))


def test_a_tile_off_32_bytes_is_refused():
    s, args = user_matmul(64, pad=4)  # rows of 20 halves: 40 bytes apart
    with pytest.raises(ScheduleError, match="multiple of 8 float16 elements"):
        prepare_kernel(autosched.lower(s, args))


def test_tensor_cores_before_sm_70_are_refused():
    with pytest.raises(CodegenError, match="sm_70"):
        autosched.build(*user_matmul(64), target="cuda -arch=sm_61")


def test_a_fragment_written_element_by_element_is_refused_on_the_gpu():
    A = te.placeholder((16, 16), "float16", name="A")
    C = te.compute((16, 16), lambda i, j: A[i, j] * 2, name="C")
    s = te.create_schedule(C.op)
    AF = s.cache_read(A, "wmma.matrix_a", [C])
    bx, _ = s[C].split(C.op.axis[0], 16)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[AF].compute_at(s[C], bx)
    with pytest.raises((CodegenError, ScheduleError), match="fragment"):
        autosched.build(s, [A, C], target="cuda -arch=sm_80")


def test_an_unknown_builtin_names_the_known_ones():
    with pytest.raises(ValueError, match="tir.tvm_mma_sync"):
        tir.call_intrin("handle", "tir.tvm_bmma_sync", 0)


# --------------------------------------------------------------- on a GPU
@needs_gpu
def test_tensor_core_kernels_run_on_the_gpu_and_equal_numpy():
    s, args = user_matmul(64, True)
    a, b = halves((64, 64), 0), halves((64, 64), 1)
    c = np.zeros((64, 64), "float32")
    autosched.build(s, args, target="cuda")(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.T.astype(np.float64))
    task = autosched.Task("matmul_mixed", dict(M=256, N=256, K=256), target="cuda")
    a, b = halves((256, 256), 2), halves((256, 256), 3)
    for trace in task.space("template").sample(4, np.random.default_rng(0)):
        c = np.zeros((256, 256), "float32")
        autosched.build(*task.apply(trace), target=task.target)(a, b, c)
        np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64), err_msg=trace.dumps())
