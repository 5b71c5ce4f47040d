"""Sparse dense layers: loops whose extent a kernel loads (a sparse row's length), relay's nn.sparse_dense (BSR
and CSR weights), TVM's relay.data_dep_optimization turning a pruned model's dense layers into it, TOPI's
sparse_dense and random BSR weights, and tuning a sparse kernel (its measurement inputs a valid structure)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import autosched
from _cpus import skip_unless_host_runs
from autosched import auto_scheduler, relay, te, topi
from autosched.contrib import graph_executor
from autosched.relay import data_dep_optimization as ddo
from autosched.relay.data_dep_optimization.bsr_dense import to_bsr
from autosched.relay.ir.expr import RelayError
from autosched.relay.ir.type_infer import infer_type

RNG = np.random.default_rng(3)


def pruned(shape, density, block=(1, 1)):
    """A random weight with about ``density`` of its ``block`` blocks kept, the others zero."""
    rows, cols = shape[0] // block[0], shape[1] // block[1]
    keep = np.repeat(np.repeat(RNG.random((rows, cols)) < density, block[0], 0), block[1], 1)
    return (RNG.standard_normal(shape) * keep).astype("float32")


def run_module(mod, params, **inputs):
    lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](autosched.cpu()))
    for k, v in inputs.items():
        gm.set_input(k, v)
    gm.run()
    return gm.get_output(0).numpy()


def test_a_loop_extent_read_from_a_tensor_lowers_and_runs_split_and_in_parallel():
    """CSR rows: each row's reduction runs indptr[i + 1] - indptr[i] times, also split and inside a parallel
    loop that the row's stage is computed at."""
    n, k = 12, 20
    w = pruned((n, k), 0.3)
    data, indices, indptr = to_bsr(w, (1, 1))
    D = te.placeholder((len(data),), name="D")
    Ind = te.placeholder((len(indices),), "int32", name="Ind")
    Ptr = te.placeholder((n + 1,), "int32", name="Ptr")
    X = te.placeholder((k,), name="X")

    def row(i):
        e = te.reduce_axis((0, Ptr[i + 1] - Ptr[i]), name="e")
        return te.sum(D[Ptr[i] + e] * X[Ind[Ptr[i] + e]], axis=e)

    Y = te.compute((n,), row, name="Y")
    Z = te.compute((n,), lambda i: Y[i] * 2.0, name="Z")
    s = te.create_schedule(Z.op)
    s[Z].parallel(s[Z].op.axis[0])
    s[Y].compute_at(s[Z], s[Z].op.axis[0])
    s[Y].split(s[Y].op.reduce_axis[0], factor=3)
    text = str(autosched.lower(s, [D, Ind, Ptr, X, Z]))
    assert "Ptr[i + 1] - Ptr[i]" in text.replace("int64(", "").replace(")", "")
    f = autosched.build(s, [D, Ind, Ptr, X, Z])
    x = RNG.standard_normal(k).astype("float32")
    z = np.zeros(n, "float32")
    f(data.reshape(-1), indices, indptr, x, z)
    np.testing.assert_allclose(z, 2 * (w @ x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("block", [(1, 1), (4, 1), (16, 1), (8, 4)])
def test_sparse_dense_matches_numpy_for_bsr_and_csr_weights(block):
    m, k, n = 10, 32, 64
    w = pruned((n, k), 0.2, block)
    data, indices, indptr = to_bsr(w, block)
    if block == (1, 1):
        data = data.reshape(-1)  # CSR
    x = relay.var("x", shape=(2, m, k))  # rows in more than one axis
    parts = [relay.var(name, shape=a.shape, dtype=str(a.dtype))
             for name, a in (("d", data), ("i", indices), ("p", indptr))]
    y = relay.nn.relu(relay.nn.sparse_dense(x, parts))
    mod = autosched.IRModule.from_expr(relay.Function([x, *parts], y))
    xv = RNG.standard_normal((2, m, k)).astype("float32")
    got = run_module(mod, {"d": data, "i": indices, "p": indptr}, x=xv)
    np.testing.assert_allclose(got, np.maximum(xv @ w.T, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"])
def test_sparse_dense_builds_for_avx2_and_avx512(target):
    """The block rows in vector lanes of either ISA (16 lanes: two AVX2 vectors or one AVX-512 one)."""
    w = pruned((64, 32), 0.3, (16, 1))
    data, indices, indptr = to_bsr(w, (16, 1))
    x = relay.var("x", shape=(8, 32))
    y = relay.nn.sparse_dense(x, [relay.const(data), relay.const(indices), relay.const(indptr)])
    lib = relay.build(autosched.IRModule.from_expr(relay.Function([x], y)), target)
    skip_unless_host_runs(target)
    gm = graph_executor.GraphModule(lib["default"](autosched.cpu()))
    xv = RNG.standard_normal((8, 32)).astype("float32")
    gm.set_input("x", xv)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), xv @ w.T, rtol=1e-5, atol=1e-5)


def test_sparse_dense_refuses_malformed_weights_by_name():
    x = relay.var("x", shape=(4, 30))
    bad = [relay.var("d", shape=(5, 4, 4)), relay.var("i", shape=(5,), dtype="int32"),
           relay.var("p", shape=(3,), dtype="int32")]
    with pytest.raises(RelayError, match="blocks of 4 columns do not tile"):
        infer_type(relay.nn.sparse_dense(x, bad))
    with pytest.raises(RelayError, match="weight_indices must be integers"):
        infer_type(relay.nn.sparse_dense(relay.var("x2", shape=(4, 28)), [bad[0], relay.var("i", shape=(5,)),
                                                                           bad[2]]))
    with pytest.raises(RelayError, match="sparse_lhs"):
        relay.nn.sparse_dense(x, bad, sparse_lhs=True)


def _mlp_onnx(w1, w2, rows):
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, w1.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, w2.shape[1]])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_data_dep_optimization_makes_a_pruned_models_dense_layers_sparse():
    """TVM's flow: simplify_fc_transpose stores the MatMul weights transposed, bsr_dense.convert turns those at
    least 80% zero into BSR parameters; a dense weight (W2 here is not pruned) stays dense."""
    w1 = pruned((48, 64), 0.1, (1, 16)).astype("float32")  # [in, out]: 16 x 1 blocks of the [out, in] weight
    w2 = RNG.standard_normal((64, 32)).astype("float32")
    model = _mlp_onnx(w1, w2, 8)
    mod, params = relay.frontend.from_onnx(model, {"x": (8, 48)})
    x = RNG.standard_normal((8, 48)).astype("float32")
    want = np.maximum(x @ w1, 0) @ w2
    func, params = ddo.simplify_fc_transpose.convert(mod["main"], params)
    assert sorted(params) == ["W1.T", "W2.T"]
    func, params = ddo.bsr_dense.convert(func, params, (16, 1), sparsity_threshold=0.8)
    assert sorted(params) == ["W1.T.data", "W1.T.indices", "W1.T.indptr", "W2.T"]
    assert params["W1.T.data"].shape[1:] == (16, 1)
    ops = [n.op.name for n in relay.ir.expr.post_order(func.body) if isinstance(n, relay.Call)]
    assert ops.count("nn.sparse_dense") == 1 and ops.count("nn.dense") == 1
    np.testing.assert_allclose(run_module(autosched.IRModule.from_expr(func), params, x=x), want, rtol=1e-4,
                               atol=1e-4)
    # an IRModule in, an IRModule out; a blocksize that does not divide the weight leaves it dense
    mod2, params2 = ddo.bsr_dense.convert(autosched.IRModule.from_expr(func), params, (5, 1), 0.8)
    assert isinstance(mod2, autosched.IRModule) and sorted(params2) == sorted(params)
    with pytest.raises(RelayError, match="blocksize"):
        ddo.bsr_dense.convert(func, params, (0, 1), 0.8)


