"""relay: graph IR, type inference, passes, fusion, build and the graph executor, against numpy."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import autosched
from autosched import relay, te, tir
from autosched.codegen.build import build_many
from autosched.relay import transform
from autosched.relay.backend.build_module import _GraphBuilder
from autosched.runtime import graph_executor, register_func, remove_global_func
from autosched.target import Target

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


# ------------------------------------------------------------ numpy references
def np_pad2d(x: np.ndarray, pt: int, pl: int, pb: int, pr: int, value: float = 0.0) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def np_conv2d(x, w, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    xp = np_pad2d(x, *padding)
    N, C, H, W = xp.shape
    O, Ig, KH, KW = w.shape
    sh, sw = strides
    dh, dw = dilation
    OH = (H - (KH - 1) * dh - 1) // sh + 1
    OW = (W - (KW - 1) * dw - 1) // sw + 1
    out = np.zeros((N, O, OH, OW), dtype=np.float64)
    og = O // groups
    for o in range(O):
        g = o // og
        for kh in range(KH):
            for kw in range(KW):
                patch = xp[:, g * Ig:(g + 1) * Ig, kh * dh: kh * dh + sh * (OH - 1) + 1: sh,
                           kw * dw: kw * dw + sw * (OW - 1) + 1: sw]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, kh, kw])
    return out.astype("float32")


def np_pool(x, k, s, pad, mode, count_include_pad=False, ceil_mode=False):
    N, C, H, W = x.shape
    pt, pl, pb, pr = pad
    OH = (H + pt + pb - k[0]) // s[0] + 1
    OW = (W + pl + pr - k[1]) // s[1] + 1
    if ceil_mode:
        OH = -(-(H + pt + pb - k[0]) // s[0]) + 1
        OW = -(-(W + pl + pr - k[1]) // s[1]) + 1
        OH -= (OH - 1) * s[0] >= H + pt
        OW -= (OW - 1) * s[1] >= W + pl
    out = np.zeros((N, C, OH, OW), "float32")
    for y in range(OH):
        for xx in range(OW):
            h0, w0 = y * s[0] - pt, xx * s[1] - pl
            hs, ws = slice(max(h0, 0), min(h0 + k[0], H)), slice(max(w0, 0), min(w0 + k[1], W))
            win = x[:, :, hs, ws]
            if mode == "max":
                out[:, :, y, xx] = win.max(axis=(2, 3))
            else:
                if count_include_pad:
                    cnt = (min(h0 + k[0], H + pb) - max(h0, -pt)) * (min(w0 + k[1], W + pr) - max(w0, -pl))
                else:
                    cnt = win.shape[2] * win.shape[3]
                out[:, :, y, xx] = win.sum(axis=(2, 3)) / cnt
    return out


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def run(mod_or_func, inputs: dict, params: dict | None = None, opt_level: int = 3) -> list[np.ndarray]:
    with transform.PassContext(opt_level=opt_level):
        graph_json, lib, out_params = relay.build(mod_or_func, "llvm", params=params)
    m = graph_executor.GraphModule(graph_json, lib, out_params)
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return [m.get_output(i) for i in range(m.get_num_outputs())]


def kernels_of(graph_json: str) -> list[dict]:
    return [n for n in json.loads(graph_json)["nodes"] if n["op"] == "tvm_op"]


# ---------------------------------------------------------------- the tests
def test_conv_bias_relu_is_one_kernel_and_matches_numpy():
    x = relay.var("data", shape=(1, 3, 12, 12))
    w, b = rand(8, 3, 3, 3), rand(8)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, relay.const(w), padding=(1, 1)), relay.const(b)))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    mod = relay.transform.InferType()(mod)
    assert mod["main"].checked_type.ret_type.shape == (1, 8, 12, 12)
    assert y.checked_type.dtype == "float32"
    assert "nn.conv2d" in str(mod) and "Tensor[(1, 8, 12, 12), float32]" in str(mod)
    with relay.transform.PassContext(opt_level=2):  # NCHW kernels: one, with bias and relu in its loops
        ks = kernels_of(relay.build(mod, "llvm")[0])
    assert len(ks) == 1 and ks[0]["name"].startswith("fused_conv2d_bias_add_relu")
    graph_json, lib, params = relay.build(mod, "llvm")  # opt_level 3: blocked, reading NCHW, then back to NCHW
    ks = kernels_of(graph_json)
    assert [k["name"].rsplit("_", 1)[0] for k in ks] == ["fused_conv2d_nchwc_add_relu", "fused_layout_transform"]
    xd = rand(1, 3, 12, 12)
    m = graph_executor.GraphModule(graph_json, lib, params)
    m.set_input("data", xd)
    m.run()
    ref = np.maximum(np_conv2d(xd, w, padding=(1, 1, 1, 1)) + b[None, :, None, None], 0)
    np.testing.assert_allclose(m.get_output(0), ref, rtol=1e-4, atol=1e-4)
    bench = m.benchmark(number=2, repeat=2)
    assert bench.mean > 0 and bench["min"] <= bench.median and len(bench.results) == 2


def test_conv2d_groups_strides_dilation_asymmetric_padding():
    x = relay.var("x", shape=(2, 4, 11, 10))
    w1, w2 = rand(6, 2, 3, 3), rand(4, 6, 2, 3)
    y = relay.nn.conv2d(x, relay.const(w1), strides=(2, 1), padding=(1, 0, 2, 1), groups=2)
    z = relay.nn.conv2d(y, relay.const(w2), dilation=(2, 1), padding=1)
    xd = rand(2, 4, 11, 10)
    (out,) = run(relay.Function([x], z), {"x": xd})
    ref = np_conv2d(np_conv2d(xd, w1, (2, 1), (1, 0, 2, 1), groups=2), w2, dilation=(2, 1), padding=(1, 1, 1, 1))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_dense_matmul_batch_matmul_and_broadcasting_ops():
    a = relay.var("a", shape=(4, 16))
    b = relay.var("b", shape=(3, 5, 7))
    wd, wm = rand(10, 16), rand(10, 6)
    bias = rand(10)
    d = relay.nn.bias_add(relay.nn.dense(a, relay.const(wd), units=10), relay.const(bias), axis=-1)
    mm = relay.nn.matmul(d, relay.const(wm))                      # (4, 6)
    mt = relay.nn.matmul(relay.const(wm), d, transpose_a=True, transpose_b=True)  # (6, 4)
    yb = rand(3, 2, 7)
    bm = relay.nn.batch_matmul(b, relay.const(yb))               # (3, 5, 2), y transposed
    bm2 = relay.nn.batch_matmul(b, relay.const(rand(1, 7, 2)), transpose_b=False)
    s = relay.sigmoid(mm) * relay.const(np.float32(2.0)) - relay.tanh(relay.const(rand(6)))
    q = relay.clip(relay.divide(mt, relay.const(rand(6, 1) + 3.0)), -0.5, 0.5)
    f = relay.Function([a, b], relay.Tuple([s, q, bm + bm2]))
    ad, bd = rand(4, 16), rand(3, 5, 7)
    outs = run(f, {"a": ad, "b": bd})
    dd = ad @ wd.T + bias
    ref_s = 1 / (1 + np.exp(-(dd @ wm))) * 2.0
    tanh_c = np.tanh(s.args[1].args[0].data)
    np.testing.assert_allclose(outs[0], ref_s - tanh_c, rtol=1e-4, atol=1e-4)
    ref_q = np.clip((wm.T @ dd.T) / q.args[0].args[1].data, -0.5, 0.5)
    np.testing.assert_allclose(outs[1], ref_q, rtol=1e-4, atol=1e-4)
    ref_b = bd @ yb.transpose(0, 2, 1) + bd @ bm2.args[1].data[0]
    np.testing.assert_allclose(outs[2], ref_b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("batch, m, k, n", [(12, 197, 64, 197), (2, 3, 5, 7), (1, 13, 24, 11)])
def test_batch_matmul_of_any_shape_and_transposes_runs_in_register_blocks(transpose_a, transpose_b, batch, m, k, n):
    """batch_matmul with TVM's default transpose_b=True (y as [batch, N, K]) and with sizes that divide into no
    tile or vector (ViT's 197 tokens) matches numpy and runs the register-block nest: a transposed operand gets
    a transposed copy first (AlterOpLayout), a partial last tile is guarded; not the one-element reduction that
    took 14 ms for ViT's scores (0.5 ms now, Zen 3)."""
    rng = np.random.default_rng(0)
    xd = rng.standard_normal((batch, k, m) if transpose_a else (batch, m, k)).astype("float32")
    yd = rng.standard_normal((batch, n, k) if transpose_b else (batch, k, n)).astype("float32")
    x, y = relay.var("x", shape=xd.shape), relay.var("y", shape=yd.shape)
    out = relay.nn.batch_matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b) * relay.const(np.float32(0.5))
    with Target("llvm"):
        fused = relay.optimize(relay.IRModule.from_expr(relay.Function([x, y], out)), {})
    gb = _GraphBuilder(fused["main"], "llvm", use_records=False)
    gb.run()
    (kernel,) = [f for f in gb.prims if "batch_matmul" in f.name]
    assert "batch_matmul.local" in str(kernel) and "vectorized" in str(kernel), str(kernel)
    (got,) = run(relay.Function([x, y], out), {"x": xd, "y": yd})
    a = xd.transpose(0, 2, 1) if transpose_a else xd
    b = yd.transpose(0, 2, 1) if transpose_b else yd
    np.testing.assert_allclose(got, a @ b * 0.5, rtol=1e-4, atol=1e-4)


