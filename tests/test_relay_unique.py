"""``relay.unique`` / ``topi.unique`` as TVM has them: outputs padded to the data's length, the count apart;
sorted or in order of first occurrence; checked against numpy's unique."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as tvm
from autosched import relay, te, topi
from autosched.relay.ir.expr import RelayError
from autosched.relay.op import evaluate


def _numpy_unique(x: np.ndarray, is_sorted: bool) -> tuple:
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    if not is_sorted:  # in order of first occurrence
        order = np.argsort(index)
        slot = np.argsort(order)
        values, index, counts, inverse = values[order], index[order], counts[order], slot[inverse]
    return values, index, inverse.reshape(-1), counts


@pytest.mark.parametrize("is_sorted", [True, False])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_unique_matches_numpy(is_sorted, dtype) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 12, 300).astype(dtype)
    values, index, inverse, num, counts = (o for o in evaluate(relay.unique(relay.const(x), is_sorted, True)))
    ref = _numpy_unique(x, is_sorted)
    k = len(ref[0])
    assert num.tolist() == [k] and values.dtype == x.dtype and index.dtype == np.int32
    np.testing.assert_array_equal(values[:k], ref[0])
    np.testing.assert_array_equal(index[:k], ref[1])
    np.testing.assert_array_equal(inverse, ref[2])
    np.testing.assert_array_equal(counts[:k], ref[3])
    assert not values[k:].any() and not counts[k:].any()  # the padding is zeros


def test_topi_unique_builds_as_tvm_code_does() -> None:
    x_np = np.array([5, 5, 2, 9, 2, 2, 0], np.int64)
    x = te.placeholder(x_np.shape, dtype="int64", name="x")
    outs = topi.unique(x, is_sorted=False, return_counts=True)
    s = topi.generic.schedule_unique(outs)
    arrays = [tvm.nd.array(np.zeros(o.shape, o.dtype)) for o in outs]
    tvm.build(s, [x, *outs], "llvm")(tvm.nd.array(x_np), *arrays)
    values, index, inverse, num, counts = (a.numpy() for a in arrays)
    assert num.tolist() == [4]
    assert values[:4].tolist() == [5, 2, 9, 0] and index[:4].tolist() == [0, 2, 3, 6]
    assert inverse.tolist() == [0, 0, 1, 2, 1, 1, 3] and counts[:4].tolist() == [2, 3, 1, 1]


def test_unique_in_a_built_graph() -> None:
    x = relay.var("x", shape=(64,), dtype="int32")
    out = relay.unique(relay.add(x, relay.const(1, "int32")))
    graph, lib, params = relay.build(relay.Function([x], out), target="llvm")
    m = tvm.contrib.graph_executor.GraphModule(graph, lib, params)
    x_np = np.random.default_rng(1).integers(0, 10, 64).astype(np.int32)
    m.set_input("x", x_np)
    m.run()
    ref = np.unique(x_np + 1)
    assert m.get_num_outputs() == 4 and m.get_output(3).numpy().tolist() == [len(ref)]
    np.testing.assert_array_equal(m.get_output(0).numpy()[:len(ref)], ref)


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(RelayError, match=r"unique: data must be 1-D, got shape \(2, 3\)"):
        relay.transform.InferType()(relay.IRModule.from_expr(relay.unique(relay.var("x", shape=(2, 3)))))
    with pytest.raises(RelayError, match=r"unique: output 'mode' is not one of values, indices"):
        relay.transform.InferType()(relay.IRModule.from_expr(
            relay.op.make_call("unique", [relay.var("x", shape=(3,))], output="mode")))
