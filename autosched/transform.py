"""TVM's ``tvm.transform.PassContext``: build options for the code lowered inside a ``with`` block.

``PassContext(config={"tir.UnrollLoop": {"auto_max_step": 16}})`` is honoured: every serial loop of constant
extent whose unrolled body runs at most that many steps is unrolled, as TVM's pass does (the same rule as the
``auto_unroll_max_step`` pragma). ``opt_level``, the pass lists and other configuration keys name TVM passes
that autosched's lowering does not have: they are accepted and each is logged once as having no effect.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("autosched.transform")
_local = threading.local()
_said: set[str] = set()


class PassContext:
    """A ``with`` block of build options (see the module docstring for what they do here)."""

    def __init__(self, opt_level: int = 2, required_pass: Sequence[str] | None = None,
                 disabled_pass: Sequence[str] | None = None, instruments: Any = None,
                 config: dict[str, Any] | None = None, trace: Any = None):
        self.opt_level = opt_level
        self.required_pass = list(required_pass or [])
        self.disabled_pass = list(disabled_pass or [])
        self.config = dict(config or {})
        unroll = self.config.get("tir.UnrollLoop", {})
        if not isinstance(unroll, dict):
            raise TypeError(f"PassContext: config['tir.UnrollLoop'] is a dict such as {{'auto_max_step': 16}}, "
                            f"got {unroll!r}")
        self.unroll_max_step = int(unroll.get("auto_max_step", 0)) if unroll.get("explicit_unroll", True) else 0
        ignored = [f"config {k!r}" for k in self.config if k != "tir.UnrollLoop"]
        ignored += [f"{k} {list(v)}" for k, v in (("required_pass", self.required_pass),
                                                   ("disabled_pass", self.disabled_pass)) if v]
        for what in ignored:
            if what not in _said:
                _said.add(what)
                log.info("PassContext: %s has no effect in autosched (its lowering has no such pass)", what)

    @staticmethod
    def current() -> PassContext:
        """The innermost active context, or the defaults."""
        stack = getattr(_local, "stack", None)
        return stack[-1] if stack else _DEFAULT

    def __enter__(self) -> PassContext:
        if not hasattr(_local, "stack"):
            _local.stack = []
        _local.stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.stack.pop()


_DEFAULT = PassContext()

__all__ = ["PassContext"]
