"""Exceptions raised by autosched, each naming what went wrong and where."""


class AutoschedError(Exception):
    """Base class of autosched's own errors."""


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
