"""Exceptions raised by autosched, each naming what went wrong and where."""


class AutoschedError(Exception):
    """Base class of autosched's own errors."""


class ScheduleError(AutoschedError, ValueError):
    """A schedule primitive cannot apply; the message names the stage, the axis and the rule."""


class LoweringError(AutoschedError, ValueError):
    """A schedule is well-formed step by step but cannot be lowered to loops as a whole."""


class CodegenError(AutoschedError, RuntimeError):
    """The loop IR could not be compiled for the target."""
