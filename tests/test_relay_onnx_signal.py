"""ONNX's signal-processing ops (relay/frontend/onnx/signal.py): DFT and STFT as dense layers of constant cosines
and sines, the windows and mel filters evaluated at import; against onnxruntime and onnx's reference evaluator,
and an audio front-end's log-mel spectrogram as torch's exporter writes it (STFT of a [batch, length] signal)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from _onnx_models import IR_VERSION, run_onnxruntime  # noqa: E402
from autosched.relay.frontend import OnnxImportError  # noqa: E402
from test_relay_onnx import run_relay  # noqa: E402

R = np.random.default_rng(21)


def _model(nodes, x_shape, inits: dict, opset: int = 17):
    graph = helper.make_graph(nodes, "signal", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return model


def _dft(shape, axis: int, length: int | None = None, opset: int = 17, **attrs):
    inits = {"n": np.array(length, np.int64)} if length else {}
    inputs = ["x", "n" if length else ""]
    if opset >= 20:
        inits["axis"] = np.array(axis, np.int64)
        inputs.append("axis")
    else:
        attrs["axis"] = axis
    return _model([helper.make_node("DFT", inputs, ["y"], **attrs)], shape, inits, opset), shape


def _stft(shape, step: int, frame: int, window: str = "hann", **attrs):
    """STFT of ``shape`` by frames of ``frame`` every ``step``, the window a HannWindow node's, an initializer,
    or none (then frame_length gives the frames)."""
    nodes, inits = [], {"step": np.array(step, np.int64), "frame": np.array(frame, np.int64)}
    if window == "hann":
        nodes.append(helper.make_node("HannWindow", ["frame"], ["w"]))
    elif window == "given":
        inits["w"] = R.random(frame).astype(np.float32)
    inputs = ["x", "step", "w" if window != "none" else "", "frame"]
    return _model(nodes + [helper.make_node("STFT", inputs, ["y"], **attrs)], shape, inits), shape


CASES = {
    "DFT real, onesided": lambda: _dft((3, 64, 1), 1, onesided=1),
    "DFT complex, along an inner axis": lambda: _dft((2, 5, 24, 2), 2),
    "DFT inverse, zero-padded to dft_length": lambda: _dft((4, 32, 2), 1, length=48, inverse=1),
    "DFT truncated to dft_length": lambda: _dft((4, 32, 1), 1, length=20),
    "DFT, the axis an input (opset 20)": lambda: _dft((2, 30, 3, 1), 1, opset=20),
    "STFT, a Hann window node": lambda: _stft((2, 4000, 1), 160, 400, onesided=1),
    "STFT of [batch, length], a given window": lambda: _stft((1, 1000), 100, 256, window="given"),
    "STFT complex, all bins, no window": lambda: _stft((2, 300, 2), 50, 64, window="none", onesided=0),
}

#: the converters these tests cover
SIGNAL_OPS = {"DFT", "STFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"}


@pytest.mark.parametrize("case", list(CASES))
def test_dft_and_stft_match_onnxruntime_and_the_reference(case: str) -> None:
    model, shape = CASES[case]()
    x = {"x": R.standard_normal(shape).astype(np.float32)}
    got = run_relay(model, x)[0]
    # the reference computes in float64: within 2e-6 of its largest value; onnxruntime's float32 FFT itself sits
    # up to 3e-5 from it. A [batch, length] signal is torch's and onnxruntime's, not the spec's (nor the reference's)
    wants = [(run_onnxruntime(model, x)[0], 1e-4)]
    if len(shape) != 2:
        wants.append((ReferenceEvaluator(model).run(None, x)[0], 2e-6))
    for want, within in wants:
        assert got.shape == want.shape
        assert float(np.abs(got - want).max()) <= within * float(np.abs(want).max())


@pytest.mark.parametrize("window", ["HammingWindow", "BlackmanWindow"])
def test_a_log_mel_spectrogram_in_onnx_ops_matches_onnxruntime(window: str) -> None:
    """An audio front-end written in ONNX ops: a window and a mel filter bank (evaluated at import), STFT,
    power, mel, log: 0.1 s of 16 kHz audio, 25 ms frames every 10 ms, 40 mel bands."""
    ints = {"frame": 400, "step": 160, "mels": 40, "bins": 201, "rate": 16000}
    inits = {k: np.array(v, np.int64) for k, v in ints.items()}
    inits.update(lo=np.float32(20.0), hi=np.float32(7600.0), eps=np.float32(1e-6), two=np.float32(2.0))
    nodes = [helper.make_node(window, ["frame"], ["w"]),
             helper.make_node("MelWeightMatrix", ["mels", "frame", "rate", "lo", "hi"], ["mel"]),
             helper.make_node("STFT", ["x", "step", "w", "frame"], ["s"]),
             helper.make_node("Pow", ["s", "two"], ["s2"]),
             helper.make_node("ReduceSum", ["s2", "last"], ["p"], keepdims=0),
             helper.make_node("MatMul", ["p", "mel"], ["m"]),
             helper.make_node("Add", ["m", "eps"], ["me"]),
             helper.make_node("Log", ["me"], ["y"])]
    inits["last"] = np.array([-1], np.int64)
    model = _model(nodes, (1, 1600, 1), inits)
    x = {"x": R.standard_normal((1, 1600, 1)).astype(np.float32)}
    got, want = run_relay(model, x)[0], run_onnxruntime(model, x)[0]
    assert got.shape == want.shape == (1, 8, 40)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)  # a log of onnxruntime's float32 FFT


def test_log_mel_as_torchs_exporter_writes_it() -> None:
    """torch.stft(x, 400, 160, window, center=False) exported by torch's ONNX exporter (opset 17) is an STFT of
    a [batch, length] signal with the window an initializer; written here as the exporter writes it."""
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)).astype(np.float32)
    inits = {"step": np.array(160, np.int64), "window": window, "frame": np.array(400, np.int64),
             "two": np.float32(2.0), "last": np.array([-1], np.int64)}
    nodes = [helper.make_node("STFT", ["x", "step", "window", "frame"], ["s"], onesided=1),
             helper.make_node("Pow", ["s", "two"], ["s2"]),
             helper.make_node("ReduceSum", ["s2", "last"], ["y"], keepdims=0)]
    model = _model(nodes, (2, 4000), inits)
    x = {"x": R.standard_normal((2, 4000)).astype(np.float32)}
    got, want = run_relay(model, x)[0], run_onnxruntime(model, x)[0]
    assert got.shape == want.shape == (2, 23, 201)
    assert float(np.abs(got - want).max()) <= 1e-4 * float(np.abs(want).max())  # onnxruntime's float32 FFT


def test_signal_ops_name_what_they_cannot_take() -> None:
    bad = {"onesided=1 takes a real signal": _dft((2, 16, 2), 1, onesided=1)[0],
           "the axis before the last": _dft((2, 16, 1), 2)[0]}
    for message, model in bad.items():
        with pytest.raises(OnnxImportError, match=message):
            run_relay(model, {"x": np.zeros([d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim],
                                            np.float32)})
    computed = _model([helper.make_node("HannWindow", ["n"], ["y"])], (1,), {})
    computed.graph.input.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    with pytest.raises(OnnxImportError, match="known at import"):
        run_relay(computed, {"x": np.zeros(1, np.float32), "n": np.array(8, np.int64)})
