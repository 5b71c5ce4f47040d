"""The CPU target description (``Target.cpu``) and code that stays correct on every ISA: AVX2 and AVX-512
builds (``-mcpu=haswell``, ``-mcpu=skylake-avx512``) are compiled on any host and run where the host can."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from _cpus import host_runs
from autosched import te
from autosched.errors import ScheduleError
from autosched.target import Target
from autosched.tir.gpu import prepare_kernel
from autosched.tir.lower import lower
from autosched.workloads.reference import get_reference
from autosched.workloads.tile_sizes import conv_tile, matmul_tile

AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"


@pytest.mark.parametrize("cpu,vector_bytes,registers,fma", [
    ("haswell", 32, 16, True),
    ("znver3", 32, 16, True),
    ("skylake-avx512", 64, 32, True),
    ("znver4", 64, 32, True),
    ("sapphirerapids", 64, 32, True),
    ("sandybridge", 32, 16, False),
    ("x86-64", 16, 16, False),
])
def test_named_cpus_are_described_from_llvm(cpu, vector_bytes, registers, fma):
    d = Target(f"llvm -mcpu={cpu}").cpu
    assert (d.name, d.vector_bytes, d.vector_registers, d.fma) == (cpu, vector_bytes, registers, fma)
    assert d.lanes("float32") == vector_bytes // 4 and d.lanes("float64") == vector_bytes // 8
    assert d.l1d_bytes >= 16 << 10 and d.l2_bytes > d.l1d_bytes and d.cores >= 1


def test_mattr_overrides_the_cpu_and_cores_come_from_the_target():
    assert Target("llvm -mcpu=znver4 -mattr=-avx512f").cpu.vector_bytes == 32
    assert Target("llvm -mcpu=haswell -num-cores=6").cpu.cores == 6
    host = Target("llvm").cpu
    assert host.vector_bytes in (16, 32, 64) and host.cores >= 1
    assert host.name in str(host) and f"{host.vector_bytes * 8}-bit" in str(host)


def test_opt_level_sets_llvms_pipeline():
    """``-opt-level`` (TVM's spelling) picks LLVM's -O level: code whose speed is moot (a GPU grid run on the
    CPU in a test) compiles faster at 0, and is as right; the default is -O3, and other values are refused."""
    assert Target("llvm").opt_level == 3 and Target("llvm -opt-level=0").opt_level == 0
    with pytest.raises(ValueError, match="-opt-level must be 0, 1, 2 or 3"):
        Target("llvm -opt-level=fast")
    A = te.placeholder((1024,), name="A")
    B = te.compute((1024,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    a = np.arange(1024, dtype="float32")
    irs = []
    for target in ("llvm -opt-level=0", "llvm"):
        mod = autosched.build(s, [A, B], target=target)
        b = np.zeros(1024, "float32")
        mod(a, b)
        np.testing.assert_array_equal(b, a * 2 + 1)
        irs.append(mod.opt_ir)
    assert "x float>" not in irs[0] and "x float>" in irs[1]  # only -O3 vectorised the loop


def test_current_target_is_the_innermost_with_block():
    assert Target.current(allow_none=True) is None
    assert Target.current().kind == "llvm"
    with Target(AVX2) as outer:
        assert Target.current() is outer
        with Target(AVX512) as inner:
            assert Target.current() is inner
        assert Target.current() is outer
    assert Target.current(allow_none=True) is None


def test_cuda_target_has_no_cpu_description():
    with pytest.raises(ValueError, match="not a CPU target"):
        _ = Target("cuda").cpu


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_wide_masked_padding_is_exact_on_each_isa(target):
    """A 16-lane vectorized pad with a partial last vector (57 = 3 x 16 + 9 columns). Built for AVX2 as one
    <16 x float> masked load, LLVM split it into two 8-lane halves and the all-false upper half read the next
    row instead of the padding zero (SqueezeNet's logits were off by 1e30); the code generator now emits
    vectors of the target's native width."""
    A = te.placeholder((2, 5, 55), name="A")
    P = te.compute((2, 7, 57), lambda c, y, x: te.if_then_else(
        te.all(y >= 1, y < 6, x >= 1, x < 56), A[c, y - 1, x - 1], 0.0), name="pad")
    s = te.create_schedule(P.op)
    c, y, x = s[P].op.axis
    s[P].parallel(s[P].fuse(c, y))
    _, xi = s[P].split(x, factor=16)
    s[P].vectorize(xi)
    f = autosched.build(s, [A, P], target=target, name="pad")
    assert "<16 x float>" not in f.get_source("ll") or Target(target).cpu.vector_bytes == 64
    if not host_runs(target):
        return
    a = np.random.default_rng(0).standard_normal((2, 5, 55)).astype("float32")
    out = np.full((2, 7, 57), 7.0, "float32")
    f(a, out)
    np.testing.assert_array_equal(out, np.pad(a, ((0, 0), (1, 1), (1, 1))))


def assert_kernel_close(name: str, out, ref) -> None:
    """Within 1e-4; a Winograd kernel's rounding error scales with the magnitude of the whole tile (its
    transforms add and subtract neighbours), so there the absolute bound is relative to the largest output."""
    atol = 1e-5 * float(np.abs(ref).max()) if "winograd" in name else 1e-4
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=max(atol, 1e-4))


# the kernels of benchmarks/bench_kernels.py, at test sizes: each default schedule, built for AVX2 and AVX-512
KERNELS = [
    ("matmul", dict(M=96, N=128, K=64)),
    ("conv2d_nchwc", dict(CI=32, H=14, W=14, CO=32)),
    ("conv2d_nchwc", dict(CI=32, H=14, W=14, CO=64, KH=1, KW=1, stride=2, padding=0)),
    ("conv2d_nchwc", dict(CI=3, H=30, W=30, CO=32, KH=7, KW=7, stride=2, padding=3)),
    ("conv2d_nchwc", dict(CI=32, H=9, W=9, CO=32, groups=2)),
    ("depthwise_conv2d_nchwc", dict(C=32, H=13, W=13)),
    ("depthwise_conv2d_nchwc", dict(C=48, H=14, W=14, stride=2)),
    ("dense_pack", dict(N=1, CI=64, CO=200)),
    ("pool2d_nchwc", dict(C=32, H=15, W=15)),
    ("pool2d_nchwc", dict(C=16, H=14, W=14, pool_type="avg")),
    ("softmax", dict(M=2, N=1000)),
    ("conv2d_winograd_nchwc", dict(CI=32, H=14, W=14, CO=32)),
    ("conv2d_winograd_nchwc", dict(CI=32, H=7, W=7, CO=64, tile=2)),
]


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("name,args", KERNELS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(KERNELS)])
def test_default_kernels_are_correct_and_gather_free_on_each_isa(name, args, target):

    task = autosched.Task(name, args, target=target)
    sch, targs = task.default_schedule()
    f = autosched.build(sch, targs, target=target)
    ir = f.get_source("ll")
    assert "masked.gather" not in ir and "masked.scatter" not in ir, f"{task} gathers on its hot loops"
    lanes = Target(target).cpu.lanes("float32")  # (a block of 8 channels fills half an AVX-512 vector)
    assert f"<{lanes} x float>" in ir or f"<{lanes // 2} x float>" in ir, f"{task} is not vectorized"
    assert f"<{2 * lanes} x float>" not in ir, "vectors wider than the target's are legalised badly by LLVM"
    if not host_runs(target):
        return
    rng = np.random.default_rng(1)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype) for t in targs[:-1]]
    out = np.zeros([int(d) for d in targs[-1].shape], targs[-1].dtype)
    f(*ins, out)
    assert_kernel_close(name, out, get_reference(name)(ins, **task.args))


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("name,args", [("conv2d", dict(H=7, W=7, CI=8, CO=16)),
                                       ("depthwise_conv2d", dict(C=16, H=6, W=6))])
