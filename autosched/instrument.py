"""TVM's pass instruments (``tvm.instrument``): objects a ``PassContext(instruments=[...])`` tells about every
pass it runs (``run_before_pass(mod, info)`` / ``run_after_pass(mod, info)``, ``should_run`` to skip one,
``enter_pass_ctx`` / ``exit_pass_ctx``), to print, time or check the IR between passes."""

from __future__ import annotations

import time
from typing import Any


class PassInstrument:
    """The base of pass instruments: every hook does nothing; override those you need."""

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def should_run(self, mod: Any, info: Any) -> bool:
        return True

    def run_before_pass(self, mod: Any, info: Any) -> None:
        pass

    def run_after_pass(self, mod: Any, info: Any) -> None:
        pass


def pass_instrument(pi_cls: type | None = None) -> Any:
    """TVM's class decorator of a pass instrument: the class, with the hooks it does not define doing nothing."""

    def make(cls: type) -> type:
        if not isinstance(cls, type):
            raise TypeError(f"pass_instrument decorates a class, got {cls!r}")
        return type(cls.__name__, (cls, PassInstrument), {"__doc__": cls.__doc__, "__module__": cls.__module__})

    return make(pi_cls) if pi_cls is not None else make


class PassTimingInstrument(PassInstrument):
    """Times every pass run under the context; ``render()`` is a table of the passes, slowest first."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self._started: list[tuple[str, float]] = []

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self._started.append((info.name, time.perf_counter()))

    def run_after_pass(self, mod: Any, info: Any) -> None:
        name, t0 = self._started.pop()
        self.times.setdefault(name, []).append(time.perf_counter() - t0)

    def render(self) -> str:
        rows = sorted(self.times.items(), key=lambda kv: -sum(kv[1]))
        lines = [f"{'pass':32s} {'runs':>5s} {'total ms':>10s}"]
        lines += [f"{name:32s} {len(ts):5d} {sum(ts) * 1e3:10.2f}" for name, ts in rows]
        return "\n".join(lines)


__all__ = ["PassInstrument", "PassTimingInstrument", "pass_instrument"]
