"""The built-in relay ops, registered on import: attributes, type relations and te computes, by family in
``elemwise``, ``nn`` (conv, dense, pooling, normalisation, softmax) and ``tensor`` (reshape, transpose,
concatenate, pad, slice, upsampling); ``common`` holds the checks and shape helpers they share."""

from autosched.relay.ops.common import broadcast_shape, pad4
from autosched.relay.ops.elemwise import prelu
from autosched.relay.ops.nn import channel_block_of, log_softmax, lrn, pad_nchw
from autosched.relay.ops.tensor import reshape_shape, slice_range, strided_slice, upsampling

__all__ = ["broadcast_shape", "channel_block_of", "log_softmax", "lrn", "pad4", "pad_nchw", "prelu", "reshape_shape",
           "slice_range", "strided_slice", "upsampling"]
