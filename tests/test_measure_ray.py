"""The Ray backend: one local Ray for the whole session, real crashing, hanging and wrong candidates."""

from __future__ import annotations

import os
import time

import pytest
import ray  # a dependency of autosched: its absence is a failure, not a skip

from _measure_procs import CONFIG, ctrl_c_leaves_no_orphans, descendants
from _measure_workloads import (
    INVALID,
    mixed_batch,
    slow_build,
    small_conv,
    small_matmul,
    split_trace,
    tiled_matmul_trace,
)
from autosched.measure import ErrorKind, MeasureInput, Measurer, machine
from autosched.measure import ray_backend as rb
from autosched.te import Trace


@pytest.fixture(scope="session")
def local_ray():
    """Start the embedded Ray once for every test that needs it; shut it down at the end of the session."""
    if ray.is_initialized():
        pytest.skip("Ray is already initialised by someone else in this process")
    started = rb.init_ray(num_cpus=2)
    assert started and not rb.init_ray()  # a second call reuses it
    yield
    rb.shutdown_ray()
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def builder(local_ray):
    b = rb.RayBuilder(n_parallel=1, timeout=20.0)
    yield b
    b.close()


@pytest.fixture(scope="module")
def runner(local_ray):
    r = rb.RayRunner(CONFIG)
    yield r
    r.close()


def test_a_mixed_batch_completes_with_the_right_error_kinds(builder, runner):
    inputs, expected = mixed_batch()
    restarts = runner.restarts
    builds = builder.build(inputs)
    assert not any(b.artifact for b in builds if b.ok)  # one machine: libraries stay on disk
    results = runner.run(inputs, builds)
    assert [r.error_kind for r in results] == expected, [(r.error_kind, r.error_msg) for r in results]
    for r, want in zip(results, expected):
        if want is None:
            assert r.ok and len(r.costs) == CONFIG.repeat and all(c > 0 for c in r.costs)
    assert "crashed its worker while warming up" in results[expected.index("runtime_crash")].error_msg
    assert "more than 1 s" in results[expected.index("run_timeout")].error_msg
    assert runner.restarts == restarts + 2  # the crash and the hang each cost one actor, restarted by Ray
    assert runner.run(inputs[:1], builds[:1])[0].ok


def test_a_build_that_takes_too_long_is_stopped(local_ray):
    with rb.RayBuilder(n_parallel=1, timeout=1.5) as b:
        t0 = time.perf_counter()
        res = b.build([slow_build(), MeasureInput(small_conv(), Trace())])
        assert time.perf_counter() - t0 < 20
        assert res[0].error_kind == ErrorKind.BUILD_TIMEOUT and b.restarts == 1
        assert res[1].ok and os.path.exists(res[1].artifact_path)
        cache = b.cache_dir
    assert not os.path.exists(cache)  # the builder's libraries go with it


