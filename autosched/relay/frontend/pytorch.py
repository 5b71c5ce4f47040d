"""``relay.frontend.from_pytorch``: a PyTorch module (traced, scripted or plain) to a relay module, through
torch's own ONNX exporter and :func:`from_onnx`. TVM's signature, so that its PyTorch tutorial runs:

    scripted = torch.jit.trace(model, example).eval()
    mod, params = relay.frontend.from_pytorch(scripted, [("input0", (1, 3, 224, 224))])

Each input is ``(name, shape)`` or ``(name, (shape, dtype))``; the graph inputs take those names. torch is needed
only here (it is not a dependency of autosched); the exporter runs on example inputs of the given shapes (zeros:
the module must not branch on their values), with its TorchScript-based exporter at opset 17.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.relay.frontend.onnx import from_onnx
from autosched.relay.frontend.onnx.importer import OnnxImportError
from autosched.relay.ir.expr import IRModule

#: the ONNX opset the exporter writes
OPSET = 17


def _input_info(info: Any) -> tuple[str, tuple[int, ...], str]:
    if not (isinstance(info, (tuple, list)) and len(info) == 2 and isinstance(info[0], str)):
        raise TypeError(f"from_pytorch: each input is (name, shape) or (name, (shape, dtype)), got {info!r}")
    name, spec = info
    if (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[1], str)
            and isinstance(spec[0], (tuple, list))):
        shape, dtype = spec
    else:
        shape, dtype = spec, "float32"
    try:
        return name, tuple(int(d) for d in shape), str(np.dtype(dtype))
    except (TypeError, ValueError):
        raise TypeError(f"from_pytorch: input {name!r} has shape {spec!r}; give whole numbers") from None


def from_pytorch(script_module: Any, input_infos: Sequence[Any], custom_convert_map: dict | None = None,
                 default_dtype: str = "float32", freeze_params: bool = False,
                 **unused: Any) -> tuple[IRModule, dict[str, np.ndarray]]:
    """``(mod, params)`` of a PyTorch module run on inputs of the given names, shapes and dtypes."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("relay.frontend.from_pytorch needs PyTorch (pip install torch); or export the model "
                          "with torch.onnx.export and use relay.frontend.from_onnx") from e
    if custom_convert_map:
        raise ValueError("from_pytorch: custom_convert_map is not supported (the model goes through torch's ONNX "
                         "exporter; an op it lacks is registered with torch.onnx.register_custom_op_symbolic)")
    infos = [_input_info(i) for i in input_infos]
    names = [n for n, _, _ in infos]
    if len(set(names)) != len(names):
        raise ValueError(f"from_pytorch: input names repeat: {names}")
    examples = tuple(torch.zeros(shape, dtype=getattr(torch, dtype)) for _, shape, dtype in infos)
    buf = io.BytesIO()
    was_training = getattr(script_module, "training", False)
    if hasattr(script_module, "eval"):
        script_module.eval()
    try:
        with warnings.catch_warnings():  # torch >= 2.9 calls this exporter legacy: traced modules still need it
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(script_module, examples, buf, input_names=names, opset_version=OPSET, dynamo=False,
                              do_constant_folding=True)
    except Exception as e:  # noqa: BLE001 - the exporter's own error, named as such
        raise OnnxImportError(f"from_pytorch: torch's ONNX exporter failed on the module: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from e
    finally:
        if was_training and hasattr(script_module, "train"):
            script_module.train()
    import onnx

    model = onnx.load_from_string(buf.getvalue())
    return from_onnx(model, shape={n: s for n, s, _ in infos}, dtype=default_dtype, freeze_params=freeze_params)


__all__ = ["from_pytorch"]
