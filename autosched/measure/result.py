"""The result types of measurement, at their old address: they live in :mod:`autosched.result`, below
measure, database and cost_model, which all use them."""

from autosched.result import (
    BuildResult,
    ErrorKind,
    MeasureInput,
    MeasureResult,
    ResultFlag,
    kind_label,
    outcome_summary,
    summarize_errors,
)

__all__ = ["BuildResult", "ErrorKind", "MeasureInput", "MeasureResult", "ResultFlag", "kind_label", "outcome_summary",
           "summarize_errors"]
