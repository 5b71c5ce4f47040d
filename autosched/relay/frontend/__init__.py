"""Model importers: ``relay.frontend.from_onnx`` (ONNX -> relay module and parameters) and ``from_pytorch`` (a
PyTorch module, through torch's ONNX exporter)."""

from autosched.relay.frontend.onnx import SUPPORTED_OPS, OnnxImportError, OpNotImplemented, from_onnx
from autosched.relay.frontend.pytorch import from_pytorch

__all__ = ["SUPPORTED_OPS", "OnnxImportError", "OpNotImplemented", "from_onnx", "from_pytorch"]
