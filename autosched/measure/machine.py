"""Taking turns on one machine: every autosched process on it times one kernel at a time, never beside a build.

Two tuners on one machine each see the other's work as noise: timed beside another tuner, the same
candidates measured 2x slower, and nothing said so. So measurements take turns through lock files in one
directory per machine (``$AUTOSCHED_LOCK_DIR``, else ``<tmp>/autosched-locks``), whatever database or
Ray cluster each process uses, the way TVM's RPC tracker gives a device to one measurement at a time:

* ``measure.lock``: held exclusively by the worker that times a candidate, from its warm-up to its last
  repeat; other measuring workers wait for it (:class:`MeasureTurn`).
* ``build.lock``: every build holds it shared while it compiles; a measurement takes it exclusively once
  it has its turn, so it starts when the builds in flight end, and builds that would start meanwhile wait
  (:func:`build_turn`), at most ``BUILD_WAIT`` seconds (then they build anyway, and a disturbed timing is
  caught by :class:`LoadMeter`). Builds still run in parallel with each other.

Locks are ``flock`` locks: the kernel drops them when their process dies, so a killed worker never leaves
the machine locked. :class:`LoadMeter` reads how much CPU time other processes used while a kernel was
timed (Linux ``/proc/stat``), which is how a disturbed measurement is recognised.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; measurements are not coordinated across processes there
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("autosched.measure")

LOCK_DIR_ENV = "AUTOSCHED_LOCK_DIR"
BUILD_WAIT = 5.0  # seconds a build waits for a measurement to end before it builds anyway
DRAIN_WAIT = 30.0  # seconds a measurement waits for the builds in flight (one build's time limit)
_POLL = 0.005


def lock_dir() -> Path:
    """The directory of this machine's lock files (shared by every user's autosched processes)."""
    env = os.environ.get(LOCK_DIR_ENV)
    path = Path(env) if env else Path(tempfile.gettempdir()) / "autosched-locks"
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # another user's processes take turns through it too
            path.chmod(0o1777)
    return path


def _open(name: str) -> int:
    fd = os.open(lock_dir() / name, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return fd


def _try(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _wait(fd: int, mode: int, seconds: float) -> bool:
    """Take ``mode`` on ``fd``, polling for at most ``seconds``; False when the time ran out."""
    end = time.monotonic() + seconds
    while not _try(fd, mode):
        if time.monotonic() > end:
            return False
        time.sleep(_POLL)
    return True


def holder() -> str:
    """Who holds the measurement turn, as its holder wrote it ("pid 123: autosched tune ..."), or ''."""
    try:
        return (lock_dir() / "measure.owner").read_text().strip()
    except OSError:
        return ""


def _describe_self() -> str:
    try:
        cmd = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmd = ""
    return f"pid {os.getpid()}" + (f" (under {cmd.strip()[:120]})" if cmd.strip() else "")


class MeasureTurn:
    """This worker's exclusive turn to time kernels on the machine: :meth:`take` waits for it, :meth:`give`
    hands it back. One object per worker; taking it again while held does nothing."""

    def __init__(self) -> None:
        self._measure_fd: int | None = None
        self._build_fd: int | None = None
        self.held = False
        self.waited = 0.0  # seconds the last take() waited for other processes
        self.waited_for = ""  # who held the turn then

    def take(self, timeout: float = 600.0) -> float:
        """Wait for the turn (at most ``timeout`` s for other measurements, ``DRAIN_WAIT`` s for builds);
        returns the seconds waited. On timeout it goes on without the turn: the timing is then checked
        for disturbance like any other."""
        if self.held or fcntl is None:
            return 0.0
        t0 = time.monotonic()
        if self._measure_fd is None:
            self._measure_fd, self._build_fd = _open("measure.lock"), _open("build.lock")
        self.waited_for = ""
        if not _try(self._measure_fd, fcntl.LOCK_EX):
            self.waited_for = holder()
            if not _wait(self._measure_fd, fcntl.LOCK_EX, timeout):
                log.warning("waited %.0f s for another process's measurements (%s); timing anyway", timeout,
                            self.waited_for or "unknown holder")
                self.waited = time.monotonic() - t0
                return self.waited
        self._have_turn()
        self.waited = time.monotonic() - t0
        return self.waited

    def try_take(self) -> bool:
        """Take the turn if no other process has it (then wait only for builds in flight); else False."""
        if self.held or fcntl is None:
            return True
        if self._measure_fd is None:
            self._measure_fd, self._build_fd = _open("measure.lock"), _open("build.lock")
        if not _try(self._measure_fd, fcntl.LOCK_EX):
            return False
        self._have_turn()
        return True

    def _have_turn(self) -> None:
        with contextlib.suppress(OSError):  # replaced whole: a reader never sees it half written (or empty)
            tmp = lock_dir() / f"measure.owner.{os.getpid()}"
            tmp.write_text(_describe_self())
            os.replace(tmp, lock_dir() / "measure.owner")
        if not _wait(self._build_fd, fcntl.LOCK_EX, DRAIN_WAIT):  # builds in flight end first
            log.warning("builds on this machine did not end within %.0f s; timing beside them", DRAIN_WAIT)
        self.held = True

    def give(self) -> None:
        """Hand the turn back (idempotent)."""
        if not self.held or fcntl is None:
            return
        self.held = False
        for fd in (self._build_fd, self._measure_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.give()
        for fd in (self._measure_fd, self._build_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._measure_fd = self._build_fd = None

    def __enter__(self) -> MeasureTurn:
        self.take()
        return self

    def __exit__(self, *exc: object) -> None:
        self.give()


_build_fd: int | None = None


@contextlib.contextmanager
def build_turn(wait: float = BUILD_WAIT) -> Iterator[bool]:
    """Hold the shared build lock while compiling one candidate; yields whether it was had. While a
    measurement holds the machine, wait for it to end, at most ``wait`` seconds (then build anyway)."""
    global _build_fd
    if fcntl is None:
        yield False
        return
    if _build_fd is None:
        _build_fd = _open("build.lock")
    got = _wait(_build_fd, fcntl.LOCK_SH, wait)
    try:
        yield got
    finally:
        if got:
            with contextlib.suppress(OSError):
                fcntl.flock(_build_fd, fcntl.LOCK_UN)


def _busy_ticks() -> int | None:
    """CPU ticks all cores spent busy since boot, or taken by the hypervisor for another guest (see
    :func:`busy_in_stat_line`), or None where /proc/stat is not there."""
    try:
        with open("/proc/stat", "rb") as f:
            return busy_in_stat_line(f.readline())
    except OSError:
        return None


def busy_in_stat_line(line: bytes) -> int | None:
    """The busy ticks in /proc/stat's first (``cpu``) line: user, nice, system, irq, softirq and steal;
    not idle or iowait. Steal counts because a timing taken while the hypervisor ran another guest on these
    cores was slowed by it as by any other program (its wall time includes the stolen ticks, its own CPU
    time does not)."""
    fields = line.split()
    if not fields or fields[0] != b"cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    steal = int(fields[8]) if len(fields) > 8 else 0  # (kernels before 2.6.11 have no steal field)
    return user + nice + system + irq + softirq + steal


_TICK = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


class LoadMeter:
    """How many cores' worth of CPU other processes used during a stretch of this process's work.

    ``start()`` before timing, ``stop()`` after: ``foreign_cores`` is (busy CPU time of the machine minus this
    process's own) divided by the wall time. A kernel timed while it is well above zero shared its cores.
    """

    def __init__(self) -> None:
        self._t = self._busy = self._own = 0.0
        self.available = _busy_ticks() is not None
        self.foreign_seconds = 0.0
        self.foreign_cores = 0.0
        self.wall = 0.0

    @staticmethod
    def _own_cpu() -> float:
        t = os.times()
        return t.user + t.system

    def start(self) -> None:
        ticks = _busy_ticks()
        self._busy = (ticks or 0) * _TICK
        self._own = self._own_cpu()
        self._t = time.perf_counter()

    def stop(self) -> float:
        """Ends the stretch; returns ``foreign_cores``."""
        self.wall = max(time.perf_counter() - self._t, 1e-9)
        ticks = _busy_ticks()
        if ticks is None:
            return 0.0
        busy = ticks * _TICK - self._busy
        own = self._own_cpu() - self._own
        self.foreign_seconds = max(0.0, busy - own)
        self.foreign_cores = self.foreign_seconds / self.wall
        return self.foreign_cores

    def disturbed(self, threshold: float = 0.25) -> bool:
        """Whether others used more than ``threshold`` of a core on average, and at least 3 clock ticks
        (the counters' resolution: shorter stretches cannot tell noise from load)."""
        return self.foreign_seconds >= 3 * _TICK and self.foreign_cores > threshold


__all__ = ["BUILD_WAIT", "DRAIN_WAIT", "LOCK_DIR_ENV", "LoadMeter", "MeasureTurn", "build_turn",
           "busy_in_stat_line", "holder", "lock_dir"]
