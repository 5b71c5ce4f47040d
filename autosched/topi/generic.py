"""TOPI's ``topi.generic.schedule_*``: the default schedule for the target in scope (a CPU when none is)."""

from autosched.topi.schedule import default_schedule, schedules_module  # noqa: F401

schedules_module(globals())

