"""Model importers: ``relay.frontend.from_onnx`` (ONNX -> relay module and parameters)."""

from autosched.relay.frontend.onnx import SUPPORTED_OPS, OnnxImportError, OpNotImplemented, from_onnx

__all__ = ["SUPPORTED_OPS", "OnnxImportError", "OpNotImplemented", "from_onnx"]
