"""TOPI's ``topi.x86``: the CPU's default schedules (the same functions as ``topi.generic``, a CPU target), and
the operators under their x86 names."""

from autosched.topi.nn import (  # noqa: F401
    batch_matmul,
    conv2d_nchw,
    conv2d_nhwc,
    conv2d_transpose_nchw,
    conv3d_ncdhw,
    conv3d_ndhwc,
    conv3d_transpose_ncdhw,
    dense,
    depthwise_conv2d_nchw,
    sparse_dense,
)
from autosched.topi.schedule import default_schedule, schedules_module  # noqa: F401
from autosched.topi.vision import roi_align_nchw  # noqa: F401

schedules_module(globals(), "llvm")
dense_nopack = dense_pack = dense

