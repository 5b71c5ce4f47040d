"""The workload registry: named functions of parameters that return a computation's tensors.

``@autosched.register_workload("my_op")`` on ``def my_op(n=128, m=64): ... return [A, B, C]``
makes ``autosched.Task("my_op", args=...)`` possible. Every parameter should have
a default so that ``Task("my_op")`` is a real task. Built-in workloads live in
:mod:`autosched.workloads.builtin`; expert CPU schedules in
:mod:`autosched.workloads.cpu`.
"""

from __future__ import annotations

# the built-in workloads and expert schedules register themselves at import
from autosched.workloads import blocked_layout, builtin, cpu  # noqa: F401
from autosched.workloads.registry import (
    Workload,
    get_workload,
    list_workloads,
    register_schedule,
    register_workload,
    register_workload_source,
)

__all__ = ["Workload", "register_workload", "register_schedule", "register_workload_source", "get_workload",
           "list_workloads"]