def _np_conv2d_transpose(x, w, strides, padding, output_padding=(0, 0), groups=1, dilation=(1, 1)):
    """Each input pixel scatters its weighted kernel into the output (the definition), then the crop."""
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    (s0, s1), (d0, d1), (a0, a1) = strides, dilation, output_padding
    full = np.zeros((n, og * groups, (h - 1) * s0 + d0 * (kh - 1) + 1 + a0, (wd - 1) * s1 + d1 * (kw - 1) + 1 + a1))
    cg = cin // groups
    for g in range(groups):
        xs, ws = x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg]
        for t in range(kh):
            for u in range(kw):
                rows, cols = slice(t * d0, t * d0 + (h - 1) * s0 + 1, s0), slice(u * d1, u * d1 + (wd - 1) * s1 + 1, s1)
                full[:, g * og:(g + 1) * og, rows, cols] += np.einsum("nchw,co->nohw", xs, ws[:, :, t, u])
    top, left, bottom, right = padding
    return full[:, :, top:full.shape[2] - bottom, left:full.shape[3] - right]


@pytest.mark.parametrize("weight_as", ["param", "const"])
@pytest.mark.parametrize("case", [
    dict(x=(1, 8, 5, 6), w=(8, 4, 4, 4), strides=(2, 2), padding=(1, 1, 1, 1)),       # a decoder's upsampling
    dict(x=(2, 6, 4, 5), w=(6, 3, 2, 2), strides=(2, 2), padding=(0, 0, 0, 0)),       # U-Net's, a 1x1 per phase
    dict(x=(1, 4, 5, 5), w=(4, 2, 3, 3), strides=(2, 3), padding=(1, 0, 2, 1), output_padding=(1, 2), groups=2),
    dict(x=(1, 3, 4, 4), w=(3, 2, 3, 3), strides=(1, 1), padding=(1, 1, 0, 2)),
    dict(x=(1, 3, 4, 4), w=(3, 2, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1), dilation=(2, 1)),
    dict(x=(1, 2, 4, 4), w=(2, 3, 2, 2), strides=(3, 3), padding=(0, 0, 0, 0)),       # a kernel below its stride
], ids=["k4s2p1", "k2s2", "groups_output_padding", "stride1", "dilated", "stride_above_kernel"])
def test_conv2d_transpose_under_tvm_name_matches_its_definition(case, weight_as):
    x = relay.var("x", shape=case["x"])
    wd = rand(*case["w"])
    w = relay.var("w", shape=case["w"]) if weight_as == "param" else relay.const(wd)
    kw = {k: v for k, v in case.items() if k not in ("x", "w")}
    y = relay.nn.conv2d_transpose(x, w, kernel_size=case["w"][2:], channels=case["w"][1] * kw.get("groups", 1), **kw)
    xd = rand(*case["x"])
    args = [x, w] if weight_as == "param" else [x]
    (out,) = run(relay.Function(args, y), {"x": xd}, {"w": wd} if weight_as == "param" else None)
    want = _np_conv2d_transpose(xd, wd, **kw)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_conv2d_transpose_errors_name_the_problem():
    x, w = relay.var("x", shape=(1, 4, 5, 5)), relay.var("w", shape=(4, 2, 3, 3))
    with pytest.raises(relay.RelayError, match=r"layouts NHWC/IOHW are not supported"):
        relay.nn.conv2d_transpose(x, w, data_layout="NHWC")
    with pytest.raises(relay.RelayError, match=r"channels=3, but the weight \[4, 2, 3, 3\] with groups=1 gives 2"):
        relay.nn.conv2d_transpose(x, w, channels=3)
    with pytest.raises(relay.RelayError, match=r"data has 4 channels, but the weight \[4, 2, 3, 3\] needs 4, a "
                                               r"multiple of groups=3"):
        relay.nn.conv2d_transpose(x, w, groups=3)
    with pytest.raises(relay.RelayError, match=r"crops all of the output"):
        relay.nn.conv2d_transpose(x, w, padding=(4, 4, 4, 4))


