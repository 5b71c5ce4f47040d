"""TVM's schedule primitives beyond split/reorder/fuse (issue 42): each recorded in the trace, replayed,
lowered, built for llvm and checked against numpy."""

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.errors import ScheduleError
from autosched.te.trace import Trace

RNG = np.random.default_rng(42)


def check_replay(s, outputs, args):
    """The trace of ``s`` replayed on a fresh schedule lowers to the same loop IR."""
    fresh = te.create_schedule([o.op for o in outputs])
    Trace.loads(s.trace.dumps()).replay(fresh)
    assert str(autosched.lower(fresh, args)) == str(autosched.lower(s, args))


# -- cache_write of a reduction whose range depends on a spatial axis ---------------------------------


def _triangular(n):
    A = te.placeholder((n,), name="A")

    def f(i):
        k = te.reduce_axis((0, i + 1), name="k")
        return te.sum(A[k], axis=k)

    return A, te.compute((n,), f, name="B")


@pytest.mark.parametrize("how", ["plain", "compute_at", "split_both", "parallel"])
def test_cache_write_triangular_sum(how):
    n = 37
    A, B = _triangular(n)
    s = te.create_schedule(B.op)
    if how != "parallel":
        BL = s.cache_write(B, "local")
    if how == "compute_at":
        xo, _ = s[B].split(B.op.axis[0], factor=8)
        s[BL].compute_at(s[B], xo)
    elif how == "split_both":
        s[BL].split(BL.op.axis[0], factor=8)
        s[BL].split(BL.op.reduce_axis[0], factor=4)
    elif how == "parallel":
        xo, _ = s[B].split(B.op.axis[0], factor=8)
        s[B].parallel(xo)
    a = RNG.random(n).astype("float32")
    b = np.zeros(n, "float32")
    autosched.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, np.cumsum(a), rtol=1e-5)
    check_replay(s, [B], [A, B])


def test_reduction_loop_outside_the_axis_its_range_needs_is_refused():
    A, B = _triangular(8)
    s = te.create_schedule(B.op)
    s[B].reorder(B.op.reduce_axis[0], B.op.axis[0])
    with pytest.raises(ScheduleError, match="stage 'B'.*reduction loop 'k'.*depends on loop 'i'"):
        autosched.lower(s, [A, B])
