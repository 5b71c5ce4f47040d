"""The default GPU schedules relay builds (autosched/relay/op/cuda_schedules.py), without a GPU: transformer
blocks (an encoder layer with a padding mask, a decoder layer with a causal mask) and a ResNet-50-shaped CNN
built for cuda, their PTX assembled by ``ptxas`` for sm_80 and sm_90, and every kernel's grid run serially on
the CPU (``serialize_bindings``) in the model's graph against onnxruntime; softmax and LayerNorm as block-wide
reductions (one block per row, the row's statistics computed once: work linear in the row); conv2d and dense
as tiled GEMMs (both operands in shared memory, a register tile of several rows and columns per thread)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import autosched  # noqa: E402
from _cpus import SERIAL_CPU  # noqa: E402
from _onnx_models import GraphBuilder, make_resnet50, make_single_op, random_inputs, run_onnxruntime  # noqa: E402
from _transformer_models import make_decoder, make_encoder, make_typed_op, token_inputs  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.codegen.nvptx import ptxas_path  # noqa: E402
from autosched.te import expr as E  # noqa: E402
from autosched.tir import stmt as S  # noqa: E402
from autosched.tir.banks import bank_conflicts  # noqa: E402

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA's PTX assembler) is not installed")
ARCHS = ("sm_80", "sm_90")


def cuda_kernels(model, inputs):
    """The model's cuda kernels (lowered, default schedules, launch checked) and the graph that runs them."""
    from autosched.relay.backend.build_module import _GraphBuilder, optimize
    from autosched.target import Target
    from autosched.tir.gpu import prepare_kernel

    mod, params = relay.frontend.from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    with Target("cuda"):
        fused = optimize(mod, params)
    gb = _GraphBuilder(fused["main"], "cuda", use_records=False)
    graph_json = gb.run()
    return [prepare_kernel(f) for f in gb.prims], graph_json, gb.params, (mod, params)


def serial_error(model, inputs) -> tuple[float, list]:
    """Every kernel's grid run serially on the CPU, in the model's graph: the largest difference from
    onnxruntime relative to the output's largest magnitude, and the kernels with their launches."""
    from autosched.codegen.build import build_many
    from autosched.runtime.graph_executor import GraphModule
    from autosched.tir.gpu import serialize_bindings

    kernels, graph_json, params, _ = cuda_kernels(model, inputs)
    lib = build_many([serialize_bindings(k) for k, _ in kernels], SERIAL_CPU)
    m = GraphModule(graph_json, lib, params)
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    got, ref = np.asarray(m.get_output(0)), run_onnxruntime(model, inputs)[0]
    assert got.shape == ref.shape
    return float(np.abs(got - ref).max() / np.abs(ref).max()), kernels


def assemble(model, inputs) -> dict[str, int]:
    """relay.build for cuda on both architectures, ptxas on each: registers per kernel (sm_90's)."""
    import re

    from autosched.codegen.nvptx import ptxas_check

    mod, params = relay.frontend.from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    regs = {}
    for arch in ARCHS:
        _, lib, _ = relay.build(mod, target=f"cuda -arch={arch}", params=params)
        report = ptxas_check(lib.imported_modules[0].get_source(), arch)
        assert report.count("Compiling entry function") == len(lib.function_names)
        regs = {k: int(r) for k, r in re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", report,
                                                  re.S)}
    return regs


def executed(func: S.PrimFunc, match) -> int:
    """How many times the expressions ``match`` accepts are evaluated when every loop runs all its iterations
    (guards counted as taken: an upper bound), summed over the kernel's stores."""
    total = 0

    def visit(s, trips):
        nonlocal total
        if isinstance(s, S.For):
            trips *= int(s.extent)
        if isinstance(s, S.BufferStore):
            for e in S.stmt_exprs(s):
                total += trips * sum(1 for x in E.walk(e) if match(x))
        for c in S.stmt_children(s):
            visit(c, trips)

    visit(func.body, 1)
    return total


def is_exp(x) -> bool:
    return isinstance(x, E.Call) and x.name == "exp"


