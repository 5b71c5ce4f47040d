"""A new external target in one file: ``mylib`` takes dense layers (with an optional relu) and runs them with
its own C kernel; everything else stays with autosched. Walked through in docs/relay_byoc.md.

    python examples/byoc_mylib.py     # partitions a small MLP, builds it, checks it against the plain build
"""

from __future__ import annotations

import numpy as np

from autosched import relay
from autosched.relay.dataflow_pattern import is_constant, is_op, register_pattern_table, wildcard
from autosched.runtime import graph_executor, register_func
from autosched.runtime.csource import CSourceModule, signature

TARGET = "mylib"


# 1. What the target takes: dense with constant weights, optionally followed by relu, float32 only.
@register_pattern_table(TARGET)
def pattern_table() -> list[tuple]:
    dense = is_op("nn.dense")(wildcard(), is_constant()).has_dtype("float32")
    return [(f"{TARGET}.dense_relu", dense.optional(is_op("nn.relu")))]


# 2. The codegen: a partitioned function in, a runtime module defining its global symbol out.
KERNEL = """
static void mylib_dense(const float *x, const float *w, float *y, int64_t M, int64_t U, int64_t K, int relu) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t u = 0; u < U; ++u) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * w[u * K + k];
      y[m * U + u] = relu && acc < 0.0f ? 0.0f : acc;
    }
}
"""


def codegen(fn: relay.Function) -> CSourceModule:
    name = fn.attrs["global_symbol"]
    params = {id(p): f"(const float *)a{k}" for k, p in enumerate(fn.params)}
    calls = [n for n in relay.expr.post_order(fn.body) if isinstance(n, relay.Call)]
    body, temps = [], []
    for k, call in enumerate(calls):  # composite calls, producers first
        if call.op.attrs.get("Composite") != f"{TARGET}.dense_relu":
            raise ValueError(f"{TARGET} cannot compile {call.op!r}")
        (M, K), (U, _) = call.args[0].checked_type.shape, call.args[1].checked_type.shape
        x, w = (params[id(a)] for a in call.args)
        out = "(float *)out" if call is fn.body else f"t{k}"
        if call is not fn.body:
            temps.append(f"  float t{k}[{M * U}];")
        relu = int(call.op.body.op.name == "nn.relu")  # the composite's root: relu(dense(...)) or dense(...)
        body.append(f"  mylib_dense({x}, {w}, {out}, {M}, {U}, {K}, {relu});")
        params[id(call)] = out
    args = ", ".join([f"void *a{k}" for k in range(len(fn.params))] + ["void *out"])
    src = "#include <stdint.h>\n" + KERNEL + f"int32_t {name}({args}) {{\n" + "\n".join(temps + body) + \
        "\n  return 0;\n}\n"
    sig_args = [(p.name_hint, p.checked_type.shape, "float32") for p in fn.params]
    sig_args.append(("out", fn.body.checked_type.shape, "float32"))
    return CSourceModule(src, [signature(name, sig_args)])


register_func(f"relay.ext.{TARGET}", codegen, override=True)


# 3. Use it: partition, build, run; compare with the plain build.
def main() -> None:
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(4, 32))
    w1, w2 = (relay.const(rng.standard_normal(s).astype("float32") * 0.2) for s in [(64, 32), (10, 64)])
    y = relay.sigmoid(relay.nn.dense(relay.nn.relu(relay.nn.dense(x, w1)), w2))  # sigmoid stays with autosched
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    part = relay.partition_for(mod, TARGET)
    print(part)
    xv = rng.standard_normal((4, 32)).astype("float32")
    outs = []
    for m in (mod, part):
        g = graph_executor.GraphModule(*relay.build(m, "llvm"))
        g.set_input("x", xv)
        g.run()
        outs.append(g.get_output(0))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    print("mylib output matches the plain build")


if __name__ == "__main__":
    main()
