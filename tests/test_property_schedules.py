"""Property-based tests: random legal schedules, compiled through LLVM, equal numpy.

Each example draws a small workload (shapes included, divisible or not) and a
random legal schedule for it (see ``_schedgen.py`` for what "legal" means
here), builds it with ``autosched.build(..., target="llvm")``, runs it on
random data with the outputs pre-filled with NaN (so an element that the
kernel never writes fails too), in arrays that are sometimes misaligned
(offset by 1-3 elements into a buffer: numpy promises no more alignment) and
guarded by sentinels on both sides (so an out-of-bounds write fails), and
compares with a float64 numpy reference (rtol 1e-4, atol 1e-5).

On a failure hypothesis prints the shrunk example's draws, the schedule as a
Python script, and the lowered loop IR.
"""

import os

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import autosched
from _schedgen import WORKLOADS, Chooser, RandomSchedule

pytestmark = pytest.mark.property

# Number of random schedules per workload; the suite promises >= 200 in all.
# AUTOSCHED_EXAMPLES_SCALE multiplies them (e.g. 10 with HYPOTHESIS_PROFILE=soak for a long bug hunt).
_SCALE = float(os.environ.get("AUTOSCHED_EXAMPLES_SCALE", "1"))
EXAMPLES = {
    "matmul": 120,
    "conv2d": 100,
    "depthwise": 60,
    "maxpool": 60,
    "softmax": 80,
    "broadcast": 60,
    "vecadd": 60,
    "matmul_symbolic": 40,
}
assert sum(EXAMPLES.values()) >= 200


def build_and_check(data, workload: str):
    ch = Chooser(data)
    wl = WORKLOADS[workload](ch)
    gen = RandomSchedule(wl, ch)
    try:
        s = gen.generate()
    finally:
        note(gen.script())
    try:
        misalign = ch.int(0, 3, "misalign (elements)")
        mod = autosched.build(s, wl.args, target="llvm", name=wl.name)
        wl.check(mod, misalign=misalign)
    except Exception:
        try:
            note("lowered:\n" + str(autosched.lower(s, wl.args, name=wl.name)))
        except Exception as e:  # lowering itself failed: the traceback says so
            note(f"(lower failed too: {type(e).__name__}: {e})")
        raise


def _make_test(workload: str):
    @settings(max_examples=max(1, round(EXAMPLES[workload] * _SCALE)))
    @given(data=st.data())
    def test(data):
        build_and_check(data, workload)

    test.__name__ = f"test_random_schedule_{workload}"
    test.__doc__ = f"Random legal schedules of {workload} equal numpy."
    return test


test_random_schedule_matmul = _make_test("matmul")
test_random_schedule_conv2d = _make_test("conv2d")
test_random_schedule_depthwise = _make_test("depthwise")
test_random_schedule_maxpool = _make_test("maxpool")
test_random_schedule_softmax = _make_test("softmax")
test_random_schedule_broadcast = _make_test("broadcast")
test_random_schedule_vecadd = _make_test("vecadd")
test_random_schedule_matmul_symbolic = _make_test("matmul_symbolic")


def test_example_counts_cover_every_workload():
    assert set(EXAMPLES) == set(WORKLOADS)
