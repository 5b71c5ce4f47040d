"""TOPI's convolution variants under TVM v0.8's names (1-D NCW/NWC, 3-D NCDHW/NDHWC, 2-D HWCN, transposed 1-D,
3-D and grouped 2-D): each built through TVM's flow (placeholders, the op, its ``schedule_*``, ``tvm.build``) runs
and matches both ``topi.testing``'s reference and a direct numpy loop written here, and bad arguments raise
errors naming the argument and the rule."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as tvm
from autosched import te, topi
from autosched.errors import AutoschedError

RNG = np.random.default_rng(11)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _run(out: te.Tensor, schedule, args: list[te.Tensor], *arrays: np.ndarray) -> np.ndarray:
    """``out`` scheduled by ``schedule``, built for the CPU and run on ``arrays``."""
    func = tvm.build(schedule([out]), [*args, out], "llvm")
    result = tvm.nd.array(np.zeros([int(d) for d in out.shape], out.dtype))
    func(*[tvm.nd.array(a) for a in arrays], result)
    return result.numpy()


def _direct_conv(x: np.ndarray, w: np.ndarray, stride, dilation, pads) -> np.ndarray:
    """Channels-first convolution by its definition, one output position at a time: ``pads`` (begins, ends)."""
    nd = x.ndim - 2
    x = np.pad(x.astype("float64"), [(0, 0), (0, 0), *zip(pads[:nd], pads[nd:])])
    k = w.shape[2:]
    size = [(m - (kk - 1) * d - 1) // s + 1 for m, kk, s, d in zip(x.shape[2:], k, stride, dilation)]
    out = np.zeros((x.shape[0], w.shape[0], *size))
    for pos in np.ndindex(*size):
        at = tuple(slice(p * s, p * s + (kk - 1) * d + 1, d) for p, s, kk, d in zip(pos, stride, k, dilation))
        out[(..., *pos)] = np.tensordot(x[(slice(None), slice(None), *at)], w, axes=(range(1, nd + 2),) * 2)
    return out


def _direct_conv_transpose(x: np.ndarray, w: np.ndarray, stride, pads, out_pad, groups: int = 1) -> np.ndarray:
    """Transposed convolution by its definition: each input position adds its products with the [C_in,
    C_out / groups, k...] filter at ``position * stride``; then ``pads`` (begins, ends) are cropped."""
    nd = x.ndim - 2
    cin, og, *k = w.shape
    ig = cin // groups
    full = np.zeros((x.shape[0], og * groups, *[(m - 1) * s + kk + a for m, s, kk, a in
                                                  zip(x.shape[2:], stride, k, out_pad)]))
    for pos in np.ndindex(*x.shape[2:]):
        at = tuple(slice(p * s, p * s + kk) for p, s, kk in zip(pos, stride, k))
        for g in range(groups):
            part = np.tensordot(x[(slice(None), slice(g * ig, (g + 1) * ig), *pos)], w[g * ig:(g + 1) * ig], 1)
            full[(slice(None), slice(g * og, (g + 1) * og), *at)] += part
    return full[(..., *(slice(b, f - e) for b, e, f in zip(pads[:nd], pads[nd:], full.shape[2:])))]


def _close(got: np.ndarray, *wants: np.ndarray) -> None:
    for want in wants:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_pad_tuples_follow_tvm_the_odd_same_pad_first():
    assert topi.nn.get_pad_tuple1d("SAME", (4,)) == (2, 1)
    assert topi.nn.get_pad_tuple1d((1, 3), (5,)) == (1, 3)
    assert topi.nn.get_pad_tuple3d("SAME", (2, 3, 4)) == (1, 1, 2, 0, 1, 1)
    assert topi.nn.get_pad_tuple3d((1, 2, 0), (3, 3, 3)) == (1, 2, 0, 1, 2, 0)
    assert topi.nn.get_pad_tuple3d(1, (3, 3, 3)) == (1,) * 6
    with pytest.raises(AutoschedError, match=r"padding \(1, 2\) must be an int, 3 ints"):
        topi.nn.get_pad_tuple3d((1, 2), (3, 3, 3))


@pytest.mark.parametrize("stride,padding,dilation,pads", [(2, "SAME", 1, (2, 1)), (1, (1, 2), 2, (1, 2))])
def test_conv1d_ncw_nwc_match_the_reference_and_a_direct_loop(stride, padding, dilation, pads):
    x, w = _rand(2, 3, 11), _rand(5, 3, 4)
    want = _direct_conv(x, w, (stride,), (dilation,), pads)
    _close(topi.testing.conv1d_ncw_python(x, w, stride, padding, dilation), want)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = topi.nn.conv1d_ncw(X, W, stride, padding, dilation)
    _close(_run(out, topi.generic.schedule_conv1d_ncw, [X, W], x, w), want)
    xt, wt = x.transpose(0, 2, 1).copy(), w.transpose(2, 1, 0).copy()  # NWC data, WIO kernel
    Xt, Wt = te.placeholder(xt.shape, name="Xt"), te.placeholder(wt.shape, name="Wt")
    out = topi.nn.conv1d(Xt, Wt, stride, padding, dilation, layout="NWC")
    _close(_run(out, topi.x86.schedule_conv1d_nwc, [Xt, Wt], xt, wt), want.transpose(0, 2, 1))


def test_conv1d_errors_name_the_argument():
    X, W = te.placeholder((1, 3, 8), name="X"), te.placeholder((4, 2, 3), name="W")
    with pytest.raises(AutoschedError, match=r"conv1d_ncw: data has 3 channels but kernel of shape "
                                             r"\(4, 2, 3\) has 2 input channels"):
        topi.nn.conv1d_ncw(X, W)
    with pytest.raises(AutoschedError, match="layout 'NCHW' is not NCW or NWC"):
        topi.nn.conv1d(X, W, layout="NCHW")
    with pytest.raises(AutoschedError, match=r"conv1d_nwc: strides 0 must be an int or 1 ints, each >= 1"):
        topi.nn.conv1d_nwc(te.placeholder((1, 8, 3)), te.placeholder((3, 3, 4)), strides=0)


def test_conv3d_ncdhw_ndhwc_match_the_reference_and_a_direct_loop():
    x, w = _rand(1, 3, 5, 6, 7), _rand(4, 3, 2, 3, 3)
    stride, padding, pads = (1, 2, 1), "SAME", (1, 1, 1, 0, 1, 1)
    want = _direct_conv(x, w, stride, (1, 1, 1), pads)
    _close(topi.testing.conv3d_ncdhw_python(x, w, stride, padding), want)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = topi.x86.conv3d_ncdhw(X, W, stride, padding, 1)
    _close(_run(out, topi.x86.schedule_conv3d_ncdhw, [X, W], x, w), want)
    # NDHWC data, DHWIO filter, a dilated depth
    xt, wt = x.transpose(0, 2, 3, 4, 1).copy(), w.transpose(2, 3, 4, 1, 0).copy()
    want = _direct_conv(x, w, (1, 1, 1), (2, 1, 1), (0, 1, 0, 0, 1, 2))
    dilated = topi.testing.dilate_python(wt, (2, 1, 1, 1, 1))
    _close(topi.testing.conv3d_ndhwc_python(xt, dilated, 1, (0, 1, 0, 0, 1, 2)), want.transpose(0, 2, 3, 4, 1))
    Xt, Wt = te.placeholder(xt.shape, name="Xt"), te.placeholder(wt.shape, name="Wt")
    out = topi.nn.conv3d_ndhwc(Xt, Wt, 1, (0, 1, 0, 0, 1, 2), (2, 1, 1))
    _close(_run(out, topi.generic.schedule_conv3d_ndhwc, [Xt, Wt], xt, wt), want.transpose(0, 2, 3, 4, 1))


def test_conv3d_errors_name_the_argument():
    X = te.placeholder((1, 4, 5, 5, 5), name="X")
    with pytest.raises(AutoschedError, match=r"conv3d_ncdhw: Input has 4 channels but Filter of shape "
                                             r"\(2, 3, 3, 3, 3\) has 3 input channels"):
        topi.nn.conv3d_ncdhw(X, te.placeholder((2, 3, 3, 3, 3)), 1, 0, 1)
    with pytest.raises(AutoschedError, match=r"conv3d_ndhwc: stride \(1, 0, 1\) must be an int or 3 ints"):
        topi.nn.conv3d_ndhwc(te.placeholder((1, 5, 5, 5, 4)), te.placeholder((3, 3, 3, 4, 2)), (1, 0, 1), 0, 1)
    with pytest.raises(AutoschedError, match=r"conv3d_ncdhw: Filter must be a 5-D OIDHW tensor"):
        topi.nn.conv3d_ncdhw(X, te.placeholder((2, 4, 3, 3)), 1, 0, 1)


def test_conv2d_hwcn_matches_the_reference_and_a_direct_loop():
    x, w = _rand(7, 6, 3, 2), _rand(3, 3, 3, 4)  # HWCN data, HWIO filter
    want = _direct_conv(x.transpose(3, 2, 0, 1), w.transpose(3, 2, 0, 1), (2, 1), (1, 1), (1, 1, 1, 1))
    want = want.transpose(2, 3, 1, 0)
    _close(topi.testing.conv2d_hwcn_python(x, w, (2, 1), "SAME"), want)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = topi.cuda.conv2d_hwcn(X, W, (2, 1), "SAME", 1)
    _close(_run(out, topi.generic.schedule_conv2d_hwcn, [X, W], x, w), want)


def test_conv2d_hwcn_error_names_the_channels():
    with pytest.raises(AutoschedError, match=r"conv2d_hwcn: Input has 3 channels but Filter of shape "
                                             r"\(3, 3, 5, 4\) has 5 input channels"):
        topi.nn.conv2d_hwcn(te.placeholder((7, 6, 3, 2)), te.placeholder((3, 3, 5, 4)), 1, 1, 1)


def test_conv1d_transpose_ncw_matches_the_reference_and_the_definition():
    x, w = _rand(2, 3, 6), _rand(3, 2, 4)
    want = _direct_conv_transpose(x, w, (3,), (1, 2), (2,))
    _close(topi.testing.conv1d_transpose_ncw_python(x, w, 3, (1, 2), (2,)), want)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = topi.nn.conv1d_transpose_ncw(X, W, 3, (1, 2), "float32", (2,))
    _close(_run(out, topi.generic.schedule_conv1d_transpose_ncw, [X, W], x, w), want)


def test_conv3d_transpose_ncdhw_matches_the_reference_and_the_definition():
    x, w = _rand(1, 2, 3, 4, 3), _rand(2, 3, 3, 2, 3)
    stride, pads, out_pad = (2, 1, 2), (1, 0, 1, 0, 1, 1), (1, 0, 1)
    want = _direct_conv_transpose(x, w, stride, pads, out_pad)
    _close(topi.testing.conv3d_transpose_ncdhw_python(x, w, stride, pads, out_pad), want)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = topi.x86.conv3d_transpose_ncdhw(X, W, stride, pads, "float32", out_pad)
    _close(_run(out, topi.x86.schedule_conv3d_transpose_ncdhw, [X, W], x, w), want)


def test_group_conv2d_transpose_nchw_matches_the_reference_and_the_definition():
    x, w = _rand(1, 4, 5, 4), _rand(4, 3, 3, 2)  # 2 groups: 2 input channels each, 3 outputs each
    want = _direct_conv_transpose(x, w, (2, 1), (1, 0, 0, 1), (1, 0), groups=2)
    _close(topi.testing.conv2d_transpose_nchw_python(x, w, (2, 1), (1, 0, 0, 1), (1, 0), 2), want)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    out = topi.nn.group_conv2d_transpose_nchw(X, W, (2, 1), (1, 0, 0, 1), "float64", (1, 0), 2)
    assert out.dtype == "float64"  # the operands are cast to out_dtype, as TVM's astype in the sum
    _close(_run(out, topi.generic.schedule_group_conv2d_transpose_nchw, [X, W], x, w), want)


def test_transposed_convolution_errors_name_the_argument():
    X = te.placeholder((1, 4, 6), name="X")
    with pytest.raises(AutoschedError, match=r"conv1d_transpose_ncw: output_padding 2 must be smaller than the "
                                             r"strides \(2,\)"):
        topi.nn.conv1d_transpose_ncw(X, te.placeholder((4, 2, 3)), 2, 0, "float32", 2)
    with pytest.raises(AutoschedError, match=r"group_conv2d_transpose_nchw: data has 6 channels but kernel "
                                             r"of shape \(6, 2, 3, 3\) has 6 input channels; they must be equal and a "
                                             r"multiple of groups=4"):
        topi.nn.group_conv2d_transpose_nchw(te.placeholder((1, 6, 5, 5)), te.placeholder((6, 2, 3, 3)), 1, 0,
                                            "float32", 0, 4)
    with pytest.raises(AutoschedError, match=r"conv3d_transpose_ncdhw: padding \(1, 1\) must be an int, 3 ints"):
        topi.nn.conv3d_transpose_ncdhw(te.placeholder((1, 2, 3, 3, 3)), te.placeholder((2, 2, 3, 3, 3)), 1,
                                       (1, 1), "float32", 0)


def test_the_target_modules_and_schedules_carry_tvms_names():
    for module, names in ((topi.x86, ["conv3d_ncdhw", "conv3d_ndhwc", "conv3d_transpose_ncdhw"]),
                          (topi.cuda, ["conv1d_ncw", "conv1d_nwc", "conv1d_transpose_ncw", "conv2d_hwcn",
                                       "conv3d_ncdhw", "conv3d_ndhwc", "conv3d_transpose_ncdhw"])):
        for name in names:
            assert getattr(module, name) is getattr(topi.nn, name)
    for name in ("conv1d_ncw", "conv1d_nwc", "conv3d_ncdhw", "conv3d_ndhwc", "conv2d_hwcn", "conv1d_transpose_ncw",
                 "conv3d_transpose_ncdhw", "group_conv2d_transpose_nchw"):
        for module in (topi.generic, topi.x86, topi.cuda):
            assert callable(getattr(module, f"schedule_{name}"))