def test_gathers_scatters_and_one_hot_under_tvm_names():
    """relay.gather / gather_nd / scatter_nd / scatter_elements / one_hot / topk (TVM's signatures, index tuples first)
    against numpy: negative indices count from the end, a scatter's duplicate indices add (mode "add") or leave the
    last update (mode "update", as onnxruntime's loop does), and updates of the wrong shape are refused by name."""
    x, d = rand(3, 4, 5), rand(4, 5)
    idx = np.array([[[0, -1], [3, 2]], [[1, 1], [-4, 0]], [[2, 3], [0, -2]]], "int64")  # (3, 2, 2): gather axis 1
    tuples = np.array([[0, 2, -1], [1, 3, 0]], "int64")  # (M=2, 3 tuples)
    rows = np.array([[0, 3, -1]], "int64")  # (M=1, 3 updates): row 3 twice
    upd, ones = rand(3, 5), np.ones((2, 5), "float32")
    X, D = relay.var("x", shape=x.shape), relay.var("d", shape=d.shape)
    I, T, R = (relay.var(n, shape=a.shape, dtype="int64") for n, a in (("i", idx), ("t", tuples), ("r", rows)))
    U = relay.var("u", shape=upd.shape)
    outs = run(relay.Function([X, D, I, T, R, U], relay.Tuple([
        relay.gather(X, 1, I), relay.gather_nd(X, T), relay.scatter_nd(D, R, U),
        relay.scatter_nd(D, R, U, mode="add"),
        relay.scatter_elements(D, relay.const(np.array([[1, -1, 0, 2, 3], [3, 0, 1, 1, 2]], "int64")),
                               relay.const(ones), axis=0, reduction="add"),
        relay.one_hot(T, relay.const(np.float32(2)), relay.const(np.float32(-1)), 4, axis=1)])),
        {"x": x, "d": d, "i": idx, "t": tuples, "r": rows, "u": upd})
    np.testing.assert_array_equal(outs[0], np.take_along_axis(x[:, :, :2], idx % 4, axis=1))
    np.testing.assert_array_equal(outs[1], np.stack([x[0, 1], x[2, 3], x[2, 0]]))
    last, added = d.copy(), d.copy()
    for k, r in enumerate([0, 3, 3]):
        last[r] = upd[k]
        added[r] += upd[k]
    np.testing.assert_array_equal(outs[2], last)
    np.testing.assert_allclose(outs[3], added, rtol=1e-6)
    hits = d.copy()
    for j, (a, b) in enumerate(zip([1, 3, 0, 2, 3], [3, 0, 1, 1, 2])):
        hits[a, j] += 1
        hits[b, j] += 1
    np.testing.assert_allclose(outs[4], hits, rtol=1e-6)
    hot = np.full((2, 4, 3), -1, "float32")
    for a in range(2):
        for b in range(3):
            hot[a, tuples[a, b] % 4, b] = 2
    np.testing.assert_array_equal(outs[5], hot)
    one, row = relay.var("one", shape=(1,), dtype="int64"), relay.var("row", shape=(5,))  # indices (M,): one update
    (single,) = run(relay.Function([D, one, row], relay.scatter_nd(D, one, row)),
                    {"d": d, "one": np.array([-2], "int64"), "row": upd[0]})
    want = d.copy()
    want[2] = upd[0]
    np.testing.assert_array_equal(single, want)
    with pytest.raises(relay.RelayError, match=r"scatter_nd: updates must be \(3, 5\) float32"):
        relay.transform.InferType()(relay.IRModule.from_expr(relay.scatter_nd(D, R, relay.var("w", shape=(3, 4)))))
    # topk: TVM's default ret_type "both" is (values, int32 indices); ties keep their order
    ties = np.array([[2, 7, 7, 1, 7], [0, -1, 3, 3, 9]], "float32")
    T2 = relay.var("t", shape=ties.shape)
    values, indices = run(relay.Function([T2], relay.topk(T2, k=3)), {"t": ties})
    np.testing.assert_array_equal(indices, [[1, 2, 4], [4, 2, 3]])
    np.testing.assert_array_equal(values, [[7, 7, 7], [9, 3, 3]])
    assert indices.dtype == np.int32
    (low,) = run(relay.Function([T2], relay.topk(T2, k=2, axis=0, ret_type="indices", is_ascend=True)), {"t": ties})
    np.testing.assert_array_equal(low, [[1, 1, 1, 0, 0], [0, 0, 0, 1, 1]])
    with pytest.raises(relay.RelayError, match="topk: k=6 must be between 1 and the 5 elements of axis 1"):
        relay.transform.InferType()(relay.IRModule.from_expr(relay.topk(T2, k=6, ret_type="values")))


