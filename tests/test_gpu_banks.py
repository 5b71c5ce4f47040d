"""Shared-memory bank conflicts, counted on lowered kernels without a GPU (autosched.tir.banks), and the
generated cuda space's rule that pads shared rows where they conflict."""

import numpy as np
import pytest

import autosched
from _cpus import SERIAL_CPU
from autosched import te
from autosched.cli import main
from autosched.codegen.nvptx import ptxas_check, ptxas_path
from autosched.database import Database
from autosched.result import MeasureResult
from autosched.space.gpu_rules import ROW_PADDINGS
from autosched.te.trace import Trace
from autosched.tir.banks import bank_conflicts, shared_passes
from autosched.tir.gpu import serialize_bindings
from autosched.tir.lower import lower
from autosched.workloads.reference import get_reference

TARGET = "cuda -arch=sm_80"


def transpose(pad=None, vector=1, dtype="float32"):
    """B = A^T through a 32 x 32 shared tile: the tile is filled row by row (threadIdx.x along a row) and read
    down a column (threadIdx.x along the column), the classic case of a 32-way conflict."""
    n = 64
    A = te.placeholder((n, n), dtype, name="A")
    B = te.compute((n, n), lambda i, j: A[j, i], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    i, j = s[B].op.axis
    bi, ti = s[B].split(i, factor=32)
    bj, tj = s[B].split(j, factor=32)
    s[B].reorder(bi, bj, ti, tj)
    s[B].bind(bi, te.thread_axis("blockIdx.y"))
    s[B].bind(bj, te.thread_axis("blockIdx.x"))
    s[B].bind(tj, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], bj)
    y, x = s[AA].op.axis
    if vector > 1:
        x, v = s[AA].split(x, factor=vector)
        s[AA].vectorize(v)
    s[AA].bind(x, te.thread_axis("threadIdx.x"))
    if pad is not None:
        s[AA].storage_align(y, *pad)
    return autosched.lower(s, [A, B], target=TARGET), (s, [A, B])


def test_a_column_read_of_a_shared_tile_is_a_32_way_conflict_and_an_odd_row_removes_it():
    func, _ = transpose()
    store, load = bank_conflicts(func)
    assert (store.write, store.wavefronts, store.ideal) == (True, 1, 1)  # a row: 32 banks side by side
    assert (load.write, load.wavefronts, load.ideal) == (False, 32, 1)  # a column: all rows on one bank
    assert load.conflict == 32
    func, _ = transpose(pad=(32, 1))  # rows of 33 floats: a column spreads over all the banks
    assert [a.conflict for a in bank_conflicts(func)] == [1, 1]


def test_vector_accesses_are_served_a_quarter_warp_at_a_time():
    """8 threads storing 4 consecutive floats each (128-bit stores) fill the 32 banks once: one pass. Rows
    of 36 floats (4 x an odd number) keep the vectors aligned; rows of 33 do not, and the model counts those
    stores element by element, as LLVM must emit them."""
    store = next(a for a in bank_conflicts(transpose(vector=4)[0]) if a.write)
    assert (store.lanes, store.wavefronts, store.ideal, store.executions) == (4, 1, 1, 32)
    store = next(a for a in bank_conflicts(transpose(pad=(8, 4), vector=4)[0]) if a.write)
    assert (store.lanes, store.wavefronts) == (4, 1)
    store = next(a for a in bank_conflicts(transpose(pad=(32, 1), vector=4)[0]) if a.write)
    assert (store.lanes, store.executions) == (1, 32 * 4)


def test_a_128_bit_access_of_halves_is_eight_lanes():
    """A float16 tile copied 8 halves (16 bytes) at a time, as the tensor-core kernels' copies are: one
    access of 8 lanes per thread, each quarter warp's 16-byte accesses side by side: one pass."""
    store = next(a for a in bank_conflicts(transpose(vector=8, dtype="float16")[0]) if a.write)
    assert (store.lanes, store.wavefronts, store.ideal) == (8, 1, 1)


