"""TVM's ``autotvm.task.space`` names: ``FallbackConfigEntity``, the configuration of a template called with no
record (every split leaving its axis whole, every other knob at its first candidate)."""

from autosched.autotvm.task import FallbackConfig

FallbackConfigEntity = FallbackConfig

__all__ = ["FallbackConfigEntity"]