# ----------------------------------------------------------------------------------------- transformer blocks
def test_encoder_block_with_padding_mask_for_cuda_matches_onnxruntime():
    model = make_encoder(layers=1, d_model=64, heads=4, seq=16, vocab=100)
    err, kernels = serial_error(model, token_inputs(model, 16, 100, padding=5))
    assert err < 1e-4, f"largest difference {err:.2e} of the logits' scale"
    names = " ".join(k.name for k, _ in kernels)
    assert "layer_norm" in names and "softmax" in names and "batch_matmul" in names


def test_decoder_block_with_causal_mask_for_cuda_matches_onnxruntime():
    model = make_decoder(layers=1, d_model=64, heads=4, seq=16, vocab=100)
    err, _ = serial_error(model, token_inputs(model, 16, 100))
    assert err < 1e-4, f"largest difference {err:.2e} of the logits' scale"


@needs_ptxas
def test_transformer_blocks_assemble_for_sm80_and_sm90():
    for model in (make_encoder(layers=1, d_model=64, heads=4, seq=16, vocab=100),
                  make_decoder(layers=1, d_model=64, heads=4, seq=16, vocab=100)):
        regs = assemble(model, token_inputs(model, 16, 100))
        assert regs and max(regs.values()) <= 128, regs


# ----------------------------------------------------------------------------------------- the wider op set
def _activations_and_layouts():
    """Instance norm, Mish, a pixel shuffle, log-sum-exp, tile, sign, floor and round: the math calls (log, exp,
    tanh, rounding) and index arithmetic of the ops added for CNN, detector and super-resolution exports."""
    rng = np.random.default_rng(3)
    b = GraphBuilder(opset=18)
    b.init("s", (1 + 0.1 * rng.standard_normal(8)).astype("float32"))
    b.init("bb", (0.1 * rng.standard_normal(8)).astype("float32"))
    b.init("reps", np.array([1, 2, 1, 1], np.int64))
    b.init("three", np.array(3.0, np.float32))
    y = b.node("DepthToSpace", [b.node("Mish", [b.node("InstanceNormalization", ["x", "s", "bb"])])], blocksize=2)
    z = b.node("Tile", [b.node("ReduceLogSumExp", [y, b.init("ax", np.array([1], np.int64))]), "reps"])
    r = b.node("Round", [b.node("Mul", [y, "three"])])
    out = b.node("Add", [b.node("Add", [z, b.node("Sign", [y])]), b.node("Add", [b.node("Floor", [y]), r])])
    return b.model([("x", (1, 8, 6, 6))], [out])


def test_wider_op_set_for_cuda_matches_onnxruntime():
    model = _activations_and_layouts()
    err, _ = serial_error(model, random_inputs(model))
    assert err < 1e-4, f"largest difference {err:.2e} of the output's scale"


