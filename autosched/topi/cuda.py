"""TOPI's ``topi.cuda``: the GPU's default schedules (thread mapping, shared tiles; for the ``cuda`` target in
scope, as TVM's are called inside ``with tvm.target.Target("cuda")``) and the operators under their cuda
names."""

from autosched.topi.nn import (  # noqa: F401
    batch_matmul,
    conv1d_ncw,
    conv1d_nwc,
    conv1d_transpose_ncw,
    conv2d_hwcn,
    conv2d_nchw,
    conv2d_nhwc,
    conv2d_transpose_nchw,
    conv3d_ncdhw,
    conv3d_ndhwc,
    conv3d_transpose_ncdhw,
    dense,
    depthwise_conv2d_nchw,
    group_conv2d_nchw,
    sparse_dense,
)
from autosched.topi.scan import cumprod, cumsum  # noqa: F401
from autosched.topi.schedule import default_schedule, schedules_module  # noqa: F401
from autosched.topi.sort import argsort, sort, topk, unique  # noqa: F401

schedules_module(globals(), "cuda")
dense_small_batch = dense_large_batch = dense
schedule_dense_small_batch = schedule_dense_large_batch = globals()["schedule_dense"]

