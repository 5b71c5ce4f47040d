"""Packed dot products (``te.expr.PACKED_DOTS``: VNNI's ``dot4_u8s8``, ``pmaddwd``'s ``dot2_i16``): each operand
load reads a 32-bit word of its buffer, which lowering, the search space and code generation must all know."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from _cpus import host_runs
from autosched import relay, te, tune
from autosched.codegen.build import build
from autosched.database import Database
from autosched.errors import CodegenError
from autosched.relay.backend.build_module import extract_tasks
from autosched.te import expr as E
from autosched.transform import PassContext


def _padded_dot2_conv():
    """A 3x3 convolution of int16 NCHW8c data by weights packed [O/8, I/8, 3, 3, 4, 8, 2], a dot2_i16 per pair
    of input channels, the zero padding a stage of its own."""
    data = te.placeholder((1, 2, 6, 6, 8), "int16", name="data")
    weight = te.placeholder((2, 2, 3, 3, 4, 8, 2), "int16", name="weight")
    pad = te.compute((1, 2, 8, 8, 8), lambda n, c, y, x, b: te.if_then_else(
        te.all(y >= 1, y < 7, x >= 1, x < 7), data[n, c, y - 1, x - 1, b], te.const(0, "int16")), name="pad")
    icb, kh, kw, i2 = (te.reduce_axis((0, e), name=nm) for e, nm in ((2, "icb"), (3, "kh"), (3, "kw"), (4, "i2")))
    out = te.compute((1, 2, 6, 6, 8), lambda n, ob, y, x, o: te.sum(E.Call("int32", "dot2_i16", [
        E.const(0, "int32"), pad[n, icb, y + kh, x + kw, i2 * 2], weight[ob, icb, kh, kw, i2, o, 0]]),
        axis=[icb, kh, kw, i2]), name="conv")
    return data, weight, pad, out


def _reference(d: np.ndarray, w: np.ndarray) -> np.ndarray:
    p = np.pad(d.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((1, 2, 6, 6, 8), np.int64)
    for kh in range(3):
        for kw in range(3):
            # [n, icb, y, x, (i2, pair)] x [ob, icb, (i2, o, pair)] summed over icb, i2 and the pair
            win = p[:, :, kh:kh + 6, kw:kw + 6, :].reshape(1, 2, 6, 6, 4, 2)
            out += np.einsum("ncyxip,bciop->nbyxo", win, w[:, :, kh, kw].astype(np.int64))
    return out


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_a_padding_computed_inside_the_convolution_holds_each_operands_whole_word(cpu: str) -> None:
    """The padded data computed at the output's pixel loop: its region along the channels must cover the word
    each dot2_i16 reads from its index on (8 channels, not the 7 that the indices 0, 2, 4, 6 reach). The
    region inferred from the indices alone left the last channel unwritten, and tuned int8 kernels failed their
    check ("6231 of 6272 outputs differ"). Vectorized over the output channels: one vpmaddwd a step."""
    data, weight, pad, out = _padded_dot2_conv()
    s = te.create_schedule(out.op)
    n, ob, y, x, o = s[out].op.axis
    s[pad].compute_at(s[out], x)
    s[out].vectorize(o)
    target = f"llvm -mcpu={cpu}"
    mod = build(s, [data, weight, out], target=target)
    assert "vpmaddwd" in mod.get_source("asm")
    if host_runs(target):
        rng = np.random.default_rng(3)
        d = rng.integers(-300, 300, (1, 2, 6, 6, 8)).astype(np.int16)
        w = rng.integers(-128, 128, (2, 2, 3, 3, 4, 8, 2)).astype(np.int16)
        got = np.zeros((1, 2, 6, 6, 8), np.int32)
        mod(d, w, got)
        np.testing.assert_array_equal(got, _reference(d, w))


def test_a_dot_operand_must_be_a_load_of_its_dtype() -> None:
    """A dot2_i16 whose operand is not a load of an int16 buffer (the padding inlined into it, a byte buffer)
    cannot read a word: a CodegenError naming the intrinsic, the dtypes it takes and the operand."""
    data, weight, pad, out = _padded_dot2_conv()
    s = te.create_schedule(out.op)
    s[pad].compute_inline()
    with pytest.raises(CodegenError, match=r"dot2_i16: its operands must be loads of int16 buffers, got "):
        build(s, [data, weight, out], target="llvm")


@pytest.mark.parametrize("kind", ["conv2d", "dense"])
def test_tuning_int16_kernels_measures_only_correct_candidates(kind: str) -> None:
    """The generated space of an 8-bit convolution (the blocked nest, its padding never inlined into a dot
    operand) and of a dense too large for float32 on a CPU without VNNI: every candidate of a short random
    search builds and matches the untransformed kernel or is cut off as slow (before, most convolution
    candidates failed)."""
    rng = np.random.default_rng(0)
    if kind == "conv2d":
        x = relay.var("x", shape=(1, 16, 10, 10), dtype="uint8")
        y = relay.nn.conv2d(x, relay.const(rng.integers(-128, 128, (16, 16, 3, 3)).astype(np.int8)),
                            padding=(1, 1), out_dtype="int32")
    else:
        x = relay.var("x", shape=(8, 1024), dtype="uint8")
        y = relay.nn.dense(x, relay.const(rng.integers(120, 128, (32, 1024)).astype(np.int8)), out_dtype="int32")
    (task,) = extract_tasks(relay.IRModule.from_expr(relay.Function([x], y)), target="llvm -mcpu=haswell")
    assert task.name == "relay.fused" and any(f"{kind}_" in str(t.op.name) for t in task.tensors())
    if not host_runs("llvm -mcpu=haswell"):
        pytest.skip("this CPU cannot run AVX2 code")
    path = os.path.join(tempfile.mkdtemp(), "t.db")
    tune(task, 12, policy="random", database=path, backend="local", seed=0)
    with Database(path, create=False) as db:
        records = list(db.records())
    assert len(records) == 12
    failed = [(r.error_kind, r.error_msg[:120]) for r in records if not r.ok and r.error_kind != "cut_off"]
    assert not failed and sum(r.ok for r in records) >= 6, failed  # (a slow candidate is cut off: no failure)


def test_the_int16_option_takes_a_boolean() -> None:
    """``relay.int16_products`` (and ``relay.winograd``) are True or False: the string "false", which Python
    reads as true, is refused by name rather than leaving the int16 kernels on."""
    with pytest.raises(TypeError, match=r"config\['relay.int16_products'\] is True or False, got 'false'"):
        PassContext(config={"relay.int16_products": "false"})
    with pytest.raises(TypeError, match=r"config\['relay.winograd'\] is True or False"):
        PassContext(config={"relay.winograd": "off"})
    assert PassContext(config={"relay.int16_products": False}).config["relay.int16_products"] is False