def test_a_reshape_on_its_own_runs_no_kernel_and_shares_its_input_storage():
    """A fused function that only reshapes (after an op it cannot fuse into, such as softmax) is a ``__nop``
    node: no kernel runs, its entry is its input's storage under another shape (TVM's graph executor does the
    same). The storage is not reused while a reader of either name is left, nor ever when the reshape or its
    input is an output."""
    x = relay.var("x", shape=(2, 3, 4))
    s1 = relay.nn.softmax(x)
    inner = relay.reshape(s1, (6, 4))          # read by a later kernel only
    s2 = relay.nn.softmax(inner)
    flat = relay.reshape(relay.nn.softmax(s2), (24,))  # a graph output
    late = relay.nn.softmax(relay.reshape(s2, (4, 6)))  # s2 read again after other kernels ran
    f = relay.Function([x], relay.Tuple([flat, late, relay.nn.softmax(inner) * relay.const(np.float32(2.0))]))
    with transform.PassContext(opt_level=3):
        graph_json, lib, params = relay.build(f, "llvm")
    graph = json.loads(graph_json)
    nodes, row = graph["nodes"], graph["node_row_ptr"]
    sid = graph["attrs"]["storage_id"][1]
    nops = [k for k, n in enumerate(nodes) if n["op"] == "tvm_op" and n["attrs"]["func_name"] == "__nop"]
    assert len(nops) == 3, [n["name"] for n in nodes]
    for k in nops:
        (src,) = nodes[k]["inputs"]
        assert sid[row[k]] == sid[row[src[0]] + src[1]]
    m = graph_executor.GraphModule(graph_json, lib, params)
    xd = rand(2, 3, 4)
    m.set_input("x", xd)
    m.run()

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    s2_ref = softmax(softmax(xd).reshape(6, 4))
    np.testing.assert_allclose(m.get_output(0), softmax(s2_ref).reshape(24), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.get_output(1), softmax(s2_ref.reshape(4, 6)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.get_output(2), s2_ref * 2, rtol=1e-5, atol=1e-6)


def test_pools_softmax_and_injective_ops():
    x = relay.var("x", shape=(1, 3, 9, 9))
    mp = relay.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    mpc = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), ceil_mode=True)
    ap = relay.nn.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    api = relay.nn.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), count_include_pad=True)
    gp = relay.nn.global_avg_pool2d(x)
    fl = relay.nn.batch_flatten(gp)                                # (1, 3)
    sm = relay.nn.softmax(relay.reshape(x, (0, -1, 9)), axis=1)    # (1, 27, 9) softmax over 27
    tr = relay.transpose(x, (0, 2, 3, 1))
    cat = relay.concatenate([mp, ap, api], axis=1)                 # (1, 9, 5, 5)
    pd = relay.nn.pad(x, ((0, 0), (1, 0), (0, 2), (1, 1)), pad_value=-1.0)
    f = relay.Function([x], relay.Tuple([cat, mpc, fl, sm, tr, pd]))
    xd = rand(1, 3, 9, 9)
    outs = run(f, {"x": xd})
    p = (1, 1, 1, 1)
    ref_cat = np.concatenate([np_pool(xd, (3, 3), (2, 2), p, "max"), np_pool(xd, (3, 3), (2, 2), p, "avg"),
                              np_pool(xd, (3, 3), (2, 2), p, "avg", count_include_pad=True)], axis=1)
    np.testing.assert_allclose(outs[0], ref_cat, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1], np_pool(xd, (2, 2), (2, 2), (0, 0, 0, 0), "max", ceil_mode=True))
    assert outs[1].shape == (1, 3, 5, 5)
    np.testing.assert_allclose(outs[2], xd.mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[3], np_softmax(xd.reshape(1, 27, 9), axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outs[4], xd.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(outs[5], np.pad(xd, ((0, 0), (1, 0), (0, 2), (1, 1)), constant_values=-1.0))


def test_batch_norm_is_folded_into_conv_weights():
    x = relay.var("data", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    gamma, beta, mean, var = (relay.var(n, shape=(4,)) for n in ("gamma", "beta", "mean", "var"))
    conv = relay.nn.conv2d(x, w, padding=(1, 1), channels=4, kernel_size=(3, 3))
    bn = relay.nn.batch_norm(conv, gamma, beta, mean, var, epsilon=1e-3)
    f = relay.Function([x, w, gamma, beta, mean, var], relay.nn.relu(bn[0]))
    params = {"w": rand(4, 3, 3, 3), "gamma": rand(4), "beta": rand(4), "mean": rand(4),
              "var": np.abs(rand(4)) + 0.5}
    fused = relay.optimize(relay.IRModule.from_expr(f), params)
    text = str(fused)
    assert "nn.batch_norm" not in text and "multiply" not in text  # the scale lives in the weights now
    calls = [n for n in relay.expr.post_order(fused["main"].body) if isinstance(n, relay.Call)]
    # one kernel: the convolution, the shift left of the batch norm and the relu (4 channels stay NCHW)
    assert "fused_conv2d_add_relu" in [c.op.attrs.get("name") for c in calls]
    xd = rand(1, 3, 8, 8)
    (out,) = run(f, {"data": xd}, params)
    conv_ref = np_conv2d(xd, params["w"], padding=(1, 1, 1, 1))
    sc = params["gamma"] / np.sqrt(params["var"] + 1e-3)
    ref = np.maximum((conv_ref - params["mean"][None, :, None, None]) * sc[None, :, None, None]
                     + params["beta"][None, :, None, None], 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # without SimplifyInference's constants (inputs as variables) batch_norm still computes the same
    (out2,) = run(f, {"data": xd, **params})
    np.testing.assert_allclose(out2, ref, rtol=1e-4, atol=1e-4)


def test_type_inference_errors_name_the_op_and_shapes():
    x = relay.var("x", shape=(1, 3, 8, 8))
    bad = relay.nn.conv2d(x, relay.var("w", shape=(8, 4, 3, 3)))
    with pytest.raises(relay.RelayError, match=r"nn\.conv2d.*\(1, 3, 8, 8\).*\(8, 4, 3, 3\)"):
        relay.transform.InferType()(relay.IRModule.from_expr(bad))
    add = relay.add(relay.var("a", shape=(2, 3)), relay.var("b", shape=(4, 3)))
    with pytest.raises(relay.RelayError, match=r"add: shapes \(2, 3\) and \(4, 3\) do not broadcast"):
        relay.transform.InferType()(relay.IRModule.from_expr(add))
    with pytest.raises(relay.RelayError, match=r"reshape: cannot reshape \(1, 3, 8, 8\)"):
        relay.transform.InferType()(relay.IRModule.from_expr(relay.reshape(x, (5, -1))))
    with pytest.raises(relay.RelayError, match="unknown attribute"):
        relay.op.make_call("nn.conv2d", [x, x], stride=2)


def test_passes_fold_constants_cse_dce_and_opt_level():
    x = relay.var("x", shape=(4,))
    c = relay.add(relay.const(np.arange(4, dtype="float32")), relay.const(np.ones(4, "float32")))
    a1 = relay.multiply(x, c)
    a2 = relay.multiply(x, c)
    body = relay.TupleGetItem(relay.Tuple([relay.add(a1, a2), relay.sigmoid(x)]), 0)
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    seq = transform.Sequential([transform.InferType(), transform.FoldConstant(), transform.EliminateCommonSubexpr(),
                                transform.DeadCodeElimination()])
    with transform.PassContext(opt_level=3):
        out = seq(mod)
    text = str(out)
    assert text.count("multiply") == 1 and "sigmoid" not in text and "add(meta" not in text
    folded = [n for n in relay.expr.post_order(out["main"].body) if isinstance(n, relay.Constant)]
    np.testing.assert_array_equal(folded[0].data, np.arange(4) + 1.0)
    with transform.PassContext(opt_level=1):  # FoldConstant (2) and CSE (3) do not run
        out1 = seq(mod)
    assert str(out1).count("multiply") == 2
    xd = rand(4)
    (res,) = run(mod, {"x": xd})
    np.testing.assert_allclose(res, 2 * xd * (np.arange(4) + 1.0), rtol=1e-6)
    # opt_level 0: every op is its own kernel
    with transform.PassContext(opt_level=0):
        g0 = relay.build(relay.Function([x], relay.nn.relu(relay.sigmoid(x))), "llvm")[0]
    assert len(kernels_of(g0)) == 2
    g2 = relay.build(relay.Function([x], relay.nn.relu(relay.sigmoid(x))), "llvm")[0]
    assert len(kernels_of(g2)) == 1


def _two_conv_model():
    x = relay.var("data", shape=(1, 8, 10, 10))
    w1, w2, w3 = (relay.var(n, shape=(8, 8, 3, 3)) for n in ("w1", "w2", "w3"))
    h = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1)))
    h = relay.nn.relu(relay.nn.conv2d(h, w2, padding=(1, 1)))
    h = relay.add(relay.nn.conv2d(h, w3, strides=(2, 2)), relay.const(np.float32(1.0)))
    y = relay.nn.dense(relay.nn.batch_flatten(h), relay.var("fc", shape=(3, 128)))
    params = {"w1": rand(8, 8, 3, 3), "w2": rand(8, 8, 3, 3), "w3": rand(8, 8, 3, 3), "fc": rand(3, 128)}
    return relay.IRModule.from_expr(relay.Function(relay.expr.free_vars(y), y)), params


def test_extract_tasks_weights():
    mod, params = _two_conv_model()
    tasks = relay.extract_tasks(mod, params, "llvm")
    assert [t.weight for t in tasks] == [2, 1, 1]  # the two identical conv+relu layers share a task
    assert all(t.name == "relay.fused" for t in tasks)
    import pickle

    again = pickle.loads(pickle.dumps(tasks[0]))
    assert again.workload_key == tasks[0].workload_key


def test_a_fused_kernel_is_found_by_name_in_a_process_without_relay(tmp_path):
    """A record of a fused kernel, read in a fresh process that never imported relay, gives back its task (as
    ``autosched tune --workload relay.fused`` would make it): the workload registry, below relay, has the
    package facade's loader register the fused workload on first use of its name; an unknown name still fails
    with the registered names."""
    from autosched.database import Database
    from autosched.result import MeasureResult
    from autosched.te.trace import Trace

    mod, params = _two_conv_model()
    task = relay.extract_tasks(mod, params, "llvm")[0]
    with Database(str(tmp_path / "r.db")) as db:
        db.commit(task, Trace([]), MeasureResult(costs=[1e-3], timestamp=1.0))
    code = (
        "import sys, json, autosched\n"
        "from autosched.database import Database\n"
        "before = 'autosched.relay' in sys.modules\n"
        f"(rec,) = Database({str(tmp_path / 'r.db')!r}).records()\n"
        "t = rec.task()\n"
        "try:\n"
        "    autosched.Task('relay.no_such_kernel')\n"
        "    err = ''\n"
        "except KeyError as e:\n"
        "    err = str(e)\n"
        "print(json.dumps([before, t.name, t.workload_key, len(t.tensors()), err]))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert res.returncode == 0, res.stderr
    before, name, key, ntensors, err = json.loads(res.stdout)
    assert not before and name == "relay.fused" and key == task.workload_key
    assert ntensors == len(task.tensors())
    assert "unknown workload 'relay.no_such_kernel'" in err and "relay.fused" in err


def test_export_folder_runs_without_llvmlite(tmp_path):
    mod, params = _two_conv_model()
    graph_json, lib, out_params = relay.build(mod, "llvm", params=params)
    xd = rand(1, 8, 10, 10)
    m = graph_executor.GraphModule(graph_json, lib, out_params)
    m.set_input("data", xd)
    m.run()
    expected = m.get_output(0)
    graph_executor.export(tmp_path, graph_json, lib, out_params)
    np.save(tmp_path / "x.npy", xd)
    np.save(tmp_path / "expected.npy", expected)
    code = (
        "import sys; sys.modules['llvmlite'] = None\n"
        "import numpy as np\n"
        "from autosched.runtime import graph_executor\n"
        f"d = {str(tmp_path)!r}\n"
        "m = graph_executor.load(d)\n"
        "assert m.lib.run_plan_address  # the kernels run from the library's native loop\n"
        "m.set_input('data', np.load(d + '/x.npy')); m.run()\n"
        "np.testing.assert_allclose(m.get_output(0), np.load(d + '/expected.npy'), rtol=1e-5, atol=1e-5)\n"
        "assert 'llvmlite.binding' not in sys.modules\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "AUTOSCHED_NUM_THREADS": "1"})
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr


def test_a_graph_calls_its_kernels_from_one_native_loop(monkeypatch):
    """``run`` hands every kernel to the library's run plan in one call (a ctypes call per kernel cost about a
    microsecond each, what a small kernel computes in); a library without a plan (exported before plans
    existed) runs the same kernels one by one, with the same results."""
    x = relay.var("x", shape=(3, 20))
    y = x
    for k in range(8):
        y = relay.nn.softmax(relay.exp(y) if k % 2 else relay.reshape(y, (20, 3)) * relay.const(np.float32(k + 1)))
        y = relay.reshape(y, (3, 20))
    graph_json, lib, params = relay.build(relay.Function([x], y), "llvm")
    assert lib.run_plan_address
    m = graph_executor.GraphModule(graph_json, lib, params)
    assert len(m._ops) >= 8 and len(m._runs) == 1 and len(m._runs[0].funcs) == len(m._ops)
    xd = rand(3, 20)
    m.set_input("x", xd)
    m.run()
    monkeypatch.setattr(lib, "run_plan_address", 0)
    one_by_one = graph_executor.GraphModule(graph_json, lib, params)
    assert len(one_by_one._runs) == len(m._ops)
    one_by_one.set_input("x", xd)
    one_by_one.run()
    np.testing.assert_array_equal(m.get_output(0), one_by_one.get_output(0))


def test_a_failing_kernel_stops_the_native_loop_with_its_own_error():
    """A kernel that fails (here: the registered function it calls raises) ends ``run`` with that error, and
    the kernels after it do not run."""
    n = 8
    a = te.placeholder((n,), name="a")
    checked = te.extern((n,), [a], lambda ins, outs: tir.call_packed("test_relay.check_positive", ins[0], outs[0]),
                        name="checked")
    b = te.placeholder((n,), name="b")
    doubled = te.compute((n,), lambda i: b[i] * 2, name="doubled")
    lib = build_many([autosched.lower(te.create_schedule(checked.op), [a, checked], name="check"),
                      autosched.lower(te.create_schedule(doubled.op), [b, doubled], name="double")])
    entry = {"shape": [n], "dtype": "float32"}
    graph = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                       {"op": "tvm_op", "name": "check", "inputs": [[0, 0, 0]],
                        "attrs": {"func_name": "check", "num_outputs": 1}},
                       {"op": "tvm_op", "name": "double", "inputs": [[1, 0, 0]],
                        "attrs": {"func_name": "double", "num_outputs": 1}}],
             "arg_nodes": [0], "heads": [[2, 0, 0]], "node_row_ptr": [0, 1, 2, 3],
             "attrs": {"shape": ["list_shape", [entry["shape"]] * 3], "dltype": ["list_str", [entry["dtype"]] * 3]}}

    def check_positive(src, dst):
        if (src.numpy() <= 0).any():
            raise ValueError("check_positive: a value <= 0")
        dst.copyfrom(src.numpy())

    register_func("test_relay.check_positive", check_positive)
    try:
        m = graph_executor.GraphModule(graph, lib)
        assert len(m._runs) == 1
        m.run(x=np.arange(1, n + 1, dtype="float32"))
        np.testing.assert_array_equal(m.get_output(0), 2 * np.arange(1, n + 1, dtype="float32"))
        with pytest.raises(ValueError, match="check_positive: a value <= 0"):
            m.run(x=-np.ones(n, "float32"))
        np.testing.assert_array_equal(m.get_output(0), 2 * np.arange(1, n + 1, dtype="float32"))  # not run again
    finally:
        remove_global_func("test_relay.check_positive")


def test_tuned_record_is_used_by_build(tmp_path, caplog):
    import autosched

    mod, params = _two_conv_model()
    xd = rand(1, 8, 10, 10)
    g0, lib0, p0 = relay.build(mod, "llvm", params=params)
    assert all(k["attrs"]["tuned"] == "0" for k in kernels_of(g0))
    m0 = graph_executor.GraphModule(g0, lib0, p0)
    m0.set_input("data", xd)
    m0.run()
    untuned = m0.get_output(0)
    tasks = relay.extract_tasks(mod, params, "llvm")
    conv_task = next(t for t in tasks if "nn.conv2d" in t.args["graph"] and '"strides":[2,2]' in t.args["graph"])
    db = f"sqlite:///{tmp_path / 'tune.db'}"
    best = autosched.tune(conv_task, trials=8, backend="local", database=db, seed=0)
    assert best is not None
    with caplog.at_level(logging.INFO, logger="autosched.relay"):
        with autosched.apply_history_best(db):
            result = relay.build(mod, "llvm", params=params)
    g1, lib1, p1 = result
    tuned = [k for k in kernels_of(g1) if k["attrs"]["tuned"] == "1"]
    assert len(tuned) == 1 and tuned[0]["attrs"]["workload_key"] == conv_task.workload_key
    assert f"{len(result.kernels)} kernels, 1 tuned" in caplog.text
    assert [k["tuned"] for k in result.kernels].count(True) == 1
    m1 = graph_executor.GraphModule(g1, lib1, p1)
    m1.set_input("data", xd)
    m1.run()
    np.testing.assert_allclose(m1.get_output(0), untuned, rtol=1e-4, atol=1e-4)


def test_default_schedule_of_a_fused_conv_is_the_expert_nest_and_printer():
    x = relay.var("data", shape=(1, 8, 14, 14))
    y = relay.nn.relu(relay.add(relay.nn.conv2d(x, relay.const(rand(16, 8, 3, 3)), padding=1),
                                relay.const(rand(16, 1, 1))))
    (task,) = autosched_extract(relay.Function([x], y))
    steps = task.default_trace().to_json()
    kinds = [s[0] for s in (steps if isinstance(steps, list) else json.loads(steps))]
    assert "cache_write" in kinds and "compute_at" in kinds and "parallel" in str(steps)
    text = str(relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], y))))
    assert text.startswith("def @main (%data: Tensor[(1, 8, 14, 14), float32])")
    assert "%0 = nn.conv2d(%data, meta[Constant][0]" in text and "ty=Tensor[(1, 16, 14, 14), float32]" in text


