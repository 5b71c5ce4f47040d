"""The process-pool backend with real crashing, hanging, wrong and slow-to-build candidates."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

import autosched
from _measure_procs import CONFIG, alive, ctrl_c_leaves_no_orphans
from _measure_workloads import (
    INVALID,
    mixed_batch,
    slow_build,
    small_conv,
    small_matmul,
    split_trace,
    tiled_matmul_trace,
)
from autosched.measure import (
    ErrorKind,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    Measurer,
    TooManyFailures,
)
from autosched.te import Trace


@pytest.fixture(scope="module")
def builder():
    b = LocalBuilder(n_parallel=1, timeout=20.0)
    yield b
    b.close()


@pytest.fixture(scope="module")
def runner():
    r = LocalRunner(CONFIG)
    yield r
    r.close()


def test_a_mixed_batch_completes_with_the_right_error_kinds(builder, runner):
    inputs, expected = mixed_batch()
    pids_before = set(runner.worker_pids)
    restarts = runner.restarts
    builds = builder.build(inputs)
    seen = []
    results = runner.run(inputs, builds, on_result=lambda i, r: seen.append(i))
    kinds = [r.error_kind for r in results]
    assert kinds == expected, [(r.error_kind, r.error_msg) for r in results]
    assert sorted(seen) == list(range(len(inputs)))
    for r, want in zip(results, expected):
        if want is None:
            assert r.ok and len(r.costs) == CONFIG.repeat and all(c > 0 for c in r.costs)
            assert r.build_seconds > 0 and r.run_seconds > 0 and r.spread >= 0
    crash = results[expected.index("runtime_crash")]
    assert "SIGSEGV" in crash.error_msg
    assert "more than 1 s" in results[expected.index("run_timeout")].error_msg
    assert "differ from the reference" in results[expected.index("wrong_result")].error_msg
    # the crash and the hang each cost one worker, which was replaced
    assert runner.restarts == restarts + 2
    assert set(runner.worker_pids).isdisjoint(pids_before)
    # and the replacement measures the next batch
    again = runner.run(inputs[:1], builds[:1])
    assert again[0].ok


def test_a_build_that_takes_too_long_is_stopped(tmp_path):
    good = MeasureInput(small_conv(), Trace())
    with LocalBuilder(n_parallel=1, timeout=1.5, cache_dir=str(tmp_path)) as b:
        t0 = time.perf_counter()
        res = b.build([slow_build(), good])
        assert time.perf_counter() - t0 < 15
    assert res[0].error_kind == ErrorKind.BUILD_TIMEOUT and "more than 1.5 s" in res[0].error_msg
    assert res[1].ok and os.path.exists(res[1].artifact_path)


def test_identical_candidates_are_built_once(builder):
    task = small_matmul(32)
    same_ir = Trace.from_json([["reorder", 2, [0, 1, 2]]])
    res = builder.build([MeasureInput(task, Trace()), MeasureInput(task, Trace()),
                         MeasureInput(task, same_ir)])
    assert res[0] is res[1]  # deduplicated within the batch
    assert res[2].cached and res[2].artifact_path == res[0].artifact_path  # same LLVM IR, same library
    assert builder.build([MeasureInput(task, Trace())])[0].cached


def test_a_candidate_far_slower_than_the_best_is_cut_off(builder, runner):
    task = small_matmul(256)
    fast, slow = MeasureInput(task, tiled_matmul_trace(task)), MeasureInput(task, Trace())
    m = Measurer(builder, runner, timeout_factor=2.0)
    r_fast = m.measure([fast])[0]
    assert r_fast.ok and m.best_cost(task) == r_fast.cost
    r_slow = m.measure([slow])[0]
    assert r_slow.error_kind == ErrorKind.CUT_OFF, (r_fast.cost, r_slow)  # slow, not broken
    assert "over the limit" in r_slow.error_msg
    m.close()  # not its builder or runner: those belong to the fixtures
    assert runner.run([fast], builder.build([fast]))[0].ok


def test_a_build_far_slower_than_the_tasks_builds_is_cut_off(builder, runner, monkeypatch):
    """Once a task has 3 builds, one that takes over build_cutoff_factor x their median is stopped as a
    build_cut_off (slow, not broken), and the next candidate builds on a fresh worker."""
    from autosched.measure import measurer as measurer_module

    monkeypatch.setattr(measurer_module, "BUILD_CUTOFF_FLOOR", 0.2)
    slow = slow_build()  # its 400 loops take seconds to optimise
    inline = [["compute_inline", i] for i in range(1, 400) if i % 20]  # 20 loops: quick to build
    fast = [MeasureInput(slow.task, Trace.from_json(inline + [["split", 400, 0, f, None]]))
            for f in (2, 4, 8, 16, 32, 64, 1, 3)]
    m = Measurer(builder, runner, build_cutoff_factor=3.0)
    assert m.build_limit([slow]) is None  # no builds of the task yet
    assert all(r.ok for r in m.measure(fast))
    limit = m.build_limit([slow])
    assert limit is not None and limit >= 0.2
    t0 = time.perf_counter()
    r_slow, r_next = m.measure([slow, MeasureInput(slow.task, Trace.from_json(inline))])
    assert r_slow.error_kind == ErrorKind.BUILD_CUT_OFF, r_slow
    assert "x the median build of this task" in r_slow.error_msg and r_slow.build_seconds < 10 * limit
    assert r_next.ok and m.stats.builds_cut_off == 1
    assert time.perf_counter() - t0 < 30
    assert builder.timeout == 20.0  # the builder's own limit stays
    m.close()
    assert builder.cutoff is None  # the builder, which outlives the measurer, cuts nothing on its own


def test_a_slow_build_in_the_first_batch_is_cut_once_the_batch_quick_builds_are_in(runner, monkeypatch):
    """The first batch of a task has no median to judge a build by when it starts: the cut-off is read again
    as the batch's builds finish, so a slow build that started first does not hold the batch."""
    from autosched.measure import measurer as measurer_module

    monkeypatch.setattr(measurer_module, "BUILD_CUTOFF_FLOOR", 0.2)
    slow = slow_build()
    inline = [["compute_inline", i] for i in range(1, 400) if i % 20]
    fast = [MeasureInput(slow.task, Trace.from_json(inline + [["split", 400, 0, f, None]]))
            for f in (2, 4, 8, 16, 32, 64, 1, 3, 5, 6, 7, 9)]
    with LocalBuilder(n_parallel=2, timeout=20.0) as builder, \
            Measurer(builder, runner, build_cutoff_factor=3.0) as m:
        assert m.build_limit([slow]) is None
        t0 = time.perf_counter()
        results = m.measure([slow, *fast])
        took = time.perf_counter() - t0
    assert results[0].error_kind == ErrorKind.BUILD_CUT_OFF, results[0]
    assert all(r.ok for r in results[1:])
    fast_builds = sorted(r.build_seconds for r in results[1:])
    assert results[0].build_seconds < sum(fast_builds) + 3 * fast_builds[len(fast_builds) // 2] + 1.5, took


def test_the_best_few_are_remeasured_longer(builder, runner):
    task = small_conv()
    m = Measurer(builder, runner, top_k=2, overlap=True)
    inputs = [MeasureInput(task, split_trace(task, f)) for f in (2, 4, 8)] + [MeasureInput(task, INVALID)]
    results = m.measure(inputs)
    assert [r.ok for r in results] == [True, True, True, False]
    assert m.stats.candidates == 4 and m.stats.measured == 3 and m.stats.batches == 1
    ranking = m.remeasure_top()
    assert len(ranking) == 2 and len(m.top(task)) == 2
    assert all(len(r.costs) == m.remeasure_config.repeat for _, r in ranking)
    assert ranking[0][1].cost <= ranking[1][1].cost and m.best(task)[1] is ranking[0][1]
    # libraries of the candidates outside the top were freed; the top ones kept for re-measurement
    kept = {e.build.artifact_path for e in m._top[m._key(task)]}
    assert all(os.path.exists(p) for p in kept)


def test_a_run_that_keeps_failing_stops_with_a_summary(builder, runner, caplog):
    task = small_conv()
    m = Measurer(builder, runner, max_consecutive_failures=5)
    with caplog.at_level(logging.WARNING, logger="autosched.measure"):
        m.measure([MeasureInput(task, INVALID)] * 3)
    assert "no candidate of this batch could be measured: 3 of 3 candidates failed: 3 x invalid_schedule" \
        in caplog.text
    with pytest.raises(TooManyFailures) as ei:
        wrong = MeasureInput(autosched.Task("measure_wrong"), Trace())
        m.measure([MeasureInput(task, INVALID)] * 2 + [wrong])
    e = ei.value
    assert "the last 6 candidates all failed" in str(e)
    # the summary covers the last max_consecutive_failures failures, with one example message per kind
    assert e.summary.startswith("5 of 5 candidates failed: 4 x invalid_schedule (e.g. ")
    assert "ScheduleError: split on stage 'data'" in e.summary
    assert "1 x wrong_result (e.g. '64 of 64 outputs differ" in e.summary and len(e.results) == 3
    # one success resets the count
    m.max_consecutive_failures = 2
    m.consecutive_failures = 0
    assert m.measure([MeasureInput(task, Trace())])[0].ok and m.consecutive_failures == 0


def test_closing_leaves_no_process_behind():
    b, r = LocalBuilder(n_parallel=2), LocalRunner(CONFIG)
    pids = b.worker_pids + r.worker_pids
    assert all(alive(p) for p in pids)
    b.close()
    r.close()
    b.close()  # idempotent
    assert not any(alive(p) for p in pids)
    with pytest.raises(RuntimeError, match="closed"):
        b.build([])


def test_ctrl_c_leaves_no_orphans_local():
    ctrl_c_leaves_no_orphans("local", settle=3.0)


SCRIPT = textwrap.dedent("""
    import autosched
    from autosched import te
    from autosched.measure import MeasureInput, measure, RunConfig
    from autosched.te import Trace

    @autosched.register_workload("scale_in_main")
    def scale_in_main(n: int = 64):
        A = te.placeholder((n,), name="A")
        return [A, te.compute((n,), lambda i: A[i] * 3.0, name="B")]

    r = measure([MeasureInput(autosched.Task("scale_in_main"), Trace())], backend="local",
                config=RunConfig(repeat=2, num_threads=1))[0]
    print("RESULT", r.error_kind, r.ok)
""")  # a plain script: no __main__ guard, a workload that exists only in __main__


def test_a_script_without_main_guard_measures_its_own_workload(tmp_path):
    path = tmp_path / "tune_me.py"
    path.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert "RESULT None True" in out.stdout, out.stderr[-3000:]


def test_build_workers_are_recycled_after_a_bounded_number_of_builds(monkeypatch):
    """LLVM keeps memory per compiled module: a builder is replaced every AUTOSCHED_RECYCLE_BUILDS builds,
    between builds, and no candidate is lost."""
    monkeypatch.setenv("AUTOSCHED_RECYCLE_BUILDS", "2")
    task = small_matmul(32)
    inputs = [MeasureInput(task, split_trace(task, f)) for f in (1, 2, 4, 8, 16)]
    with LocalBuilder(n_parallel=1) as b:
        pids = set()
        results = []
        for inp in inputs:
            results += b.build([inp])
            pids.add(b.worker_pids[0])
        assert all(r.ok for r in results), [r.error_msg for r in results]
        assert b._procs[0].recycled == 2 and b._procs[0].restarts == 0 and len(pids) == 3


def test_a_cold_cache_time_says_so_and_its_remeasure_stays_cold(builder):
    """RunConfig(flush_cache=True) (`tune --cold-cache`): each repeat is one run after the arguments are evicted,
    the record says it was timed cold (compared with its kind only), and the longer re-measure of the best is
    cold too: one run per repeat, more repeats."""
    from autosched.result import ResultFlag

    task = small_matmul()
    cold = CONFIG.replace(flush_cache=True, number=1, min_repeat_ms=0.0)
    with LocalRunner(cold) as r:
        m = Measurer(builder, r, top_k=1)
        (res,) = m.measure([MeasureInput(task, tiled_matmul_trace(task))])
        assert res.ok and ResultFlag.COLD in res.flags, (res.error_kind, res.error_msg, res.flags)
        rc = m.remeasure_config
        assert rc.flush_cache and rc.number == 1 and rc.min_repeat_ms == 0 and rc.repeat > cold.repeat
        ((_, again),) = m.remeasure_top()
        assert again.ok and ResultFlag.COLD in again.flags
    with LocalRunner(CONFIG) as r:
        inputs = [MeasureInput(task, tiled_matmul_trace(task))]
        (warm,) = r.run(inputs, builder.build(inputs))
    assert warm.ok and ResultFlag.COLD not in warm.flags
