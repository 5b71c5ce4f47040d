"""te computations and schedules as JSON (``tvm.ir.save_json`` / ``load_json``) and pickled schedules: what is
loaded builds to the same loops and the same numbers, names kept; what cannot be written is refused by name."""

import pickle

import numpy as np
import pytest

import autosched
from autosched import te, tir

RNG = np.random.default_rng(11)


def _argmax_reducer():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return tir.Select(keep, x[0], y[0]), tir.Select(keep, x[1], y[1])

    return te.comm_reducer(fcombine, lambda t0, t1: (tir.const(-1, t0), te.min_value(t1)), name="argmax")


def _computation():
    """Symbolic shapes, a conditional sum with a scaled source, a two-output compute, a tuple reduction, a
    user's reducer, a tag and attributes."""
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    S = te.compute((m,), lambda i: te.sum(A[i, k] * 2.5, axis=k, where=k % 2 == 0), name="S", tag="rowsum",
                   attrs={"note": [1, "two"]})
    P, Q = te.compute((m, n), lambda i, j: (A[i, j] + S[i], te.exp(A[i, j]) - 1.0), name="PQ")
    k2 = te.reduce_axis((0, n), name="k2")
    I, V = te.compute((m,), lambda i: _argmax_reducer()((k2.var.astype("int32"), P[i, k2]), axis=k2), name="mx")
    k3 = te.reduce_axis((0, n), name="k3")
    mul = te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, t), name="mul")
    R = te.compute((m,), lambda i: mul(Q[i, k3] + 1.0, axis=k3), name="R")
    return A, [I, V, R]


def _schedule():
    A, outs = _computation()
    s = te.create_schedule([t.op for t in outs])
    I, V, R = outs
    S = s[outs[0]].op.input_tensors[0].op.input_tensors[1]
    xo, xi = s[I].split(I.op.axis[0], factor=4)
    so, si = s[S].split(S.op.axis[0], nparts=2)
    s[S].parallel(so)
    s[R].parallel(R.op.axis[0])
    return s, [A, *outs]


def _run(s, args, a):
    shape = a.shape
    outs = [np.zeros(shape[0], dt) for dt in ("int32", "float32", "float32")]
    autosched.build(s, args)(a, *outs)
    return outs


def _args_of(s):
    """The loaded schedule's input and outputs, found by name."""
    by_name = {}
    for st in s.stages:
        for k in range(st.op.num_outputs):
            by_name[st.op.output(k).name] = st.op.output(k)
    return [by_name[n] for n in ("A", "mx", "mx.v1", "R")]


def test_a_schedule_round_trips_through_json_and_pickle():
    s, args = _schedule()
    text = autosched.ir.save_json(s)
    for loaded in (autosched.ir.load_json(text), pickle.loads(pickle.dumps(s))):
        assert isinstance(loaded, te.Schedule) and loaded is not s
        assert loaded.trace == s.trace
        new_args = _args_of(loaded)
        assert str(autosched.lower(loaded, new_args)) == str(autosched.lower(s, args))
        assert [st.name for st in loaded.stages] == [st.name for st in s.stages]
        S = next(st for st in loaded.stages if st.name == "S")
        assert S.op.tag == "rowsum" and S.op.attrs == {"note": [1, "two"]}
        assert str(loaded.outputs[0].body) == str(s.outputs[0].body)
        a = RNG.random((9, 6)).astype("float32")
        want, got = _run(s, args, a), _run(loaded, new_args, a)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_tensors_operations_and_scans_load_with_their_names():
    A, (I, V, R) = _computation()
    V2 = autosched.ir.load_json(autosched.ir.save_json(V))
    assert isinstance(V2, te.Tensor) and V2.value_index == 1 and V2.name == V.name and str(V2) == str(V)
    op = autosched.ir.load_json(autosched.ir.save_json(R.op))
    assert isinstance(op, te.ComputeOp) and str(op.body) == str(R.op.body)
    assert op.body[0].combiner.name == "mul" and op.body == op.bodies
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    res = te.scan(init, update, state, inputs=[X], name="cumsum")
    s = te.create_schedule(res.op)
    s[update].vectorize(update.op.axis[1])
    loaded = autosched.ir.load_json(autosched.ir.save_json(s))
    X2, res2 = loaded.outputs[0].inputs[0], loaded.outputs[0].output(0)
    a = RNG.random((5, 8)).astype("float32")
    out = np.zeros_like(a)
    autosched.build(loaded, [X2, res2])(a, out)
    np.testing.assert_allclose(out, np.cumsum(a, axis=0), rtol=1e-5)


def test_what_cannot_be_written_is_refused_by_name():
    A = te.placeholder((8,), name="A")
    B = te.extern((8,), [A], lambda ins, outs: tir.call_packed("my.copy", ins[0], outs[0]), name="B")
    with pytest.raises(ValueError, match=r"operation B \(ExternOp\).*extern, hybrid"):
        autosched.ir.save_json(B)
    with pytest.raises(TypeError, match="expected a te Tensor, Operation or Schedule, got int"):
        autosched.ir.save_json(3)
    with pytest.raises(ValueError, match="not JSON text"):
        autosched.ir.load_json("{nope")
    with pytest.raises(ValueError, match="TVM's save_json output does not load here"):
        autosched.ir.load_json('{"root": 1, "nodes": [], "attrs": {"tvm_version": "0.8.0"}}')
    C = te.compute((8,), lambda i: A[i] + 1, name="C", attrs={"fn": print})
    with pytest.raises(ValueError, match="operation C: its attrs .* are not JSON values"):
        autosched.ir.save_json(C)


def test_a_calls_op_and_a_computes_body_list_are_tvms():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: te.exp(A[i]), name="B")
    assert isinstance(B.op.body, list) and B.op.body[0].op.name == "tir.exp"
    assert B.op.body[0].op == autosched.ir.Op("tir.exp")


def test_structural_equal_compares_trees_with_or_without_mapping_free_variables():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((4,), name="A")
    assert autosched.ir.structural_equal(n - 3, n - 3) and autosched.ir.structural_equal([n, 2], [n, 2])
    assert not autosched.ir.structural_equal(n - 3, m - 3)
    assert autosched.ir.structural_equal(n - 3, m - 3, map_free_vars=True)
    assert not autosched.ir.structural_equal(n * m, m * m, map_free_vars=True)  # n and m are two variables
    assert not autosched.ir.structural_equal(te.exp(A[n]), te.log(A[n]), map_free_vars=True)
    assert not autosched.ir.structural_equal(n + 1, n + 2)
    with pytest.raises(ValueError, match="not structurally equal"):
        autosched.ir.assert_structural_equal(n, m)
    with pytest.raises(TypeError, match="compares te expressions"):
        autosched.ir.structural_equal("n", n)