def autosched_extract(func):
    import autosched

    return autosched.extract_tasks(relay.IRModule.from_expr(func), None, "llvm")


def test_adding_an_op_as_documented():
    from autosched import te
    from autosched.relay import op as relay_op
    from autosched.relay.ir.expr import RelayError

    def leaky_relu_rel(arg_types, attrs):
        if len(arg_types) != 1:
            raise RelayError(f"nn.leaky_relu takes 1 argument, got {len(arg_types)}")
        return arg_types[0]

    def leaky_relu_compute(inputs, attrs, out_type):
        (x,) = inputs
        alpha = te.const(attrs["alpha"], x.dtype)
        return te.compute(out_type.shape, lambda *i: te.if_then_else(x[i] > 0, x[i], x[i] * alpha),
                          name="leaky_relu")

    relay_op.register_op(relay_op.OpDef(
        "nn.leaky_relu", leaky_relu_rel, leaky_relu_compute, relay_op.ELEMWISE,
        attrs={"alpha": 0.01}, num_inputs=1, doc="x if x > 0 else alpha * x"))

    x = relay.var("data", shape=(1, 2, 6, 6))
    w = rand(16, 2, 3, 3)
    y = relay_op.make_call("nn.leaky_relu", [relay.nn.conv2d(x, relay.const(w))], alpha=0.2)
    graph_json, lib, params = relay.build(relay.Function([x], y), "llvm")
    # an elementwise op keeps the blocked layout (AlterOpLayout), so it fuses into the convolution
    assert [k["name"] for k in kernels_of(graph_json)] == ["fused_conv2d_nchwc_leaky_relu_0",
                                                            "fused_layout_transform_1"]
    xd = rand(1, 2, 6, 6)
    m = graph_executor.GraphModule(graph_json, lib, params)
    m.set_input("data", xd)
    m.run()
    c = np_conv2d(xd, w)
    np.testing.assert_allclose(m.get_output(0), np.where(c > 0, c, 0.2 * c), rtol=1e-4, atol=1e-5)


