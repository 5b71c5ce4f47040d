"""TVM's ``tvm.contrib`` helpers that te tutorials use: ``cc.create_shared`` and ``utils.tempdir``."""

from autosched.contrib import cc, utils

__all__ = ["cc", "utils"]
