"""The measurement engine's dispatch loop against a scripted transport: no process, no Ray, no compiler.

Each case says what the workers do with a call (answer, die, raise, hang, lose their node) and checks what the
engine makes of it: the job's outcome, which worker is replaced, and that the batch always completes."""

from __future__ import annotations

from collections import deque

import pytest

from autosched.measure.engine import DIED, FAILED, OK, RECYCLED, Job, Reply, Slot, Transport, dispatch


class Scripted(Transport):
    """Workers whose answer to a call is ``script(slot, method, args)``: ``(kind, value)``, ``"hang"`` (never
    answers) or ``"lost"`` (its node is gone: the call dies and ``lost`` says so)."""

    def __init__(self, n: int, script, max_jobs: int | None = None):
        super().__init__("workers", max_jobs)
        self.script = script
        self.slots = [Slot(f"w{i}") for i in range(n)]
        self.idle = deque(self.slots)
        self.replaced: list[tuple[str, str]] = []
        self.gone: set[str] = set()
        self._n = 0
        self._calls: dict[int, tuple] = {}

    def call(self, slot, method, *args):
        self._n += 1
        self._calls[self._n] = (slot, method, args)
        return self._n

    def wait(self, calls, timeout):
        out = []
        for c in calls:
            slot, method, args = self._calls[c]
            what = self.script(slot, method, args)
            if what == "hang":
                continue
            if what == "lost":
                self.gone.add(slot.handle)
                what = (DIED, "node gone")
            out.append((c, Reply(*what)))
        return out

    def replace(self, slot, why):
        self.replaced.append((slot.handle, why))
        self.idle.append(slot)

    def starting(self):
        return False

    def lost(self, slot):
        if slot.handle not in self.gone:
            return False
        self.slots = [s for s in self.slots if s is not slot]
        self.idle = deque(s for s in self.idle if s is not slot)
        return True

    def close(self):
        pass


class Echo(Job):
    """Calls ``echo`` then ``twice``; records how it ended."""

    def __init__(self, i: int, timeout: float = 5.0):
        self.i, self.timeout, self.ended, self.starts = i, timeout, None, 0

    def start(self):
        self.starts += 1
        return "echo", (self.i,), self.timeout

    def handle(self, value):
        if value == self.i:
            return "twice", (self.i,), self.timeout
        self.ended = ("ok", value)
        return None

    def timed_out(self):
        self.ended = ("timed out",)

    def died(self, how):
        self.ended = ("died", how)

    def failed(self, msg):
        self.ended = ("failed", msg)


def answer(slot, method, args):
    return OK, args[0] if method == "echo" else 2 * args[0]


def test_every_job_ends_with_its_answer_and_workers_are_reused():
    t = Scripted(2, answer)
    jobs = [Echo(i) for i in range(1, 6)]
    dispatch(t, jobs)
    assert [j.ended for j in jobs] == [("ok", 2 * i) for i in range(1, 6)]
    assert t.replaced == [] and len(t.idle) == 2 and sum(s.jobs for s in t.slots) == 5


def test_a_death_or_a_bug_ends_only_its_job_and_a_death_replaces_its_worker():
    def script(slot, method, args):
        if args[0] == 2 and method == "twice":
            return DIED, "killed by SIGSEGV"
        if args[0] == 3:
            return FAILED, "ValueError: bug"
        return answer(slot, method, args)

    t = Scripted(1, script)
    jobs = [Echo(i) for i in range(1, 5)]
    dispatch(t, jobs)
    assert [j.ended for j in jobs] == [("ok", 2), ("died", "killed by SIGSEGV"), ("failed", "ValueError: bug"),
                                       ("ok", 8)]
    assert t.replaced == [("w0", DIED)] and t.restarts == 1


def test_a_call_past_its_deadline_is_stopped_and_its_worker_replaced():
    t = Scripted(1, lambda s, m, a: "hang" if a[0] == 1 else answer(s, m, a))
    jobs = [Echo(1, timeout=0.05), Echo(2)]
    dispatch(t, jobs)
    assert jobs[0].ended == ("timed out",) and jobs[1].ended == ("ok", 4)
    assert t.replaced == [("w0", "timed out")]


def test_a_worker_past_max_jobs_is_recycled_between_jobs():
    t = Scripted(1, answer, max_jobs=2)
    jobs = [Echo(i) for i in range(1, 6)]
    dispatch(t, jobs)
    assert all(j.ended[0] == "ok" for j in jobs)
    assert t.replaced == [("w0", RECYCLED), ("w0", RECYCLED)] and t.recycled == 2 and t.restarts == 0


def test_the_job_of_a_lost_node_starts_again_elsewhere_and_none_left_raises():
    lost_once = []

    def script(slot, method, args):
        if slot.handle == "w0" and not lost_once:
            lost_once.append(1)
            return "lost"
        return answer(slot, method, args)

    t = Scripted(2, script)
    jobs = [Echo(1), Echo(2)]
    dispatch(t, jobs)
    assert [j.ended for j in jobs] == [("ok", 2), ("ok", 4)] and jobs[0].starts == 2  # not the candidate's fault
    assert [s.handle for s in t.slots] == ["w1"] and t.replaced == []

    t = Scripted(1, lambda s, m, a: "lost")
    with pytest.raises(RuntimeError, match="no workers are left"):
        dispatch(t, [Echo(1)])
