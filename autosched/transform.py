"""TVM's ``tvm.transform.PassContext``: the one ``with`` block of build options, read by te lowering
(``tvm.build``) and by the graph passes (``relay.build``; ``relay.transform.PassContext`` is this class).

- ``opt_level`` (default 3; TVM's is 2) enables the relay passes of that level and below: 3 adds the blocked
  layouts of AlterOpLayout, which is most of a CNN's speed on a CPU.
- ``required_pass`` / ``disabled_pass`` name relay passes to run or skip whatever the level.
- ``config={"tir.UnrollLoop": {"auto_max_step": 16}}`` unrolls every serial loop of constant extent whose
  unrolled body runs at most that many steps, as TVM's pass does (the rule of the ``auto_unroll_max_step``
  pragma); ``config={"relay.winograd": False}`` keeps convolutions off Winograd's algorithm;
  ``config={"relay.FuseOps.max_depth": 64}`` caps the ops fused into one kernel (default 256, as TVM's);
  ``config={"tir.add_lower_pass": [(1, my_pass)]}`` runs the user's ``tir.transform.prim_func_pass`` passes on
  every lowered function (all phases after autosched's own lowering, in phase order).

Other configuration keys and pass names are TVM's own: they are accepted and each is logged once, on entering
the block, as having no effect here.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable, Sequence
from typing import Any

log = logging.getLogger("autosched.transform")
_CURRENT: contextvars.ContextVar[PassContext | None] = contextvars.ContextVar("autosched_pass_context",
                                                                               default=None)
#: configuration keys something in autosched reads, and what for (anything else is logged as without effect)
CONFIG_KEYS = {
    "tir.UnrollLoop": "te lowering unrolls short serial loops",
    "relay.winograd": "relay's AlterOpLayout may use Winograd's algorithm for 3x3 convolutions",
    "relay.backend.use_auto_scheduler": "always on: relay.build applies the records of apply_history_best",
    "relay.FuseOps.max_depth": "the most ops FuseOps puts in one kernel (default 256)",
    "tir.add_lower_pass": "te lowering runs these (phase, pass) pairs on each function, in phase order",
}
_PASS_NAMES: set[str] = set()  # every pass name some loaded module has (relay registers its own on import)
_said: set[str] = set()


def register_pass_names(names: Iterable[str]) -> None:
    """Declare the names of passes that ``required_pass`` / ``disabled_pass`` can name (relay does on import)."""
    _PASS_NAMES.update(names)


class PassContext:
    """A ``with`` block of build options (see the module docstring for what each does)."""

    def __init__(self, opt_level: int = 3, required_pass: Sequence[str] | None = None,
                 disabled_pass: Sequence[str] | None = None, instruments: Any = None,
                 config: dict[str, Any] | None = None, trace: Any = None):
        if isinstance(required_pass, str) or isinstance(disabled_pass, str):
            raise TypeError("PassContext: required_pass and disabled_pass are lists of pass names, e.g. "
                            "disabled_pass=['AlterOpLayout']")
        self.opt_level = int(opt_level)
        self.required_pass = set(required_pass or ())
        self.disabled_pass = set(disabled_pass or ())
        self.config = dict(config or {})
        unroll = self.config.get("tir.UnrollLoop", {})
        if not isinstance(unroll, dict):
            raise TypeError(f"PassContext: config['tir.UnrollLoop'] is a dict such as {{'auto_max_step': 16}}, "
                            f"got {unroll!r}")
        self.unroll_max_step = int(unroll.get("auto_max_step", 0)) if unroll.get("explicit_unroll", True) else 0
        passes = self.config.get("tir.add_lower_pass", [])
        if not isinstance(passes, (list, tuple)) or not all(
                isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], int) and callable(p[1])
                for p in passes):
            raise TypeError("PassContext: config['tir.add_lower_pass'] is a list of (phase, pass) pairs, e.g. "
                            "[(1, my_pass)] with my_pass made by tir.transform.prim_func_pass")
        #: the user's passes over lowered functions, in phase order (lowering runs them after its own)
        self.lower_passes = [p for _, p in sorted(passes, key=lambda x: x[0])]
        self._tokens: list[contextvars.Token] = []

    @staticmethod
    def current() -> PassContext:
        """The innermost active context, or the defaults."""
        return _CURRENT.get() or _DEFAULT

    def _log_unused(self) -> None:
        ignored = [f"config {k!r}" for k in self.config if k not in CONFIG_KEYS]
        ignored += [f"{what} {name!r}" for what, names in (("required_pass", self.required_pass),
                                                             ("disabled_pass", self.disabled_pass))
                    for name in sorted(names) if name not in _PASS_NAMES]
        for what in ignored:
            if what not in _said:
                _said.add(what)
                log.info("PassContext: %s has no effect in autosched (it has no such option or pass)", what)

    def __enter__(self) -> PassContext:
        self._log_unused()
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.reset(self._tokens.pop())


_DEFAULT = PassContext()

__all__ = ["CONFIG_KEYS", "PassContext", "register_pass_names"]