def test_a_broadcast_is_one_pass():
    """Every thread of a warp reading one word of shared memory is served at once."""
    n = 32
    A = te.placeholder((n,), name="A")
    B = te.compute((n, n), lambda i, j: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    i, j = s[B].op.axis
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    s[B].bind(j, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], i)
    s[AA].bind(s[AA].op.axis[0], te.thread_axis("threadIdx.x"))
    load = next(a for a in bank_conflicts(autosched.lower(s, [A, B], target=TARGET)) if not a.write)
    assert (load.wavefronts, load.ideal) == (1, 1)


CONV = ("conv2d", dict(H=56, W=56, CI=64, CO=64, layout="NCHW"))


def test_the_generated_space_pads_rows_only_where_that_takes_fewer_passes():
    """NCHW convolutions read their shared input tile rows apart: many sampled candidates conflict, and the
    rule pads those (fewer passes than without, counted as the rule counts them: on the loops before
    partitioning); an unpadded candidate is one no padding helps."""
    name, args = CONV
    task = autosched.Task(name, args, target=TARGET)
    traces = task.space("generated").sample(30, np.random.default_rng(0))
    padded = [t for t in traces if any(step.kind == "storage_align" for step in t.steps)]
    assert padded, "no sampled NCHW convolution was padded"
    for trace in padded:
        bare = Trace([step for step in trace.steps if step.kind != "storage_align"])
        before = shared_passes(lower(*task.apply(bare), partition=False))
        after = shared_passes(lower(*task.apply(trace), partition=False))
        assert sum(p for p, _ in after.values()) < sum(p for p, _ in before.values()), trace.dumps()
    for trace in [t for t in traces if t not in padded][:6]:
        base = shared_passes(lower(*task.apply(trace), partition=False))
        sch, _ = task.apply(trace)
        for k, st in enumerate(sch.stages):
            if st.scope != "shared" or st.name not in base:
                continue
            for pad in ROW_PADDINGS:
                tried, args = task.apply(trace)
                tried.stages[k].storage_align(tried.stages[k].op.axis[-2], *pad)
                assert shared_passes(lower(tried, args, partition=False))[st.name][0] >= base[st.name][0], pad


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA's PTX assembler) is not installed")
def test_a_padded_candidate_computes_the_right_thing_and_assembles():
    name, args = CONV
    task = autosched.Task(name, args, target=TARGET)
    cpu = autosched.Task(name, args)
    traces = task.space("generated").sample(30, np.random.default_rng(0))
    trace = next(t for t in traces if any(step.kind == "storage_align" for step in t.steps))
    rng = np.random.default_rng(0)
    ins = [(rng.integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8.0).astype("float32")
           for t in cpu.tensors()[:-1]]
    want = get_reference(name)([a.astype(np.float64) for a in ins], **cpu.args).astype("float32")
    got = np.full(want.shape, np.nan, "float32")
    func = autosched.lower(*task.apply(trace), target=task.target)
    autosched.build(serialize_bindings(func), target=SERIAL_CPU)(*ins, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=trace.dumps())
    ptxas_check(autosched.build(*task.apply(trace), target=task.target).get_source("ptx"), "sm_80")


def test_db_best_show_prints_a_gpu_kernels_launch_banks_pipeline_and_loops(tmp_path, capsys):
    """``autosched db best --show`` of a cuda record: what the tuner found, as a performance engineer reads it."""
    task = autosched.Task("matmul", dict(M=256, N=256, K=256), target="cuda -arch=sm_90")
    space = task.space("template")
    point = {**space.point_at(0), "tile_i": (2, 16, 8), "tile_j": (4, 16, 4), "tile_k": (16, 16), "shared": True,
             "vector_fetch": 4, "unroll_k": True, "double_buffer": True}
    with Database(tmp_path / "gpu.db") as db:
        db.commit(task, space.generate(point)[0], MeasureResult(costs=[2e-5, 2e-5, 2e-5]))
    assert main(["db", "best", "--db", str(tmp_path / "gpu.db"), "--target", "cuda -arch=sm_90", "--show"]) == 0
    out = capsys.readouterr().out
    assert "launch: (4, 2, 1) blocks x (16, 16, 1) threads, 24,576 bytes of shared memory per block" in out
    assert "A.shared 1.00x the conflict-free passes" in out
    assert "double-buffered, the next tile loaded during this one: A.shared, B.shared" in out
    assert ("registers per thread (ptxas, sm_90): main " in out) == (ptxas_path() is not None)
    assert "primfn main(" in out and "__syncthreads()" in out
