"""TVM's ``tvm.transform.PassContext``: the one ``with`` block of build options, read by te lowering
(``tvm.build``) and by the graph passes (``relay.build``; ``relay.transform.PassContext`` is this class).

- ``opt_level`` (default 3; TVM's is 2) enables the relay passes of that level and below: 3 adds the blocked
  layouts of AlterOpLayout, which is most of a CNN's speed on a CPU.
- ``required_pass`` / ``disabled_pass`` name relay passes to run or skip whatever the level.
- ``config={"tir.UnrollLoop": {"auto_max_step": 16}}`` unrolls every serial loop of constant extent whose
  unrolled body runs at most that many steps, as TVM's pass does (the rule of the ``auto_unroll_max_step``
  pragma); ``config={"relay.winograd": False}`` keeps convolutions off Winograd's algorithm;
  ``config={"relay.int16_products": False}`` keeps 8-bit convolutions and denses on CPUs without VNNI in the
  float32 kernels (where exact) rather than the int16 ``pmaddwd`` ones;
  ``config={"relay.FuseOps.max_depth": 64}`` caps the ops fused into one kernel (default 256, as TVM's);
  ``config={"tir.add_lower_pass": [(1, my_pass)]}`` runs the user's ``tir.transform.prim_func_pass`` passes on
  every lowered function (all phases after autosched's own lowering, in phase order).

Other configuration keys and pass names are TVM's own: they are accepted and each is logged once, on entering
the block, as having no effect here.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

log = logging.getLogger("autosched.transform")
_CURRENT: contextvars.ContextVar[PassContext | None] = contextvars.ContextVar("autosched_pass_context",
                                                                               default=None)
#: configuration keys something in autosched reads, and what for (anything else is logged as without effect)
CONFIG_KEYS = {
    "tir.UnrollLoop": "te lowering unrolls short serial loops",
    "relay.winograd": "relay's AlterOpLayout may use Winograd's algorithm for 3x3 convolutions",
    "relay.int16_products": "relay's AlterOpLayout runs 8-bit products in int16 pmaddwd kernels without VNNI",
    "relay.backend.use_auto_scheduler": "always on: relay.build applies the records of apply_history_best",
    "relay.FuseOps.max_depth": "the most ops FuseOps puts in one kernel (default 256)",
    "tir.add_lower_pass": "te lowering runs these (phase, pass) pairs on each function, in phase order",
}
#: the configuration keys that switch something on or off
_BOOL_KEYS = ("relay.winograd", "relay.int16_products")
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
        for key in _BOOL_KEYS:  # "false" would read as True
            if key in self.config and not isinstance(self.config[key], (bool, int)):
                raise TypeError(f"PassContext: config[{key!r}] is True or False, got {self.config[key]!r}")
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
        #: TVM's pass instruments: objects with run_before_pass / run_after_pass (mod, info), and optionally
        #: enter_pass_ctx / exit_pass_ctx and should_run (see autosched.instrument)
        self.instruments = list(instruments or [])
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
        for inst in self.instruments:
            if hasattr(inst, "enter_pass_ctx"):
                inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc: Any) -> None:
        for inst in self.instruments:
            if hasattr(inst, "exit_pass_ctx"):
                inst.exit_pass_ctx()
        _CURRENT.reset(self._tokens.pop())


class PassInfo:
    """A pass's name and the opt_level from which it runs (TVM's ``tvm.transform.PassInfo``)."""

    def __init__(self, name: str, opt_level: int, required: Sequence[str] = ()):
        self.name = name
        self.opt_level = opt_level
        self.required = list(required)

    def __str__(self) -> str:
        return f"The meta data of the pass - pass name: {self.name}, opt_level: {self.opt_level}"


class Pass:
    """A transformation of modules (relay's IRModule, or a lowered function) with a name and the opt_level from
    which it runs; calling it runs it, with the PassContext's instruments told before and after."""

    def __init__(self, name: str, opt_level: int, fn: Callable[[Any], Any]):
        self.name = name
        self.opt_level = opt_level
        self.fn = fn

    @property
    def info(self) -> PassInfo:
        return PassInfo(self.name, self.opt_level)

    def enabled(self, ctx: PassContext) -> bool:
        if self.name in ctx.disabled_pass:
            return False
        return self.name in ctx.required_pass or self.opt_level <= ctx.opt_level

    def __call__(self, mod: Any) -> Any:
        ctx = PassContext.current()
        info = self.info
        if any(hasattr(i, "should_run") and not i.should_run(mod, info) for i in ctx.instruments):
            return mod
        for inst in ctx.instruments:
            if hasattr(inst, "run_before_pass"):
                inst.run_before_pass(mod, info)
        out = self.fn(mod)
        for inst in ctx.instruments:
            if hasattr(inst, "run_after_pass"):
                inst.run_after_pass(out, info)
        return out

    def __repr__(self) -> str:
        return f"Pass({self.name}, opt_level={self.opt_level})"


class Sequential(Pass):
    """Passes run in order; each runs only when the current PassContext's opt_level (and pass lists) enable it."""

    def __init__(self, passes: Sequence[Pass] | None = None, opt_level: int = 0, name: str = "sequential",
                 required: Sequence[str] | None = None):
        self.passes = list(passes or [])
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential: {p!r} is not a pass (relay.transform.FoldConstant(), a "
                                "@relay.transform.function_pass, tvm.transform.PrintIR(), ...)")
        super().__init__(name, opt_level, self._run)

    def _run(self, mod: Any) -> Any:
        ctx = PassContext.current()
        for p in self.passes:
            if isinstance(p, Sequential) or p.enabled(ctx):
                mod = p(mod)
        return mod


def PrintIR(header: str = "", show_meta_data: bool = False) -> Pass:  # noqa: N802 - TVM's name
    """A pass that prints the module it is given (after ``header``) and returns it unchanged."""
    def run(mod: Any) -> Any:
        print(f"PrintIR({header}):\n{mod}" if header else str(mod))
        return mod

    return Pass("PrintIR", 0, run)


def module_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                required: Sequence[str] | None = None) -> Any:
    """TVM's decorator of a whole-module pass: a function ``f(mod, ctx) -> mod``, or a class whose
    ``transform_module(self, mod, ctx)`` does it (calling the decorated class makes the pass)."""

    def make(obj: Any) -> Any:
        pass_name = name or obj.__name__
        if isinstance(obj, type):
            def construct(*args: Any, **kwargs: Any) -> Pass:
                inst = obj(*args, **kwargs)
                return Pass(pass_name, opt_level, lambda mod: inst.transform_module(mod, PassContext.current()))

            construct.__name__ = obj.__name__
            construct.__doc__ = obj.__doc__
            return construct
        if not callable(obj):
            raise TypeError(f"module_pass: {obj!r} is neither a function nor a class")
        return Pass(pass_name, opt_level, lambda mod: obj(mod, PassContext.current()))

    return make(pass_func) if pass_func is not None else make


_DEFAULT = PassContext()

__all__ = ["CONFIG_KEYS", "Pass", "PassContext", "PassInfo", "PrintIR", "Sequential", "module_pass",
           "register_pass_names"]
