"""Exceptions raised by autosched, each naming what went wrong and where."""


class AutoschedError(RuntimeError):
    """Base class of autosched's own errors. It is a RuntimeError, as TVM's ``TVMError`` is, so code written
    for TVM (``pytest.raises(RuntimeError)``, ``except tvm.error.TVMError``) catches a refused schedule."""


#: TVM's name for the base class, for code written against TVM
TVMError = AutoschedError


class ScheduleError(AutoschedError, ValueError):
    """A schedule primitive cannot apply; the message names the stage, the axis and the rule."""


class LoweringError(AutoschedError, ValueError):
    """A schedule is well-formed step by step but cannot be lowered to loops as a whole."""


class CodegenError(AutoschedError, RuntimeError):
    """The loop IR could not be compiled for the target."""


class ClusterError(AutoschedError, RuntimeError):
    """A Ray cluster cannot measure a task: no node has the target's CPU, or every builder's or runner's node is
    gone; the message names the nodes."""


class ClusterLost(ClusterError):
    """The head of the Ray cluster stopped answering: the run cannot go on there (what it committed is kept)."""


class UnsupportedCPUError(AutoschedError):
    """Compiled code needs instruction-set extensions this CPU lacks (an AVX-512 build on an AVX2 host): raised
    before any of it runs, naming the CPU it was built for, the missing extensions and what to build instead."""
