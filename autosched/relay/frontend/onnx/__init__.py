"""ONNX -> relay (``from_onnx``). ``importer`` walks the graph; the op converters live by family in ``nn``
(conv, pool, norm, dense), ``elementwise``, ``tensor`` (reshape, concat, pad, slice, resize, reductions, gathers
and scatters), ``rnn`` (LSTM, GRU, RNN, unrolled), ``attention`` (Attention, RotaryEmbedding), ``quantized``
(QDQ, dynamic and QLinear quantization), ``signal`` (DFT, STFT, windows), ``random`` (draws made at import),
``contrib`` (onnxruntime's fused
transformer ops), ``control`` (If and Loop decided at import) and ``constants`` (values known at import), ``vision``
(RoiAlign, MaxRoiPool), ``loss`` (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), ``linalg`` (Det);
``registry`` is the table that joins them."""

from autosched.relay.frontend.onnx import (  # noqa: F401 - they fill the table
    attention,
    constants,
    contrib,
    control,
    elementwise,
    linalg,
    loss,
    nn,
    quantized,
    random,
    rnn,
    signal,
    tensor,
    vision,
)
from autosched.relay.frontend.onnx.importer import OnnxImportError, OpNotImplemented, from_onnx
from autosched.relay.frontend.onnx.registry import CONVERTERS

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(CONVERTERS))

__all__ = ["SUPPORTED_OPS", "OnnxImportError", "OpNotImplemented", "from_onnx"]
