"""Shared pieces of the measurement tests: the run config, process-tree helpers (Linux /proc, no psutil)
and the Ctrl-C check run against both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from autosched.measure import RunConfig

# short everything: a hang is stopped after ~4 s, a reference that hangs after 10 s; one thread per kernel so
# that timings do not depend on what else the machine is doing
CONFIG = RunConfig(number=1, repeat=3, min_repeat_ms=1.0, timeout=1.0, num_threads=1, reference_timeout=10.0)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st is not None:
                children.setdefault(int(st[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return [p for p in out if alive(p)]


DRIVER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import autosched
    from autosched.measure import MeasureInput, Measurer, RunConfig
    from autosched.te import Trace
    import _measure_workloads
    m = Measurer(backend={backend!r}, config=RunConfig(timeout=120, num_threads=1))
    print("MEASURING", m.builder.cache_dir, flush=True)
    m.measure([MeasureInput(autosched.Task("measure_hang"), Trace())])
    print("NOT REACHED", flush=True)
""")  # no __main__ guard on purpose: workers are not multiprocessing children


def ctrl_c_leaves_no_orphans(backend: str, settle: float) -> None:
    """Start a run that hangs in a kernel, press Ctrl-C, and check every process and file it made is gone."""
    tests = os.path.dirname(os.path.abspath(__file__))
    code = DRIVER.format(tests=tests, backend=backend)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        assert "MEASURING" in line, p.stderr.read()
        cache_dir = line.split()[1]
        assert os.path.isdir(cache_dir)
        time.sleep(settle)  # the hanging kernel is running now
        procs = descendants(p.pid)
        assert procs, "the run started no worker process"
        p.send_signal(signal.SIGINT)
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
    err = p.stderr.read()
    assert "KeyboardInterrupt" in err and "NOT REACHED" not in p.stdout.read()
    deadline = time.time() + 10
    while time.time() < deadline and any(alive(x) for x in procs):
        time.sleep(0.2)
    assert not [x for x in procs if alive(x)]
    assert not os.path.exists(cache_dir)  # nor any file it built