@needs_ptxas
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_for_cuda_matches_onnxruntime(mode):
    """grid_sample's positions (a stage at root) and its taps, each kernel's grid run serially on the CPU."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 5, 7)).astype(np.float32)
    grid = rng.uniform(-1.5, 1.5, (1, 4, 6, 2)).astype(np.float32)
    model = make_typed_op("GridSample", [("x", "float32", x.shape), ("grid", "float32", grid.shape)], opset=16,
                          mode=mode, padding_mode="reflection")
    err, kernels = serial_error(model, {"x": x, "grid": grid})
    assert err < 1e-5 and any("grid_sample" in k.name for k, _ in kernels)


def test_wider_op_set_assembles_for_sm80_and_sm90():
    model = _activations_and_layouts()
    assert assemble(model, random_inputs(model))
    argmax = make_typed_op("ArgMax", [("x", "float32", (4, 37))], opset=13, axis=1)
    assert assemble(argmax, random_inputs(argmax))


# ----------------------------------------------------------------------------------------- row reductions
def _row_model(op: str, rows: int, length: int):
    x = ("x", (2, rows // 2, length))
    if op == "softmax":
        return make_single_op("Softmax", [x], axis=-1)
    if op == "layer_norm":
        rng = np.random.default_rng(0)
        inits = {"g": (1 + 0.1 * rng.standard_normal(length)).astype("float32"),
                 "b": (0.1 * rng.standard_normal(length)).astype("float32")}
        return make_single_op("LayerNormalization", [x], initializers=inits, extra_inputs=["g", "b"], opset=17,
                              axis=-1, epsilon=1e-5)
    return make_single_op("ReduceMean", [x], axes=[-1], keepdims=1)


@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_softmax_and_layer_norm_are_block_wide_reductions_one_block_per_row(op):
    rows = 12
    counts = {}
    for length in (64, 256):
        model = _row_model(op, rows, length)
        inputs = random_inputs(model)
        err, kernels = serial_error(model, inputs)
        assert err < 1e-5
        (func, launch), = [(k, la) for k, la in kernels if op in k.name]
        assert launch.grid == (rows, 1, 1), launch  # one block per row
        nthreads = launch.block[0]
        assert launch.block[1:] == (1, 1) and 32 <= nthreads <= 256
        # the row statistics once per row: loads of the input and exps linear in the row's length (the old
        # one-thread-per-element schedule recomputed the row's max and sum for every element: quadratic)
        x = func.params[0]  # the input row tensor
        loads = executed(func, lambda e: isinstance(e, S.BufferLoad) and e.buffer is x)
        counts[length] = loads
        per_element = loads / (rows * length)
        assert per_element <= (3.5 if op == "softmax" else 8.5), per_element  # (layer_norm: x - x[0], squared)
        if op == "softmax":
            assert executed(func, is_exp) <= 2.5 * rows * length
        # the reductions are cross-thread: a shared row per block, combined by a halving tree
        shared = [s.buffer for s in S.walk_stmts(func.body) if isinstance(s, S.Allocate) and s.buffer.scope == "shared"]
        assert any(b.name.endswith(".red") for b in shared)
    assert counts[256] <= 4.5 * counts[64]  # linear in the row (quadratic would be 16x)


def test_row_means_and_global_pooling_reduce_a_row_per_warp():
    model = _row_model("mean", 12, 100)
    err, kernels = serial_error(model, random_inputs(model))
    assert err < 1e-5
    (_, launch), = [(k, la) for k, la in kernels if "mean" in k.name]
    assert launch.block[0] == 32 and launch.block[1] > 1  # a warp per row, several rows per block


# ----------------------------------------------------------------------------------------- CNN: tiled GEMMs
@pytest.fixture(scope="module")
def resnet50_small():
    model = make_resnet50(image=64, num_classes=10)
    return model, random_inputs(model)


def test_resnet50_shaped_model_kernels_on_the_cpu_match_onnxruntime(resnet50_small):
    model, inputs = resnet50_small
    err, kernels = serial_error(model, inputs)
    assert err < 1e-4, err
    for _, launch in kernels:
        assert launch.block[0] * launch.block[1] * launch.block[2] <= 1024 and launch.shared_bytes <= 48 * 1024
    # every conv2d with an output more than a pixel wide is a tiled GEMM: the input window and the weights in
    # shared memory, a register tile of output channels x rows per thread (at this small size one output: the
    # grid needs the threads), threadIdx.x along the output row
    tiled = 0
    for func, launch in kernels:
        out = func.params[-1]
        if "conv2d" not in func.name or int(out.shape[3]) < 4:
            continue
        shared = {s.buffer.name for s in S.walk_stmts(func.body)
                  if isinstance(s, S.Allocate) and s.buffer.scope == "shared"}
        assert len(shared) == 2, (func.name, shared)
        local = [s.buffer for s in S.walk_stmts(func.body) if isinstance(s, S.Allocate) and s.buffer.scope == "local"]
        dims = [int(d) for d in max(local, key=lambda b: b.const_size()).shape]
        assert dims[0] == 1 and dims[3] == 1, (func.name, dims)  # channels x rows, one column per thread
        assert launch.block[0] == min(16, int(out.shape[3])) or int(out.shape[3]) % launch.block[0] == 0
        tiled += 1
    assert tiled >= 15, tiled


def test_conv_tiles_of_resnet50_at_224():
    """The layers of ResNet-50 at batch 1: threads along a row dividing its width, a grid of 25,088+ threads,
    a register tile of several channels and rows where the layer is large enough to keep that many threads."""
    from autosched.relay.op.cuda_schedules import _conv_tile

    for co, hw in ((64, 112), (64, 56), (256, 56), (128, 28), (512, 28), (256, 14), (1024, 14), (512, 7), (2048, 7)):
        tx, ty, rn, rm = _conv_tile(co, hw, hw, 1)
        assert hw % tx == 0 and tx >= min(8, hw) and tx * ty <= 1024
        threads = (co // (ty * rm)) * -(-hw // rn) * (hw // tx) * tx * ty
        assert threads >= min(65536, co * hw * hw), (co, hw, threads)
        if co * hw * hw >= 4 * 65536:
            assert rn * rm >= 4, (co, hw, rn, rm)


@pytest.mark.parametrize("ci,co,hw,k,stride", [(64, 256, 56, 1, 1), (1024, 256, 14, 1, 1), (512, 512, 14, 3, 2),
                                                (2048, 512, 7, 1, 1)])
def test_conv_weight_tiles_are_read_without_bank_conflicts(ci, co, hw, k, stride):
    """ResNet-50's layers at batch 1: the channel groups of a warp read weight rows a register tile apart,
    which fall in one bank unless the shared rows are padded (the bank model's passes, reads only: the copy's
    writes cross a padded row now and then)."""
    w = np.random.default_rng(0).standard_normal((co, ci, k, k)).astype("float32")
    model = make_single_op("Conv", [("x", (1, ci, hw, hw))], initializers={"w": w}, extra_inputs=["w"],
                           kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
    mod, params = relay.frontend.from_onnx(model)
    (task,) = relay.extract_tasks(mod, params, target="cuda -arch=sm_90")
    func = autosched.lower(*task.default_schedule(), target=task.target)
    reads = [a for a in bank_conflicts(func, task.target.gpu) if not a.write and a.buffer.endswith(".shared")]
    assert {a.buffer for a in reads} >= {"p1.shared"}, reads  # (the weights)
    assert all(a.wavefronts == a.ideal for a in reads), reads


@needs_ptxas
def test_resnet50_shaped_model_assembles_within_the_register_budget(resnet50_small):
    regs = assemble(*resnet50_small)
    assert len(regs) >= 25 and max(regs.values()) <= 128, regs


@pytest.mark.parametrize("kind", ["dense", "batch_matmul"])
def test_dense_and_batch_matmul_of_bert_shapes_are_tiled_gemms(kind):
    """BERT-base's projection (128 tokens x 768 features, a short k here) and attention scores (12 heads of
    128 x 128): both operands staged in shared memory, a register tile of several rows and columns per
    thread, threadIdx.x along the output's columns; the grid run serially equals onnxruntime."""
    rng = np.random.default_rng(0)
    if kind == "dense":
        w = (rng.standard_normal((32, 768)) / 8).astype("float32")
        model = make_single_op("MatMul", [("x", (1, 128, 32))], initializers={"w": w}, extra_inputs=["w"])
    else:
        model = make_single_op("MatMul", [("q", (1, 12, 128, 32)), ("k", (1, 12, 32, 128))])
    err, kernels = serial_error(model, random_inputs(model))
    assert err < 1e-5
    (func, launch), = [(k, la) for k, la in kernels if kind in k.name]
    shared = [s.buffer for s in S.walk_stmts(func.body) if isinstance(s, S.Allocate) and s.buffer.scope == "shared"]
    local = [s.buffer for s in S.walk_stmts(func.body) if isinstance(s, S.Allocate) and s.buffer.scope == "local"]
    assert len(shared) == 2, func.name
    dims = [int(d) for d in max(local, key=lambda b: b.const_size()).shape]
    assert dims[-2] > 1 and dims[-1] > 1, (func.name, dims)  # rows x columns per thread
    assert launch.block[0] == 16 and launch.block[0] * launch.block[1] >= 64


