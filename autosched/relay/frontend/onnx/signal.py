"""ONNX's signal-processing ops. DFT and STFT are products with constant cosine and sine matrices: shapes are
static, so a transform along an axis of N samples is a dense layer of N inputs (the frame lengths of audio
front-ends, 400 to 2048 samples, run in the packed float kernels; a constant STFT window is folded into the
matrix). The window and mel-filter generators (HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix) depend
on constants only: they are in ``FOLD_ONLY`` and evaluated at import."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from autosched.relay import ir as relay_ir
from autosched.relay import op as relay_op
from autosched.relay.frontend.onnx.importer import _GraphConverter
from autosched.relay.frontend.onnx.registry import register
from autosched.relay.ir.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    import onnx


def _dft_weight(samples: int, length: int, bins: int, complex_in: bool, inverse: bool,
                window: np.ndarray | None = None) -> np.ndarray:
    """The dense weight [2 * bins, samples (x2 for complex input)] whose product with a signal's samples (real
    parts, then imaginary ones) gives the real parts of its first ``bins`` DFT bins of ``length`` (the samples
    past ``samples`` are zeros), then the imaginary parts; ``window`` multiplies the samples first."""
    k = np.arange(bins)[:, None]
    n = np.arange(samples)[None, :]
    angle = 2 * np.pi * ((k * n) % length) / length * (1 if inverse else -1)
    c, s = np.cos(angle), np.sin(angle)
    if window is not None:
        c, s = c * window[:samples], s * window[:samples]
    w = np.block([[c, -s], [s, c]]) if complex_in else np.concatenate([c, s])
    return (w / length if inverse else w).astype(np.float32)


def _transformed(x: Expr, lead: tuple[int, ...], parts: int, samples: int, weight: np.ndarray) -> Expr:
    """``x`` [*lead, parts, samples] (real parts, then imaginary ones) times ``weight``: [*lead, bins, 2]."""
    bins = weight.shape[0] // 2
    flat = relay_op.reshape(x, (*lead, parts * samples))
    y = relay_op.nn.dense(flat, relay_ir.const(weight))
    y = relay_op.reshape(y, (*lead, 2, bins))
    return relay_op.transpose(y, tuple(range(len(lead))) + (len(lead) + 1, len(lead)))


def _scalar(g: _GraphConverter, name: str | None, what: str) -> int | None:
    return None if name is None else int(g.value(name, what).reshape(()))


@register("DFT")
def _dft(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The discrete Fourier transform along ``axis`` of a real [..., N, 1] or complex [..., N, 2] signal (the
    last axis holds real and imaginary parts), ``dft_length`` samples (the signal truncated or zero-padded to it),
    all bins or the ``onesided`` first N/2 + 1, ``inverse`` scaled by 1/N: a dense layer of the samples with the
    cosines and sines."""
    shape = g.shape(node.input[0])
    rank = len(shape)
    if g.opset >= 20:
        axis_name = g.optional(node, 2)
        axis = _scalar(g, axis_name, "the axis") if axis_name else -2
    else:
        axis = int(attrs.get("axis", 1))
    axis %= rank
    parts = shape[-1]
    if parts not in (1, 2) or axis == rank - 1 or rank < 2:
        g._fail(f"the input must be [..., N, 1] (real) or [..., N, 2] (complex) with the axis before the last, got "
                f"shape {list(shape)} and axis {axis}")
    length = _scalar(g, g.optional(node, 1), "dft_length") or shape[axis]
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    if onesided and (inverse or parts == 2):
        g._fail("onesided=1 takes a real signal and a forward transform")
    x = g.tensor(node.input[0])
    order = [d for d in range(rank - 1) if d != axis] + [rank - 1, axis]  # [..., parts, N]
    x = relay_op.transpose(x, order)
    samples = min(shape[axis], length)
    if samples < shape[axis]:
        x = relay_op.strided_slice(x, [0], [samples], axes=[rank - 1])
    lead = tuple(shape[d] for d in order[:-2])
    bins = length // 2 + 1 if onesided else length
    y = _transformed(x, lead, parts, samples, _dft_weight(samples, length, bins, parts == 2, inverse))
    back = list(range(rank - 2))
    back.insert(axis, rank - 2)  # the bins back where the samples were, parts last
    return relay_op.transpose(y, back + [rank - 1])


@register("STFT")
def _stft(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The short-time Fourier transform of a real [batch, length, 1] (or [batch, length]) or complex
    [batch, length, 2] signal:
    frames of ``frame_length`` samples every ``frame_step`` (constants), each times ``window``, transformed to
    all bins or the ``onesided`` first frame_length / 2 + 1: [batch, frames, bins, 2]. The frames are one gather
    of constant indices, and a constant window is folded into the transform's matrix."""
    shape = g.shape(node.input[0])
    signal = g.tensor(node.input[0])
    if len(shape) == 2:  # [batch, length]: real (torch's exporter writes it so, and onnxruntime takes it)
        shape = (*shape, 1)
        signal = relay_op.reshape(signal, shape)
    if len(shape) != 3 or shape[2] not in (1, 2):
        g._fail(f"the signal must be [batch, length, 1] or [batch, length, 2], got shape {list(shape)}")
    batch, length, parts = shape
    step = _scalar(g, node.input[1], "frame_step")
    window_name, length_name = g.optional(node, 2), g.optional(node, 3)
    frame = _scalar(g, length_name, "frame_length") or (g.shape(window_name)[0] if window_name else None)
    if frame is None or step is None or step < 1 or not 0 < frame <= length:
        g._fail(f"frame_step {step} and frame_length {frame} (or a window) must fit the signal's {length} samples")
    onesided = bool(attrs.get("onesided", 1))
    if onesided and parts == 2:
        g._fail("onesided=1 takes a real signal")
    frames = 1 + (length - frame) // step
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    x = relay_op.transpose(signal, (0, 2, 1))  # [batch, parts, length]
    x = relay_op.take(x, relay_ir.const(index.astype(np.int64)), axis=2)  # [batch, parts, frames, frame]
    x = relay_op.transpose(x, (0, 2, 1, 3))
    window = None
    if window_name is not None and g.is_const(window_name):
        window = g.value(window_name, "the window").astype(np.float64)
    elif window_name is not None:
        x = relay_op.multiply(x, g.tensor(window_name))
    bins = frame // 2 + 1 if onesided else frame
    return _transformed(x, (batch, frames), parts, frame, _dft_weight(frame, frame, bins, parts == 2, False, window))
