"""The alternating-rounds rule every comparison with a vendor library times by (issue 44): in each round every
side in turn, the order reversed every other round, a pause before each block, each side's best block median;
and benchmarks/_timing.py is that same implementation, in the project's environment and in the peers' one
(which has no autosched). Fake timers and sleeps: no timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from autosched.measure import alternating
from autosched.measure.alternating import alternating_medians, median_time

TIMING = Path(__file__).resolve().parent.parent / "benchmarks" / "_timing.py"


class Script:
    """A fake timer and sleep that log every call; block k of side n takes ``blocks[n][k]``."""

    def __init__(self, blocks: dict[str, list[float]]) -> None:
        self.blocks = blocks
        self.log: list[tuple] = []

    def timer(self, fn, seconds: float) -> float:
        name = fn()
        k = sum(1 for e in self.log if e[:2] == ("time", name))
        self.log.append(("time", name, seconds))
        return self.blocks[name][k]

    def sleep(self, seconds: float) -> None:
        self.log.append(("sleep", seconds))


def test_sides_alternate_in_rounds_with_a_pause_before_each_block_and_keep_their_best():
    s = Script({"autosched": [3.0, 1.0, 2.0, 5.0], "ort": [4.0, 6.0, 0.5, 7.0], "numpy": [9.0, 8.0, 8.5, 9.5]})
    fns = {n: (lambda n=n: n) for n in ("autosched", "ort", "numpy")}
    best = alternating_medians(fns, rounds=4, seconds=0.2, pause=0.3, timer=s.timer, sleep=s.sleep)
    order = [e[1] for e in s.log if e[0] == "time"]
    assert order == ["autosched", "ort", "numpy", "numpy", "ort", "autosched",
                     "autosched", "ort", "numpy", "numpy", "ort", "autosched"]
    # a pause before every block, the first included, and every block of the asked length
    assert s.log[0::2] == [("sleep", 0.3)] * 12
    assert all(e[2] == 0.2 for e in s.log[1::2])
    assert best == {"autosched": 1.0, "ort": 0.5, "numpy": 8.0}  # each side's min over its blocks
    assert list(best) == list(fns)  # in the order given, whatever the order of the last round


def test_one_side_still_pauses_before_each_block():
    s = Script({"only": [2.0, 1.0, 3.0]})
    assert alternating_medians({"only": lambda: "only"}, 3, 0.1, 0.25, timer=s.timer, sleep=s.sleep) == {"only": 1.0}
    assert s.log == [("sleep", 0.25), ("time", "only", 0.1)] * 3


def test_median_time_warms_up_and_calls_at_least_ten_times():
    calls = []
    t = median_time(lambda: calls.append(1), seconds=0.0)
    assert len(calls) == 3 + 10 and t >= 0.0


def test_the_benchmarks_timing_is_the_packages_own():
    spec = importlib.util.spec_from_file_location("_timing_under_test", TIMING)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.alternating_medians is alternating_medians and mod.median_time is median_time


def test_without_autosched_the_benchmarks_load_the_same_file(monkeypatch):
    # the peers' virtualenv: `import autosched` fails, so _timing.py loads autosched/measure/alternating.py
    monkeypatch.setitem(sys.modules, "autosched.measure.alternating", None)
    spec = importlib.util.spec_from_file_location("_timing_without_autosched", TIMING)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.alternating_medians is not alternating_medians
    assert Path(mod.alternating_medians.__code__.co_filename).resolve() == Path(alternating.__file__).resolve()
    s = Script({"a": [2.0, 1.0], "b": [1.5, 3.0]})
    best = mod.alternating_medians({"a": lambda: "a", "b": lambda: "b"}, 2, 0.1, 0.0, timer=s.timer, sleep=s.sleep)
    assert best == {"a": 1.0, "b": 1.5}
    assert [e[1] for e in s.log if e[0] == "time"] == ["a", "b", "b", "a"]