def test_power_of_a_negative_base_by_a_tensor_exponent_is_cs_pow_on_the_gpu():
    """GELU's tanh form computes x ** 3 with the 3 a parameter: a GPU's pow is 2 ** (y * log2 x), so the kernel
    raises |x| and puts the sign back (a negative base had given NaN on the GPU: GPT-2's logits)."""
    from autosched.codegen.build import build_many
    from autosched.relay.op.elemwise import power
    from autosched.runtime.graph_executor import GraphModule
    from autosched.tir.gpu import serialize_bindings

    x, y = relay.var("x", shape=(2, 8)), relay.var("y", shape=(2, 8))
    mod = relay.IRModule.from_expr(relay.Function([x, y], power(x, y)))
    xs = np.array([[-2, -1.5, 0, 1.5, 2, -3, -0.5, 4]] * 2, "float32")
    ys = np.array([[3] * 8, [-1, 2, 0, 0.5, 2.5, 4, 3, -2]], "float32")
    with np.errstate(all="ignore"):
        want = np.power(xs, ys)
    from autosched.relay.backend.build_module import _GraphBuilder, optimize
    from autosched.target import Target
    from autosched.tir.gpu import prepare_kernel

    with Target("cuda"):
        fused = optimize(mod, {})
    gb = _GraphBuilder(fused["main"], "cuda", use_records=False)
    graph_json = gb.run()
    (func,) = gb.prims
    pows = [c for s in S.walk_stmts(func.body) for e in S.stmt_exprs(s) for c in E.walk(e)
            if isinstance(c, E.Call) and c.name == "pow"]
    assert pows and all(isinstance(c.args[0], E.Call) and c.args[0].name == "fabs" for c in pows)
    m = GraphModule(graph_json, build_many([serialize_bindings(prepare_kernel(func)[0])], SERIAL_CPU), gb.params)
    m.run(x=xs, y=ys)
    np.testing.assert_allclose(m.get_output(0), want, rtol=1e-6, equal_nan=True)


