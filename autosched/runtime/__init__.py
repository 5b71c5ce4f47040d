"""Run compiled kernels: modules, functions, and the global function registry. No llvmlite needed."""

from autosched.runtime import graph_executor
from autosched.runtime.convert import convert
from autosched.runtime.csource import CSourceModule
from autosched.runtime.module import DSOModule, Module, PackedFunc, load_module
from autosched.runtime.registry import (
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)

__all__ = [
    "CSourceModule",
    "DSOModule",
    "Module",
    "PackedFunc",
    "convert",
    "get_global_func",
    "graph_executor",
    "list_global_func_names",
    "load_module",
    "register_func",
    "remove_global_func",
]
