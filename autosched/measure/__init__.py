"""Building and timing candidates."""

from autosched.measure.result import ErrorKind, MeasureInput, MeasureResult

__all__ = ["ErrorKind", "MeasureInput", "MeasureResult"]
