"""PyTorch's latency on an ONNX CNN, for bench_e2e.py. Runs in the peers' virtualenv (it has torch and onnx):

    /tmp/autosched-peers/bin/python benchmarks/peer_torch_onnx.py model.onnx [--threads 2] [--input x.npy]
                                    [--seconds 2 | --serve]

The graph is rebuilt with torch.nn.functional ops (Conv, BatchNormalization, Relu, Clip, MaxPool,
AveragePool, GlobalAveragePool, Add, Flatten, Gemm), traced with TorchScript and frozen with
``torch.jit.optimize_for_inference`` (which folds batch norm into the convolutions), so PyTorch runs at its
best on this CPU with no Python in the loop. Timing is benchmarks/_timing.py's. With ``--serve`` (how
bench_e2e.py uses it) the model is set up once and timed one block at a time when the parent asks
(``benchmarks/_peers.py``), so the parent alternates it with its own models, each block after a pause; the
first line then also gives the version and the head of the output. Alone, it prints one JSON line: the
median latency in seconds over ``--seconds``.
"""

import argparse
import json
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from _peers import serve
from _timing import median_time
from onnx import numpy_helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class OnnxModule(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.graph = model.graph
        self.consts = {}
        for i, t in enumerate(model.graph.initializer):
            buf = torch.from_numpy(numpy_helper.to_array(t).copy())
            self.register_buffer(f"c{i}", buf)
            self.consts[t.name] = f"c{i}"

    def forward(self, x):
        env = {self.graph.input[0].name: x}
        for name, buf in self.consts.items():
            env[name] = getattr(self, buf)
        for n in self.graph.node:
            a, ins = attrs(n), [env[i] if i else None for i in n.input]
            op = n.op_type
            if op == "Constant":
                env[n.output[0]] = torch.from_numpy(numpy_helper.to_array(a["value"]).copy())
                continue
            if op == "Conv":
                p = a.get("pads", [0, 0, 0, 0])
                y = F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, stride=a.get("strides", 1),
                             padding=(p[0], p[1]), dilation=a.get("dilations", 1), groups=a.get("group", 1))
            elif op == "BatchNormalization":
                y = F.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], False, 0.0, a.get("epsilon", 1e-5))
            elif op == "Relu":
                y = F.relu(ins[0])
            elif op == "Clip":
                lo = a.get("min", float(ins[1]) if len(ins) > 1 and ins[1] is not None else None)
                hi = a.get("max", float(ins[2]) if len(ins) > 2 and ins[2] is not None else None)
                lo, hi = (None if v is None else float(v) for v in (lo, hi))
                y = torch.clamp(ins[0], lo, hi)
            elif op == "MaxPool":
                p = a.get("pads", [0, 0, 0, 0])
                y = F.max_pool2d(ins[0], a["kernel_shape"], a.get("strides", 1), (p[0], p[1]))
            elif op == "AveragePool":
                p = a.get("pads", [0, 0, 0, 0])
                y = F.avg_pool2d(ins[0], a["kernel_shape"], a.get("strides", 1), (p[0], p[1]),
                                 count_include_pad=bool(a.get("count_include_pad", 0)))
            elif op == "GlobalAveragePool":
                y = F.adaptive_avg_pool2d(ins[0], 1)
            elif op == "Add":
                y = ins[0] + ins[1]
            elif op == "Flatten":
                y = torch.flatten(ins[0], a.get("axis", 1))
            elif op == "Gemm":
                w = ins[1].t() if a.get("transB", 0) else ins[1]
                y = ins[0] @ w * a.get("alpha", 1.0) + (ins[2] * a.get("beta", 1.0) if len(ins) > 2 else 0)
            else:
                raise NotImplementedError(f"peer_torch_onnx: op {op} ({n.name})")
            env[n.output[0]] = y
        return env[self.graph.output[0].name]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--input", default=None, help="a .npy input (default: random, seeded)")
    ap.add_argument("--seconds", type=float, default=2.0, help="the length of the timed block (alone)")
    ap.add_argument("--serve", action="store_true", help="time one block per request on stdin (benchmarks/_peers.py)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = onnx.load(args.model)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = torch.from_numpy(np.load(args.input) if args.input else
                         np.random.default_rng(0).standard_normal(shape).astype("float32"))
    torch.set_grad_enabled(False)
    m = OnnxModule(model).eval()
    traced = torch.jit.optimize_for_inference(torch.jit.trace(m, x))
    y = traced(x)
    about = {"version": torch.__version__, "threads": args.threads, "output_head": y.flatten()[:4].tolist()}
    if args.serve:
        serve({"torch": lambda: traced(x)}, sys.stdin, sys.stdout, **about)
        return
    print(json.dumps({"peer": "torch", "seconds": median_time(lambda: traced(x), args.seconds), **about}))


if __name__ == "__main__":
    main()