# ----------------------------------------------------------------------------------------- te: the enabler
def _softmax_rows(scope="shared"):
    from autosched import te

    R, L, T = 6, 100, 32
    x = te.placeholder((R, L), name="x")
    k1, k2 = te.reduce_axis((0, L), name="k1"), te.reduce_axis((0, L), name="k2")
    mx = te.compute((R,), lambda i: te.max(x[i, k1], axis=k1), name="mx")
    ex = te.compute((R, L), lambda i, j: te.exp(x[i, j] - mx[i]), name="ex")
    sm = te.compute((R,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    out = te.compute((R, L), lambda i, j: ex[i, j] / sm[i], name="out")
    s = te.create_schedule(out.op)
    s[ex].compute_inline()
    i, j = s[out].op.axis
    _, ji = s[out].split(j, factor=T)
    s[out].bind(i, "blockIdx.x")
    s[out].bind(ji, "threadIdx.x")
    for r in (mx, sm):
        s[r].set_scope(scope)
        s[r].compute_at(s[out], i)
        ko, ki = s[r].split(s[r].op.reduce_axis[0], factor=T)
        s[r].reorder(ki, ko)
        s[r].bind(ki, "threadIdx.x")
    return s, [x, out]


def test_a_cross_thread_reduction_computed_at_its_readers_block_loop():
    """TVM's softmax schedule: the row max and sum are cross-thread reductions computed at the output's
    blockIdx loop into shared memory, read by every thread of the block after a barrier."""
    import autosched
    from autosched.tir.gpu import prepare_kernel, serialize_bindings

    s, args = _softmax_rows()
    kernel, launch = prepare_kernel(autosched.lower(s, args, target="cuda"))
    assert launch.grid == (6, 1, 1) and launch.block == (32, 1, 1)
    xv = np.random.default_rng(0).standard_normal((6, 100)).astype("float32")
    got = np.zeros_like(xv)
    autosched.build(serialize_bindings(kernel), target=SERIAL_CPU)(xv, got)
    e = np.exp(xv - xv.max(1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    if ptxas_path() is not None:
        autosched.build(s, args, target="cuda -arch=sm_90")


def test_a_cross_thread_reduction_at_a_loop_must_be_shared():
    import autosched
    from autosched.errors import ScheduleError

    s, args = _softmax_rows(scope="local")
    with pytest.raises(ScheduleError, match="set_scope\\('shared'\\)"):
        autosched.lower(s, args, target="cuda")


def test_bench_gpu_models_says_no_cuda_device():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "AUTOSCHED_LIBCUDA": "/nonexistent/libcuda.so.1", "PYTHONPATH": str(root)}
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_gpu_models.py"), "--models", "resnet50"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 2 and "no CUDA device" in res.stderr
