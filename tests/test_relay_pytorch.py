"""``relay.frontend.from_pytorch`` as TVM's PyTorch tutorial calls it: a traced module (a small ResNet-style
network and a module with an integer input) imported through torch's ONNX exporter, built, run, and equal to
torch's own outputs. Runs where PyTorch is installed (it is not a dependency of autosched)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (from_pytorch needs it; autosched does not)")

import autosched as tvm  # noqa: E402
from autosched import relay  # noqa: E402
from autosched.contrib import graph_executor  # noqa: E402
from autosched.relay.frontend import OnnxImportError  # noqa: E402


class _Block(torch.nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.block = _Block(8)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        y = self.block(torch.relu(self.stem(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _run(mod, params, inputs: dict) -> np.ndarray:
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for name, value in inputs.items():
        m.set_input(name, tvm.nd.array(value))
    m.run()
    return m.get_output(0).numpy()


def test_a_traced_convolutional_network_imports_and_matches_torch() -> None:
    torch.manual_seed(0)
    model = _Net().eval()
    for bn in (model.block.bn1, model.block.bn2):  # statistics of their own, so batch norm does something
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2)
    img = torch.randn(1, 3, 32, 32)
    scripted_model = torch.jit.trace(model, img).eval()
    mod, params = relay.frontend.from_pytorch(scripted_model, [("input0", img.shape)])
    got = _run(mod, params, {"input0": img.numpy()})
    with torch.no_grad():
        want = model(img).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.argmax(got[0]) == np.argmax(want[0])


class _Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.proj = torch.nn.Linear(16, 4)

    def forward(self, ids, scale):
        return self.proj(self.emb(ids) * scale).softmax(-1)


def test_inputs_with_their_dtypes_and_errors_named() -> None:
    torch.manual_seed(1)
    model = _Embed().eval()
    ids = torch.randint(0, 50, (2, 7))
    mod, params = relay.frontend.from_pytorch(model, [("ids", ((2, 7), "int64")), ("scale", ((1,), "float32"))])
    got = _run(mod, params, {"ids": ids.numpy(), "scale": np.array([0.5], np.float32)})
    with torch.no_grad():
        want = model(ids, torch.tensor([0.5])).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"each input is \(name, shape\) or \(name, \(shape, dtype\)\)"):
        relay.frontend.from_pytorch(model, ["ids"])
    with pytest.raises(ValueError, match="custom_convert_map is not supported"):
        relay.frontend.from_pytorch(model, [("ids", (2, 7))], custom_convert_map={"aten::x": None})
    with pytest.raises(OnnxImportError, match="torch's ONNX exporter failed"):
        relay.frontend.from_pytorch(model, [("ids", ((2, 7), "int64"))])  # one input short
