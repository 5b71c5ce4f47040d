"""TVM's ``tvm.contrib`` helpers that te tutorials use: ``cc.create_shared``, ``utils.tempdir`` and
``nvcc.have_tensorcore``."""

from autosched.contrib import cc, nvcc, utils

__all__ = ["cc", "nvcc", "utils"]
