"""Neural-network ops: their calls (``nn``, which is TVM's ``relay.nn``) and their registrations (``_nn``: type
relations, te computes and default schedules of conv2d, dense, matmul, pooling, normalisation, softmax; dilate;
``loss``: nll_loss)."""

from autosched.relay.op.nn import _nn
from autosched.relay.op.nn.conv3d import avg_pool3d, conv3d, conv3d_transpose, max_pool3d
from autosched.relay.op.nn.conv_transpose import conv2d_transpose
from autosched.relay.op.nn.deformable_conv import deformable_conv2d
from autosched.relay.op.nn.loss import nll_loss
from autosched.relay.op.nn.nn import (
    avg_pool2d,
    batch_flatten,
    batch_matmul,
    batch_norm,
    bias_add,
    conv1d,
    conv2d,
    dense,
    dilate,
    dropout,
    global_avg_pool2d,
    global_max_pool2d,
    layer_norm,
    leaky_relu,
    log_softmax,
    lrn,
    matmul,
    max_pool2d,
    pad,
    prelu,
    relu,
    softmax,
    upsampling,
    upsampling3d,
)
from autosched.relay.op.nn.space import batch_to_space_nd, depth_to_space, space_to_batch_nd, space_to_depth
from autosched.relay.op.nn.sparse import sparse_dense

__all__ = ["_nn", "avg_pool2d", "avg_pool3d", "batch_flatten", "batch_matmul", "batch_norm", "batch_to_space_nd",
           "bias_add", "conv1d", "conv2d", "conv2d_transpose", "conv3d", "conv3d_transpose", "deformable_conv2d",
           "dense", "depth_to_space", "dilate", "dropout", "global_avg_pool2d", "global_max_pool2d", "layer_norm",
           "leaky_relu", "log_softmax", "lrn", "matmul", "max_pool2d", "max_pool3d", "nll_loss", "pad", "prelu",
           "relu", "softmax", "space_to_batch_nd", "space_to_depth", "sparse_dense", "upsampling", "upsampling3d"]
