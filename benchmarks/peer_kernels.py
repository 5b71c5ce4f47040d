"""The vendor libraries on one kernel, for bench_kernels.py and bench_tuning.py. Runs in the peers' virtualenv
(numpy, PyTorch, onnxruntime; ``bash ../shared/peers/setup.sh``):

    /tmp/autosched-peers/bin/python benchmarks/peer_kernels.py '{"op": "conv", ...}' [--threads 2]
                                    [--rounds 3 --seconds 1 --pause 0.5 | --serve]

The kernel is a JSON object: ``{"op": "matmul", "M":, "N":, "K":}``, ``{"op": "conv", "N":, "CI":, "H":, "W":,
"CO":, "KH":, "KW":, "stride":, "padding":, "groups":}``, ``{"op": "dense", "N":, "CI":, "CO":}``,
``{"op": "maxpool", "N":, "C":, "H":, "W":, "K":, "stride":, "padding":}`` or ``{"op": "softmax", "M":, "N":}``.
onnxruntime gets a one-node model with the weights as initializers (it pre-packs them, as in a real model);
PyTorch runs eagerly under no_grad, and in channels-last layout too for convolutions and pooling.

Timing is benchmarks/_timing.py's, as in the benchmarks that start this. With ``--serve`` (how they use it)
the libraries are set up once and each is timed one block at a time when the parent asks
(``benchmarks/_peers.py``), so the parent alternates them with its own kernels, each block after a pause.
Alone, it times its libraries against each other in ``--rounds`` alternating rounds, a pause before each
block, and prints one JSON line per library: its best median seconds.
"""

import argparse
import json
import sys

import numpy as np
from _peers import serve
from _timing import alternating_medians


def onnx_session(node, inputs, output_shape, initializers, threads):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph([node], "k", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
                                        for n, a in inputs.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(output_shape))],
                          [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: s.run(None, inputs)


def libraries(k, threads):
    """Each library's call of kernel ``k`` at ``threads`` threads (set for the whole process: numpy's BLAS
    through threadpoolctl, PyTorch's pool; onnxruntime's per session), by name."""
    import torch
    import torch.nn.functional as F
    from onnx import helper
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    threadpool_limits(threads)  # called, not entered: numpy's BLAS keeps the limit for the whole process
    rng = np.random.default_rng(0)
    rand = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    out = {}
    op = k["op"]
    if op == "matmul":
        a, b = rand(k["M"], k["K"]), rand(k["K"], k["N"])
        out["numpy"] = lambda: a @ b
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        out["torch"] = lambda: ta @ tb
        out["onnxruntime"] = onnx_session(helper.make_node("MatMul", ["x", "w"], ["y"]), {"x": a},
                                          (k["M"], k["N"]), {"w": b}, threads)
    elif op == "dense":
        x, w, bias = rand(k["N"], k["CI"]), rand(k["CO"], k["CI"]), rand(k["CO"])
        out["numpy"] = lambda: x @ w.T + bias
        tx, tw, tb = map(torch.from_numpy, (x, w, bias))
        out["torch"] = lambda: F.linear(tx, tw, tb)
        node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
        out["onnxruntime"] = onnx_session(node, {"x": x}, (k["N"], k["CO"]), {"w": w, "b": bias}, threads)
    elif op == "conv":
        g = k.get("groups", 1)
        x, w = rand(k["N"], k["CI"], k["H"], k["W"]), rand(k["CO"], k["CI"] // g, k["KH"], k["KW"])
        s, p = k["stride"], k["padding"]
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        out["torch"] = lambda: F.conv2d(tx, tw, stride=s, padding=p, groups=g)
        txl = tx.contiguous(memory_format=torch.channels_last)
        twl = tw.contiguous(memory_format=torch.channels_last)
        out["torch_channels_last"] = lambda: F.conv2d(txl, twl, stride=s, padding=p, groups=g)
        y = F.conv2d(tx, tw, stride=s, padding=p, groups=g)
        node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k["KH"], k["KW"]], pads=[p] * 4,
                                strides=[s, s], group=g)
        out["onnxruntime"] = onnx_session(node, {"x": x}, tuple(y.shape), {"w": w}, threads)
    elif op == "maxpool":
        x = rand(k["N"], k["C"], k["H"], k["W"])
        kk, s, p = k["K"], k["stride"], k["padding"]
        tx = torch.from_numpy(x)
        out["torch"] = lambda: F.max_pool2d(tx, kk, s, p)
        txl = tx.contiguous(memory_format=torch.channels_last)
        out["torch_channels_last"] = lambda: F.max_pool2d(txl, kk, s, p)
        y = F.max_pool2d(tx, kk, s, p)
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kk, kk], strides=[s, s], pads=[p] * 4)
        out["onnxruntime"] = onnx_session(node, {"x": x}, tuple(y.shape), {}, threads)
    elif op == "softmax":
        x = rand(k["M"], k["N"])
        tx = torch.from_numpy(x)
        out["torch"] = lambda: torch.softmax(tx, dim=1)

        def np_softmax():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        out["numpy"] = np_softmax
        node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
        out["onnxruntime"] = onnx_session(node, {"x": x}, x.shape, {}, threads)
    else:
        raise SystemExit(f"peer_kernels: unknown op {op!r}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="the kernel as JSON")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--serve", action="store_true", help="time one block per request on stdin (benchmarks/_peers.py)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0, help="the length of each block")
    ap.add_argument("--pause", type=float, default=0.5, help="seconds of rest before each block")
    a = ap.parse_args()
    fns = libraries(json.loads(a.kernel), a.threads)
    if a.serve:
        serve(fns, sys.stdin, sys.stdout)
        return
    for peer, seconds in alternating_medians(fns, a.rounds, a.seconds, a.pause).items():
        print(json.dumps({"peer": peer, "seconds": seconds}))


if __name__ == "__main__":
    main()