def test_nchw_pads_with_rows_shorter_than_a_vector_copy_rows(name, args, target):
    """The padded input of an NCHW convolution whose rows are shorter than a vector is copied a row (one short
    vector) at a time, rows in parallel: rows fused into whole vectors would read the unpadded input by
    gathers. The same nest (conv2d's direct form) schedules relay's NCHW convolutions."""

    task = autosched.Task(name, args, target=target)
    if name == "conv2d":  # the direct form, whatever the target's default (the packed form copies its weights)
        sch, targs = task.apply(task.space("template").generate({"layout": "direct"})[0])
    else:
        sch, targs = task.default_schedule()
    f = autosched.build(sch, targs, target=target)
    ir = f.get_source("ll")
    assert "masked.gather" not in ir and "masked.scatter" not in ir, f"{task} gathers"
    assert not f.unhonoured, f.unhonoured
    if not host_runs(target):
        return
    rng = np.random.default_rng(2)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype) for t in targs[:-1]]
    out = np.zeros([int(d) for d in targs[-1].shape], targs[-1].dtype)
    f(*ins, out)
    assert_kernel_close(name, out, get_reference(name)(ins, **task.args))


def test_blocked_layouts_follow_the_target():
    assert autosched.Task("conv2d_nchwc", target=AVX512).args["oc_block"] == 16
    assert autosched.Task("conv2d_nchwc", target=AVX2).args["oc_block"] == 8
    stem = autosched.Task("conv2d_nchwc", dict(CI=3, KH=7, KW=7, stride=2, padding=3), target=AVX2)
    assert stem.args["ic_block"] == 1 and stem.tensors()[0].shape[-1].value == 1  # reads NCHW directly
    assert autosched.Task("dense_pack", dict(CO=1000), target=AVX512).args["block"] == 8
    with pytest.raises(ValueError, match="ic_block must be a positive divisor of 64"):
        autosched.Task("conv2d_nchwc", dict(ic_block=24)).tensors()


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_register_tiles_fit_the_registers(target):

    cpu = Target(target).cpu
    with Target(target):
        rows, cols = matmul_tile(1024, 1024)
        vectors = cols // cpu.lanes()
        assert rows * vectors + vectors + 1 <= cpu.vector_registers and rows * vectors >= 8
        for h, w in ((56, 56), (14, 14), (7, 7), (13, 13)):
            blocks, rows, pixels = conv_tile(h, w, 512 // cpu.lanes(), cpu.lanes())
            acc = blocks * rows * pixels
            assert acc + blocks + 1 <= cpu.vector_registers and acc >= 8, (h, w, blocks, rows, pixels)


def test_conv_tiles_take_a_partial_tile_for_more_accumulators_and_weight_reuse():
    """The blocked convolution's register tile (measured, docs/measured_choices.md): on AVX2 two blocks of 8
    channels by 5 or 6 pixels (a partial tile at the end of a 14- or 56-wide row) rather than 4 blocks by 2
    pixels, which load a weight vector for every 2 FMAs; on AVX-512 2 x 14 as before, and 2 x 7 on a 7-wide
    image rather than 4 blocks of 4 pixels; rows stack only where they divide the height. The conv2d template
    offers every tile that fits, partial or not, so the default is one of its points."""

    with Target(AVX2):
        assert conv_tile(14, 14, 32, 8) == (2, 1, 5) and conv_tile(56, 56, 8, 8) == (2, 1, 6)
        assert conv_tile(7, 7, 64, 8) == (2, 1, 4)
    with Target(AVX512):
        assert conv_tile(56, 56, 4, 16) == (2, 1, 14) and conv_tile(14, 14, 16, 16) == (2, 1, 14)
        assert conv_tile(7, 7, 32, 16) == (2, 1, 7) and conv_tile(7, 7, 1, 16)[1] == 1
    task = autosched.Task("conv2d", dict(H=14, W=14, CI=256, CO=256), AVX2)
    knob = next(k for k in task.space("template").knobs if k.name == "register_tile")
    assert [2, 1, 5] in [list(t) for t in knob.candidates] and [4, 1, 2] in [list(t) for t in knob.candidates]
    assert list(task.space("template").point_of(task.default_trace())["register_tile"]) == [2, 1, 5]


@pytest.mark.parametrize("target,unroll", [(AVX2, 4), (AVX512, 1)])
def test_the_packed_conv2d_reads_its_padding_in_place_and_unrolls_only_small_tiles(target, unroll):
    """The packed NCHW convolution's defaults (measured, docs/measured_choices.md): a stride-1 layer reads its
    padding in place, a strided one copies it; the channels of an input block are unrolled by 4 only while
    the unrolled step stays within UNROLLED_FMAS (AVX2's 2 x 5 tile: 40 FMAs; AVX-512's 2 x 14: 28 x 4)."""
    task = autosched.Task("conv2d", dict(H=14, W=14, CI=256, CO=256), target)
    point = task.space("template").point_of(task.default_trace())
    assert (point["layout"], point["pad"], point["unroll_ib"]) == ("packed", "inline", unroll)
    stem = autosched.Task("conv2d", dict(H=64, W=64, CI=16, CO=32, KH=3, KW=3, stride=2, padding=1), AVX2)
    assert stem.space("template").point_of(stem.default_trace())["pad"] == "root"


@pytest.mark.parametrize("kind,name,args", [
    ("template", *KERNELS[1]), ("template", *KERNELS[5]),
    ("generated", *KERNELS[1]), ("generated", *KERNELS[-2]), ("generated", *KERNELS[-1]),
], ids=["conv2d_nchwc-template", "depthwise-template", "conv2d_nchwc-generated", "winograd-generated",
        "winograd_f2-generated"])
def test_blocked_spaces_give_correct_kernels(kind, name, args):
    """The template spaces, and the generated spaces whose sketch rules build the expert nests
    (space/blocked_rules.py: a Winograd kernel's transforms are unrolled, not inlined into one another)."""

    task = autosched.Task(name, args)
    space = task.space(kind)
    rng = np.random.default_rng(0)
    for trace in space.sample(6, rng):
        sch, targs = task.apply(trace)
        f = autosched.build(sch, targs)
        ins = [rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype) for t in targs[:-1]]
        out = np.zeros([int(d) for d in targs[-1].shape], targs[-1].dtype)
        f(*ins, out)
        assert_kernel_close(name, out, get_reference(name)(ins, **task.args))


def test_a_cuda_target_describes_its_gpu():
    """Target.gpu: the limits of the arch that the GPU rules and the space's prior read."""
    from dataclasses import replace


    h100 = Target("cuda -arch=sm_90").gpu
    assert (h100.warp_size, h100.max_threads_per_block, h100.registers_per_block) == (32, 1024, 65536)
    assert h100.shared_bytes_per_block == 48 * 1024 and h100.shared_bytes_opt_in == 227 * 1024
    assert Target("cuda -arch=sm_87").gpu.shared_bytes_opt_in == 99 * 1024  # described as its older neighbour
    assert h100.coalesced_run(4) == 8
    with pytest.raises(ValueError, match="not a GPU target"):
        _ = Target("llvm").gpu
    with pytest.raises(ValueError, match="unknown GPU architecture"):
        _ = Target("cuda -arch=compute_90").gpu
    A = te.placeholder((512,), name="A")
    B = te.compute((512,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(s[B].op.axis[0], te.thread_axis("threadIdx.x"))
    prepare_kernel(lower(s, [A, B]), h100)
    with pytest.raises(ScheduleError, match="at most 256"):
        prepare_kernel(lower(s, [A, B]), replace(h100, max_threads_per_block=256))