def test_executor_and_build_errors():
    x = relay.var("x", shape=(2, 3))
    graph_json, lib, params = relay.build(relay.Function([x], relay.nn.relu(x)), "llvm")
    m = graph_executor.GraphModule(graph_json, lib, params)
    with pytest.raises(ValueError, match=r"input 'x' has shape \(3, 2\), the graph expects \(2, 3\)"):
        m.set_input("x", np.zeros((3, 2), "float32"))
    with pytest.raises(KeyError, match="no input 'y'"):
        m.set_input("y", np.zeros((2, 3), "float32"))
    with pytest.raises(relay.RelayError, match="params nope are not inputs"):
        relay.build(relay.Function([x], relay.nn.relu(x)), "llvm", params={"nope": np.zeros(3)})


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_conv_with_epilogue(stride):
    x = relay.var("x", shape=(1, 6, 10, 9))
    w, b = rand(6, 1, 3, 3), rand(6)
    y = relay.clip(relay.nn.bias_add(relay.nn.conv2d(x, relay.const(w), strides=stride, padding=1, groups=6),
                                     relay.const(b)), 0.0, 6.0)
    (task,) = autosched_extract(relay.Function([x], y))
    assert "compute_at" in str(task.default_trace().to_json())
    xd = rand(1, 6, 10, 9)
    (out,) = run(relay.Function([x], y), {"x": xd})
    ref = np.clip(np_conv2d(xd, w, (stride, stride), (1, 1, 1, 1), groups=6) + b[None, :, None, None], 0, 6)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_residual_block_with_batch_norms_fuses_to_two_kernels():
    def conv_bn(x, cin, name):
        w = relay.var(name + "_w", shape=(cin, cin, 3, 3))
        stats = [relay.var(f"{name}_{t}", shape=(cin,)) for t in "gbmv"]
        return relay.nn.batch_norm(relay.nn.conv2d(x, w, padding=1), *stats)[0]

    x = relay.var("data", shape=(1, 16, 7, 7))
    h = relay.nn.relu(conv_bn(x, 16, "a"))
    y = relay.nn.relu(relay.add(conv_bn(h, 16, "b"), x))
    params = {}
    for n in "ab":
        params[n + "_w"] = rand(16, 16, 3, 3) * 0.1
        params.update({f"{n}_g": rand(16), f"{n}_b": rand(16), f"{n}_m": rand(16),
                       f"{n}_v": np.abs(rand(16)) + 0.5})
    func = relay.Function(relay.expr.free_vars(y), y)
    with relay.transform.PassContext(opt_level=2):
        graph_json = relay.build(func, "llvm", params=params)[0]
    assert [k["name"][:-2] for k in kernels_of(graph_json)] == ["fused_conv2d_add_relu", "fused_conv2d_add_add_relu"]
    graph_json = relay.build(func, "llvm", params=params)[0]  # blocked: the same two convolutions, and transforms
    names = [k["name"].rsplit("_", 1)[0] for k in kernels_of(graph_json)]
    assert [n for n in names if "conv2d" in n] == ["fused_conv2d_nchwc_add_relu", "fused_conv2d_nchwc_add_add_relu"]
    assert set(names) - {"fused_conv2d_nchwc_add_relu", "fused_conv2d_nchwc_add_add_relu"} == {"fused_layout_transform"}
    xd = rand(1, 16, 7, 7)
    (out,) = run(func, {"data": xd}, params)

    def ref_conv_bn(v, n):
        c = np_conv2d(v, params[n + "_w"], padding=(1, 1, 1, 1))
        sc = params[n + "_g"] / np.sqrt(params[n + "_v"] + 1e-5)
        return (c - params[n + "_m"][:, None, None]) * sc[:, None, None] + params[n + "_b"][:, None, None]

    ref = np.maximum(ref_conv_bn(np.maximum(ref_conv_bn(xd, "a"), 0), "b") + xd, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_fusion_puts_at_most_max_depth_ops_in_a_kernel():
    # torch's exporter writes an adaptive pooling as ~600 gathers and adds: one kernel of them all was one
    # expression 600 levels deep; TVM caps a kernel at 256 ops, and so does FuseOps
    x, y = relay.var("x", shape=(4, 8)), relay.var("y", shape=(4, 8))
    h = x
    for _ in range(150):
        h = relay.tanh(relay.add(h, y))
    func = relay.Function([x, y], h)
    xd, yd = rand(4, 8), rand(4, 8)
    ref = xd
    for _ in range(150):
        ref = np.tanh(ref + yd)
    for config, sizes in (({}, 2), ({"relay.FuseOps.max_depth": 100}, 3)):
        with transform.PassContext(opt_level=3, config=config):
            graph_json, lib, params = relay.build(func, "llvm")
        assert len(kernels_of(graph_json)) == sizes
        m = graph_executor.GraphModule(graph_json, lib, params)
        m.set_input(x=xd, y=yd)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(relay.RelayError, match="max_depth"):
        transform.transform.fuse_ops(func, max_depth=0)


def test_task_key_does_not_depend_on_attribute_spelling():
    def key(**kw):
        x = relay.var("x", shape=(1, 4, 8, 8))
        y = relay.nn.conv2d(x, relay.var("w", shape=(4, 4, 3, 3)), **kw)
        (task,) = relay.extract_tasks(relay.Function([x, relay.expr.free_vars(y)[1]], y), None)
        return task.workload_key

    assert key(padding=1) == key(padding=(1, 1, 1, 1), channels=4, kernel_size=(3, 3)) == key(padding=(1, 1))
    assert key(padding=1) != key(padding=(1, 0))


def test_intermediate_values_share_storage():
    x = relay.var("x", shape=(4, 8))
    h = x
    for k in range(4):  # injective ops between opaque softmaxes: one kernel per softmax
        h = relay.nn.softmax(relay.add(h, relay.const(np.float32(k))), axis=1)
    graph_json, lib, params = relay.build(relay.Function([x], h), "llvm")
    graph = json.loads(graph_json)
    sids = graph["attrs"]["storage_id"][1]
    assert len(set(sids)) < len(sids)  # some intermediate buffers are reused
    m = graph_executor.GraphModule(graph_json, lib, params)
    xd = rand(4, 8)
    m.set_input("x", xd)
    m.run()
    ref = xd
    for k in range(4):
        ref = np_softmax(ref + k, axis=1)
    np.testing.assert_allclose(m.get_output(0), ref, rtol=1e-5, atol=1e-6)


def test_fold_constant_evaluates_many_constant_expressions_in_chunks():
    """A model with many constant sub-expressions (a QDQ model's dequantized weights: cast, subtract, multiply
    for every layer) folds them in kernels of a few each (one kernel for all nested past Python's recursion
    limit in codegen): 200 here, each its own value."""
    rng = np.random.default_rng(0)
    weights = [rng.integers(-128, 127, 6).astype("int8") for _ in range(200)]
    zero, scale = relay.const(np.int32(3)), relay.const(np.float32(0.02))
    body = relay.Tuple([relay.cast(relay.cast(relay.const(w), "int32") - zero, "float32") * scale for w in weights])
    folded = transform.FoldConstant()(relay.IRModule.from_expr(relay.Function([], body)))["main"].body
    assert len(folded.fields) == 200 and all(isinstance(f, relay.Constant) for f in folded.fields)
    for f, w in zip(folded.fields, weights):
        np.testing.assert_allclose(f.data, (w.astype(np.int32) - 3).astype(np.float32) * np.float32(0.02))


def test_a_kv_cache_concatenation_copies_whole_rows_in_vectors():
    """Tokens appended to a KV cache, [batch, heads, tokens, size] along the tokens: each row of the output is
    a vector copy from one input (moving the last axis outside the tokens copied it element by element, a row
    apart: 0.9 ms for a 2 MB cache, 50 us now), and the values are numpy's."""
    past = relay.var("past", shape=(1, 4, 37, 24), dtype="float32")
    new = relay.var("new", shape=(1, 4, 3, 24), dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function([past, new], relay.concatenate([past, new], axis=2)))
    graph_json, lib, params = relay.build(mod, target="llvm")
    text = lib.get_source("ll-unopt")
    assert len(re.findall(r"load <\d+ x float>", text)) >= 2 and "masked.gather" not in text
    m = graph_executor.GraphModule(graph_json, lib, params)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1, 4, 37, 24)).astype("float32"), rng.standard_normal((1, 4, 3, 24)).astype("float32")
    m.set_input("past", a)
    m.set_input("new", b)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), np.concatenate([a, b], axis=2))