def test_a_slow_build_is_cut_once_the_quick_builds_of_its_batch_are_in(local_ray):
    """The builder reads its cut-off again while the batch builds: the slow build that started first is stopped
    as a ``build_cut_off`` once four quick ones gave it a median; the quick ones teach the cut-off."""
    from autosched.measure.builder import BuildCutoff

    slow = slow_build()
    inline = [["compute_inline", i] for i in range(1, 400) if i % 20]
    fast = [MeasureInput(slow.task, Trace.from_json(inline + [["split", 400, 0, f, None]]))
            for f in (2, 4, 8, 16, 32, 64, 1, 3, 5, 6)]
    with rb.RayBuilder(n_parallel=2, timeout=20.0) as b:
        b.cutoff = BuildCutoff(factor=3.0, floor=0.2, min_builds=4)
        res = b.build([slow, *fast])
    assert res[0].error_kind == ErrorKind.BUILD_CUT_OFF and "x the median build" in res[0].error_msg, res[0]
    assert all(r.ok for r in res[1:]) and b.cutoff.added == len(fast)
    assert res[0].build_seconds < 6 * sorted(r.build_seconds for r in res[1:])[len(fast) // 2] + 1.5


def test_libraries_travel_as_bytes_when_asked(local_ray, runner):
    task = small_matmul(32)
    with rb.RayBuilder(n_parallel=1, ship_artifacts=True) as b:
        built = b.build([MeasureInput(task, tiled_matmul_trace(task))])[0]
    assert built.artifact and built.artifact[:4] == b"\x7fELF"
    assert not os.path.exists(built.artifact_path)  # as on another node: only the bytes are left
    res = runner.run([MeasureInput(task, tiled_matmul_trace(task))], [built])[0]
    assert res.ok, res.error_msg


def test_the_measurer_on_ray_cuts_off_slow_candidates_and_remeasures_the_best(builder, runner):
    task = small_matmul(256)
    m = Measurer(builder, runner, timeout_factor=50.0, top_k=2)
    fast = [MeasureInput(task, tiled_matmul_trace(task, bn)) for bn in (16, 32)]
    res = m.measure(fast + [MeasureInput(task, INVALID)])  # both fast ones timed, whichever is faster
    assert [r.ok for r in res] == [True, True, False]
    m.timeout_factor = 2.0  # now the untiled candidate is far slower than the best
    slow = m.measure([MeasureInput(task, Trace())])[0]
    assert slow.error_kind == ErrorKind.CUT_OFF and "cut off at" in slow.error_msg
    with machine.build_turn(wait=0.5) as free:  # the actor gave the machine back when warm-up cut it off
        assert free
    ranking = m.remeasure_top()
    assert len(ranking) == 2 and all(len(r.costs) == m.remeasure_config.repeat for _, r in ranking)
    assert m.stats.candidates == 4 and m.stats.measured == 2
    conv = small_conv()
    more = m.measure([MeasureInput(conv, split_trace(conv, f)) for f in (2, 4)])
    assert all(r.ok for r in more) and len(m.top(conv)) == 2


def _listening_sockets() -> dict[str, str]:
    """inode -> local address of every listening TCP socket on this machine."""
    out = {}
    for path, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = open(path).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A":  # LISTEN
                out[f[9]] = ("v6:" if v6 else "") + f[1]
    return out


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except (FileNotFoundError, PermissionError):
        pass
    return inodes


def test_the_embedded_ray_listens_on_loopback_only(local_ray):
    listening = _listening_sockets()
    ours = set()
    for pid in [os.getpid()] + descendants(os.getpid()):
        ours |= _socket_inodes(pid)
    addrs = [listening[i] for i in ours if i in listening]
    assert addrs, "Ray should be listening somewhere"
    # 127.0.0.1, ::ffff:127.0.0.1, ::1 as /proc/net/tcp{,6} spell them
    loopback = ("0100007F:", "v6:0000000000000000FFFF00000100007F:", "v6:00000000000000000000000001000000:")
    assert all(a.startswith(loopback) for a in addrs), addrs


def test_the_embedded_ray_starts_only_the_daemons_a_local_run_uses(local_ray, runner):
    """GCS, raylet, its agents and our actors; not the autoscaler monitor, the log monitor or the dashboard's
    API server (~50 MiB each, idle in a one-machine run)."""
    cmdlines = []
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdlines.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    assert any("gcs_server" in c for c in cmdlines) and any("raylet" in c for c in cmdlines), cmdlines
    idle = [c for c in cmdlines for name in ("monitor.py", "log_monitor.py", "dashboard/dashboard.py") if name in c]
    assert not idle, idle
    assert ray.get(ray.remote(num_cpus=0)(lambda: 41 + 1).remote(), timeout=60) == 42  # tasks still run


def test_the_cluster_address_comes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv(rb.ADDRESS_ENV, raising=False)
    assert rb.ray_address() is None
    monkeypatch.setenv(rb.ADDRESS_ENV, "10.0.0.5:6379")
    assert rb.ray_address() == "10.0.0.5:6379"
    assert rb.ray_address("ray://head:10001") == "ray://head:10001"


def test_ctrl_c_leaves_no_orphans_ray():
    # its own Ray in a fresh process: ~10 s to start, then Ctrl-C while a kernel hangs
    ctrl_c_leaves_no_orphans("ray", settle=4.0)


def test_ray_build_actors_are_recycled_after_a_bounded_number_of_builds(local_ray, monkeypatch):
    monkeypatch.setenv("AUTOSCHED_RECYCLE_BUILDS", "2")
    task = small_matmul(32)
    inputs = [MeasureInput(task, split_trace(task, f)) for f in (1, 2, 4, 8, 16)]
    with rb.RayBuilder(n_parallel=1) as b:
        results = b.build(inputs)
        assert all(r.ok for r in results), [r.error_msg for r in results]
        assert b._pool.recycled == 2 and b.restarts == 0
        assert b.build([MeasureInput(task, split_trace(task, 32))])[0].ok  # the fresh actor builds
