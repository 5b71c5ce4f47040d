"""TVM's ``tvm.driver`` names: ``build_module.schedule_to_module``, ``build_module.lower``/``build``."""

from autosched.driver import build_module

__all__ = ["build_module"]
