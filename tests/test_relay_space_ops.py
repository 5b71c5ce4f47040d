"""``relay.nn`` / ``topi.nn`` depth_to_space, space_to_depth, space_to_batch_nd and batch_to_space_nd under TVM's
names, against the element-by-element numpy references of ``topi.testing``; each a single fused copy kernel."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as tvm
from autosched import relay, te, topi
from autosched.relay.ir.expr import RelayError
from autosched.relay.op import evaluate


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_depth_to_space_and_back(mode, layout) -> None:
    x = np.arange(2 * 18 * 3 * 4, dtype=np.float32).reshape(2, 18, 3, 4)
    ref = topi.testing.depth_to_space_python(x, 3, mode)
    data = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    got = evaluate(relay.nn.depth_to_space(relay.const(data), 3, layout, mode))
    np.testing.assert_array_equal(got if layout == "NCHW" else got.transpose(0, 3, 1, 2), ref)
    if mode == "DCR":  # space_to_depth undoes it
        back = evaluate(relay.nn.space_to_depth(relay.const(ref), 3))
        np.testing.assert_array_equal(back, x)
        np.testing.assert_array_equal(back, topi.testing.space_to_depth_python(ref, 3))


@pytest.mark.parametrize("shape, blocks, before, after", [((2, 4, 6, 3), (2, 3), (0, 1), (2, 2)),
                                                           ((3, 5, 2), (5,), (2,), (3,)),
                                                           ((1, 4, 4, 4, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0))])
def test_space_to_batch_nd_and_back(shape, blocks, before, after) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    ref = topi.testing.space_to_batch_nd_python(x, blocks, before, after, 0.5)
    got = evaluate(relay.nn.space_to_batch_nd(relay.const(x), blocks, list(zip(before, after)), pad_value=0.5))
    np.testing.assert_array_equal(got, ref)
    back = evaluate(relay.nn.batch_to_space_nd(relay.const(ref), blocks, list(zip(before, after))))
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(back, topi.testing.batch_to_space_nd_python(ref, blocks, before, after))


def test_topi_names_build_as_tvm_code_does() -> None:
    a_np = np.random.default_rng(1).uniform(size=(2, 3, 4, 8)).astype(np.float32)
    a = te.placeholder(a_np.shape, name="a")
    b = topi.nn.space_to_batch_nd(a, [2, 2], [1, 0], [0, 0], 0.0)
    c = topi.nn.batch_to_space_nd(b, [2, 2], [1, 0], [0, 0])
    s = topi.testing.get_injective_schedule("llvm")([b, c])
    out_b, out_c = tvm.nd.array(np.zeros(b.shape, np.float32)), tvm.nd.array(np.zeros(c.shape, np.float32))
    tvm.build(s, [a, b, c], "llvm")(tvm.nd.array(a_np), out_b, out_c)
    np.testing.assert_array_equal(out_b.numpy(), topi.testing.space_to_batch_nd_python(a_np, [2, 2], [1, 0], [0, 0]))
    np.testing.assert_array_equal(out_c.numpy(), a_np)


def test_each_is_one_copy_kernel() -> None:
    x = relay.var("x", shape=(1, 16, 8, 8))
    y = relay.nn.depth_to_space(relay.nn.relu(x), 2, mode="CRD")
    assert len(relay.extract_tasks(relay.IRModule.from_expr(relay.Function([x], y)), target="llvm")) <= 1
    graph, lib, _ = relay.build(relay.Function([x], y), target="llvm")
    assert sum(n["op"] == "tvm_op" for n in __import__("json").loads(graph)["nodes"]) == 1


def test_bad_arguments_are_refused_by_name() -> None:
    x = relay.var("x", shape=(1, 12, 6, 9))
    cases = [(lambda: relay.nn.depth_to_space(x, 4), r"the 12 channels must be a multiple of block_size\^2 = 16"),
             (lambda: relay.nn.depth_to_space(x, 2, mode="CDR"), r"unknown mode 'CDR' \(DCR or CRD\)"),
             (lambda: relay.nn.space_to_depth(x, 2), r"the height 6 and width 9 must be multiples of block_size 2"),
             (lambda: relay.nn.depth_to_space(x, 2, layout="NCHW4c"), r"must be 4-D NCHW or NHWC"),
             (lambda: relay.nn.space_to_batch_nd(x, [5, 2], [[0, 0], [0, 0]]),
              r"the padded extents \[12, 6\] must be multiples of block_shape \[5, 2\]"),
             (lambda: relay.nn.space_to_batch_nd(x, [2, 0], [[0, 0], [0, 0]]), r"block_shape \[2, 0\] must give"),
             (lambda: relay.nn.space_to_batch_nd(x, [2], [[0, -1]]), r"paddings \[\[0, -1\]\] must be 1"),
             (lambda: relay.nn.batch_to_space_nd(x, [2], [[0, 0]]), r"the batch 1 must be a multiple"),
             (lambda: relay.nn.batch_to_space_nd(relay.var("y", shape=(4, 3, 2)), [2, 2], [[0, 6], [0, 0]]),
              r"crops \[\[0, 6\], \[0, 0\]\] must be 2 non-negative .* leaving each axis non-empty")]
    for build, match in cases:
        with pytest.raises(RelayError, match=match):
            build()
