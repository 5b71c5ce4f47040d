"""The vendor libraries on one kernel, for bench_kernels.py. Runs in the peers' virtualenv (numpy, PyTorch,
onnxruntime; ``bash ../shared/peers/setup.sh``):

    /tmp/autosched-peers/bin/python benchmarks/peer_kernels.py '{"op": "conv", ...}' --threads 2

The kernel is a JSON object: ``{"op": "matmul", "M":, "N":, "K":}``, ``{"op": "conv", "N":, "CI":, "H":, "W":,
"CO":, "KH":, "KW":, "stride":, "padding":, "groups":}``, ``{"op": "dense", "N":, "CI":, "CO":}``,
``{"op": "maxpool", "N":, "C":, "H":, "W":, "K":, "stride":, "padding":}`` or ``{"op": "softmax", "M":, "N":}``.
onnxruntime gets a one-node model with the weights as initializers (it pre-packs them, as in a real model);
PyTorch runs eagerly under no_grad, and in channels-last layout too for convolutions and pooling. The timing
rule is bench_kernels.py's: warm up, then the median of as many runs as fit in a second. Prints one JSON line
per library: its median seconds.
"""

import argparse
import json
import time

import numpy as np


def median_time(fn, seconds=1.0):
    fn()
    t = time.perf_counter()
    fn()
    one = time.perf_counter() - t
    n = max(5, min(2000, int(seconds / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2]


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


def measure(k, threads):
    import torch
    import torch.nn.functional as F
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    rand = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    out = {}
    op = k["op"]
    with torch.no_grad():
        if op == "matmul":
            a, b = rand(k["M"], k["K"]), rand(k["K"], k["N"])
            with threadpool_limits(threads):
                out["numpy"] = median_time(lambda: a @ b)
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            out["torch"] = median_time(lambda: ta @ tb)
            from onnx import helper
            out["onnxruntime"] = median_time(onnx_session(helper.make_node("MatMul", ["x", "w"], ["y"]), {"x": a},
                                                          (k["M"], k["N"]), {"w": b}, threads))
        elif op == "dense":
            x, w, bias = rand(k["N"], k["CI"]), rand(k["CO"], k["CI"]), rand(k["CO"])
            with threadpool_limits(threads):
                out["numpy"] = median_time(lambda: x @ w.T + bias)
            tx, tw, tb = map(torch.from_numpy, (x, w, bias))
            out["torch"] = median_time(lambda: F.linear(tx, tw, tb))
            from onnx import helper
            node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
            out["onnxruntime"] = median_time(onnx_session(node, {"x": x}, (k["N"], k["CO"]), {"w": w, "b": bias},
                                                          threads))
        elif op == "conv":
            g = k.get("groups", 1)
            x, w = rand(k["N"], k["CI"], k["H"], k["W"]), rand(k["CO"], k["CI"] // g, k["KH"], k["KW"])
            s, p = k["stride"], k["padding"]
            tx, tw = torch.from_numpy(x), torch.from_numpy(w)
            out["torch"] = median_time(lambda: F.conv2d(tx, tw, stride=s, padding=p, groups=g))
            txl = tx.contiguous(memory_format=torch.channels_last)
            twl = tw.contiguous(memory_format=torch.channels_last)
            out["torch_channels_last"] = median_time(lambda: F.conv2d(txl, twl, stride=s, padding=p, groups=g))
            y = F.conv2d(tx, tw, stride=s, padding=p, groups=g)
            from onnx import helper
            node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k["KH"], k["KW"]], pads=[p] * 4,
                                    strides=[s, s], group=g)
            out["onnxruntime"] = median_time(onnx_session(node, {"x": x}, tuple(y.shape), {"w": w}, threads))
        elif op == "maxpool":
            x = rand(k["N"], k["C"], k["H"], k["W"])
            kk, s, p = k["K"], k["stride"], k["padding"]
            tx = torch.from_numpy(x)
            out["torch"] = median_time(lambda: F.max_pool2d(tx, kk, s, p))
            txl = tx.contiguous(memory_format=torch.channels_last)
            out["torch_channels_last"] = median_time(lambda: F.max_pool2d(txl, kk, s, p))
            y = F.max_pool2d(tx, kk, s, p)
            from onnx import helper
            node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[kk, kk], strides=[s, s], pads=[p] * 4)
            out["onnxruntime"] = median_time(onnx_session(node, {"x": x}, tuple(y.shape), {}, threads))
        elif op == "softmax":
            x = rand(k["M"], k["N"])
            tx = torch.from_numpy(x)
            out["torch"] = median_time(lambda: torch.softmax(tx, dim=1))
            with threadpool_limits(threads):
                def np_softmax():
                    e = np.exp(x - x.max(axis=1, keepdims=True))
                    return e / e.sum(axis=1, keepdims=True)
                out["numpy"] = median_time(np_softmax)
            from onnx import helper
            node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
            out["onnxruntime"] = median_time(onnx_session(node, {"x": x}, x.shape, {}, threads))
        else:
            raise SystemExit(f"peer_kernels: unknown op {op!r}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="the kernel as JSON")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    for peer, seconds in measure(json.loads(a.kernel), a.threads).items():
        print(json.dumps({"peer": peer, "seconds": seconds}))


if __name__ == "__main__":
    main()