def test_topi_sparse_dense_on_random_bsr_weights():
    """TVM's tune_sparse_x86 workload: relu(X) times a random BSR matrix, relu again."""
    np.random.seed(0)
    w = topi.sparse.utils.random_bsr_matrix(64, 32, 16, 1, 0.25, "float32")
    assert w.blocksize == (16, 1) and w.indptr[-1] == len(w.data) == 32
    X = te.placeholder((8, 32), name="X")
    W_data = te.placeholder(w.data.shape, name="W_data")
    W_indices = te.placeholder(w.indices.shape, "int32", name="W_indices")
    W_indptr = te.placeholder(w.indptr.shape, "int32", name="W_indptr")
    out = topi.nn.relu(topi.nn.sparse_dense(topi.nn.relu(X), W_data, W_indices, W_indptr))
    s = topi.generic.schedule_sparse_dense(out)
    f = autosched.build(s, [X, W_data, W_indices, W_indptr, out])
    x = RNG.standard_normal((8, 32)).astype("float32")
    y = np.zeros((8, 64), "float32")
    f(x, w.data, w.indices, w.indptr, y)
    np.testing.assert_allclose(y, np.maximum(np.maximum(x, 0) @ w.toarray().T, 0), rtol=1e-5, atol=1e-6)


def test_a_sparse_kernel_tunes_on_valid_structures_and_builds_with_its_record(tmp_path):
    """Measurement feeds a sparse kernel a valid random structure (random integers would index outside the
    weight), so candidates measure, and the build takes the best record."""
    m, k, n = 16, 64, 128
    w = pruned((n, k), 0.1, (4, 1))
    x = relay.var("x", shape=(m, k))
    wv = relay.var("w", shape=(n, k))
    func, params = ddo.bsr_dense.convert(relay.Function([x, wv], relay.nn.relu(relay.nn.dense(x, wv))), {"w": w},
                                         (4, 1), 0.8)
    mod = autosched.IRModule.from_expr(func)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    assert len(tasks) == 1 and "sparse_dense" in tasks[0].workload_key + str(tasks[0].args)
    assert tasks[0].flop > 0  # a data-dependent loop counts its mean length
    log = tmp_path / "sparse.json"
    auto_scheduler.TaskScheduler(tasks, weights).tune(auto_scheduler.TuningOptions(
        num_measure_trials=8, measure_callbacks=[auto_scheduler.RecordToFile(str(log))]))
    history = auto_scheduler.ApplyHistoryBest(str(log))
    assert history.query(tasks[0]) is not None  # a candidate measured
    history.close()
    with auto_scheduler.ApplyHistoryBest(str(log)):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](autosched.cpu()))
    xv = RNG.standard_normal((m, k)).astype("float32")
    gm.set_input("x", xv)
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), np.maximum(xv @ w.T, 0), rtol=1e-5, atol=1e-5)
