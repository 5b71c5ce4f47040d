"""Taking turns on one machine: measurements one at a time across processes, never beside a build; disturbed
timings marked noisy; the fp32 peak guarding itself. Real processes and real lock files throughout."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import time

import pytest

from _measure_procs import CONFIG
from _measure_workloads import small_matmul, tiled_matmul_trace
from autosched.measure import LocalBuilder, LocalRunner, MeasureInput, machine
from autosched.measure.result import ResultFlag


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    """A private lock directory: only this test's processes take turns through it."""
    d = tmp_path / "locks"
    monkeypatch.setenv(machine.LOCK_DIR_ENV, str(d))
    monkeypatch.setattr(machine, "_build_fd", None)
    return d


def _holder(what: str, seconds: float) -> subprocess.Popen:
    """A process that holds the measurement turn (``measure``) or a build (``build``) for ``seconds``,
    and says ``held`` on stdout once it has it."""
    code = textwrap.dedent(f"""
        import sys, time
        from autosched.measure import machine
        if {what!r} == "measure":
            t = machine.MeasureTurn(); t.take()
            print("held", flush=True); time.sleep({seconds}); t.give()
        else:
            with machine.build_turn():
                print("held", flush=True); time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_one_measurement_at_a_time_across_processes(lock_dir):
    other = _holder("measure", 1.0)
    turn = machine.MeasureTurn()
    try:
        assert not turn.try_take()  # another process is timing
        assert f"pid {other.pid}" in machine.holder()
        waited = turn.take(timeout=30)
        assert waited > 0.3 and turn.held and f"pid {other.pid}" in turn.waited_for
    finally:
        turn.close()
        other.wait(timeout=30)


def test_builds_wait_for_a_measurement_and_a_measurement_for_builds(lock_dir):
    other = _holder("measure", 0.8)
    t0 = time.monotonic()
    with machine.build_turn(wait=30) as got:
        assert got and time.monotonic() - t0 > 0.3  # the build started when the timing ended
    other.wait(timeout=30)
    other = _holder("measure", 5.0)
    with machine.build_turn(wait=0.2) as got:
        assert not got  # a build never waits long: it builds anyway (and a disturbed timing is caught)
    other.kill()
    other.wait()
    build = _holder("build", 0.8)
    turn = machine.MeasureTurn()
    t0 = time.monotonic()
    assert turn.try_take() and time.monotonic() - t0 > 0.3  # the turn is had once the build in flight ended
    turn.close()
    build.wait(timeout=30)


def test_a_killed_holder_leaves_the_machine_free(lock_dir):
    other = _holder("measure", 60.0)
    other.kill()
    other.wait()
    turn = machine.MeasureTurn()
    assert turn.try_take()  # the kernel dropped the dead process's lock
    turn.close()


def test_the_load_meter_sees_other_processes(lock_dir):
    busy = _busy(2)
    try:
        time.sleep(0.3)
        meter = machine.LoadMeter()
        meter.start()
        time.sleep(0.5)  # we use no CPU: everything busy is someone else's
        meter.stop()
    finally:
        for p in busy:
            p.kill()
            p.wait()
    if not meter.available:
        pytest.skip("no /proc/stat here")
    assert meter.foreign_cores > 0.5 and meter.disturbed()


def test_the_hypervisors_steal_counts_as_another_programs_load():
    """Ticks the hypervisor gave another guest count as busy (a timing taken then was slowed); idle and
    iowait do not."""
    line = b"cpu  100 2 30 5000 40 0 7 61 0 0\n"
    assert machine.busy_in_stat_line(line) == 100 + 2 + 30 + 7 + 61
    assert machine.busy_in_stat_line(b"cpu  100 2 30 5000 40 0 7\n") == 139  # no steal field: none counted
    assert machine.busy_in_stat_line(b"intr 1 2 3") is None and machine.busy_in_stat_line(b"") is None


def test_the_runner_waits_for_another_processs_measurement_and_says_so(lock_dir, caplog):
    task = small_matmul(64)
    inp = MeasureInput(task, tiled_matmul_trace(task))
    with LocalBuilder(n_parallel=1) as b, LocalRunner(CONFIG) as r:
        built = b.build([inp])
        other = _holder("measure", 1.5)
        with caplog.at_level(logging.WARNING, logger="autosched.measure"):
            res = r.run([inp], built)[0]
        other.wait(timeout=30)
    assert res.ok, res.error_msg
    assert r.turn_waits == 1 and r.turn_wait_seconds > 0.5
    assert "another autosched process is timing kernels on this machine" in caplog.text


def test_a_timing_disturbed_by_another_program_is_marked_noisy(lock_dir):
    task = small_matmul(64)
    inp = MeasureInput(task, tiled_matmul_trace(task))
    with LocalBuilder(n_parallel=1) as b, LocalRunner(CONFIG.replace(num_threads=2, repeat=5, min_repeat_ms=40)) as r:
        built = b.build([inp])
        quiet = r.run([inp], built)[0]
        busy = _busy(2)  # not autosched: it takes no turns, so the timing notices it
        try:
            time.sleep(0.3)
            loud = r.run([inp], built)[0]
        finally:
            for p in busy:
                p.kill()
                p.wait()
    assert quiet.ok and loud.ok, (quiet.error_msg, loud.error_msg)
    assert ResultFlag.NOISY in loud.flags, (quiet.costs, loud.costs)


def test_a_peak_measured_under_load_is_not_cached(lock_dir, tmp_path, monkeypatch):
    """Two busy loops beside the first peak measurement on this machine: the figure is not trusted, not
    cached, and the next (quiet) measurement is cached and within 10% of another quiet one."""
    from autosched.measure import peak

    monkeypatch.setenv("AUTOSCHED_CACHE_DIR", str(tmp_path / "cache"))
    busy = _busy(2)
    try:
        time.sleep(0.3)
        loaded = peak.get_peak(2)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert not loaded.trusted and loaded.load > 0.5, loaded
    assert peak.cached_peak(2) is None  # nothing cached that cannot be trusted
    # A tune started now measures again, quietly, and caches; then another quiet figure. On an Emerald Rapids VM
    # the pair has gone wrong right after the busy loops (the clocks settling?) or while the hypervisor ran
    # another guest (steal, which the load meter does not count): best runs spread 5%, more than a trusted
    # figure allows; a quiet figure at half; a trusted cached one 28% below three quiet ones (232 vs 320
    # GFLOPS). So the pair gets up to three tries, the cache cleared before each.
    for _ in range(3):
        (tmp_path / "cache" / "peak.json").unlink(missing_ok=True)
        watch = peak.PeakWatch(2)
        if not watch.peak.trusted:
            continue
        quiet = peak.measure_peak(2)
        if abs(watch.gflops - quiet.gflops) <= 0.1 * quiet.gflops:
            break
    assert watch.peak.trusted and peak.cached_peak(2) == watch.peak, watch.peak
    assert abs(watch.gflops - quiet.gflops) <= 0.1 * quiet.gflops, (watch.peak, quiet)
    assert json.loads((tmp_path / "cache" / "peak.json").read_text())
