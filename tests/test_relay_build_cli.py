"""``autosched build`` (autosched.cli.build): an ONNX model to a deployable folder, with and without a database."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from autosched.cli import build as build_cmd  # noqa: E402
from autosched.cli import main  # noqa: E402
from autosched.runtime import graph_executor  # noqa: E402

RNG = np.random.default_rng(1)


def _model(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = RNG.standard_normal((4, 3, 3, 3)).astype("float32")
    fc = RNG.standard_normal((5, 4)).astype("float32")
    fb = RNG.standard_normal(5).astype("float32")
    nodes = [
        helper.make_node("Conv", ["data", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["out"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(fc, "fc"), numpy_helper.from_array(fb, "fb")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return w, fc, fb


def _reference(x, w, fc, fb):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((x.shape[0], 4, 8, 8), "float32")
    for kh in range(3):
        for kw in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, kh:kh + 8, kw:kw + 8], w[:, :, kh, kw])
    g = np.maximum(conv, 0).mean(axis=(2, 3))
    return g @ fc.T + fb


def test_build_writes_a_folder_that_runs(tmp_path, capsys):
    pytest.importorskip("autosched.relay.frontend")
    path = tmp_path / "m.onnx"
    w, fc, fb = _model(path)
    out = tmp_path / "out"
    rc = main(["build", "--model", str(path), "--shape", "data=2,3,8,8", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "kernels, 0 tuned" in text
    for name in (graph_executor.GRAPH_FILE, graph_executor.LIB_FILE, graph_executor.PARAMS_FILE):
        assert (out / name).exists()
    m = graph_executor.load(out)
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    m.set_input("data", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0), _reference(x, w, fc, fb), rtol=1e-4, atol=1e-4)
    tasks, weights = build_cmd.load_model_tasks(str(path), {"data": (2, 3, 8, 8)})
    assert len(tasks) == len(weights) >= 2 and all(wt == 1.0 for wt in weights)


def test_build_usage_errors(tmp_path, capsys):
    assert main(["build", "--model", str(tmp_path / "none.onnx"), "-o", str(tmp_path / "o")]) == 2
    assert "no such model file" in capsys.readouterr().err
    path = tmp_path / "m.onnx"
    _model(path)
    assert main(["build", "--model", str(path), "--shape", "data=1,x", "-o", str(tmp_path / "o")]) == 2
    assert "--shape takes INPUT=D0,D1" in capsys.readouterr().err