@pytest.mark.parametrize("m, k", [(1, 128), (3, 37)])
def test_a_few_rows_against_a_transposed_operand_are_dot_products_of_its_rows(m, k):
    """x @ y^T with a few rows of x (a decode step's scores against a KV cache): no transposed copy of y, each
    output a dot product of contiguous rows in vector lanes (a depth no vector divides guarded), and numpy's
    values with the epilogue applied."""
    rng = np.random.default_rng(0)
    xd, yd = rng.standard_normal((3, m, k)).astype("float32"), rng.standard_normal((3, 9, k)).astype("float32")
    x, y = relay.var("x", shape=xd.shape), relay.var("y", shape=yd.shape)
    out = relay.nn.batch_matmul(x, y, transpose_b=True) * relay.const(np.float32(0.5))
    with Target("llvm"):
        fused = relay.optimize(relay.IRModule.from_expr(relay.Function([x, y], out)), {})
    gb = _GraphBuilder(fused["main"], "llvm", use_records=False)
    gb.run()
    assert [f.name for f in gb.prims] == ["fused_batch_matmul_multiply_0"]  # no transpose kernel before it
    assert f"vectorized (k, 0, {k})" in str(gb.prims[0]), str(gb.prims[0])  # each dot product in vector lanes
    (got,) = run(relay.Function([x, y], out), {"x": xd, "y": yd})
    np.testing.assert_allclose(got, xd @ yd.transpose(0, 2, 1) * 0.5, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, threads", [((2, 192), False), ((2, 24, 48), False), ((64, 1024), True)])
def test_a_tiny_injective_kernel_runs_on_one_thread(shape, threads):
    """A recurrent layer's gates per step (a few hundred elements) run on the calling thread: waking libgomp's
    others and joining them cost about a microsecond, more than the kernel (an LSTM/GRU model of 256 kernels:
    0.54 -> 0.31 ms on Emerald Rapids); a large one runs in parallel as before."""
    x = relay.var("x", shape=shape)
    with Target("llvm"):
        fused = relay.optimize(relay.IRModule.from_expr(relay.Function([x], relay.sigmoid(x))), {})
    gb = _GraphBuilder(fused["main"], "llvm", use_records=False)
    gb.run()
    (kernel,) = gb.prims
    assert ("parallel" in str(kernel)) == threads and "vectorized" in str(kernel), str(kernel)
    xd = np.random.default_rng(0).standard_normal(shape).astype("float32")
    (got,) = run(relay.Function([x], relay.sigmoid(x)), {"x": xd})
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-xd)), rtol=1e-5, atol=1e-6)


def test_only_tuples_of_known_length_iterate_and_evaluate_takes_one_expression():
    """``list(expr)`` of a call used to index it forever (``[k]`` never runs out): it is refused by name; tuples
    and batch_norm's result unpack; ``evaluate`` of one expression gives its array."""
    x = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    with pytest.raises(TypeError, match="a relay Call is not iterable"):
        list(relay.exp(x))
    a, b = relay.Tuple([x, relay.exp(x)])
    assert a is x
    ones = relay.const(np.ones(3, "float32"))
    out, mean, var = relay.nn.batch_norm(x, ones, ones, ones, ones)
    assert (out.index, mean.index, var.index) == (0, 1, 2)
    np.testing.assert_allclose(relay.op.evaluate(b), np.exp(np.arange(6).reshape(2, 3)), rtol=1e-6)
    assert len(relay.op.evaluate([b, relay.exp(b)])) == 2
