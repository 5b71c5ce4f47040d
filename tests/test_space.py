"""Every space produces correct kernels: 20 seeded samples of each kind, for every built-in workload
(and one registered here), lower, compile and match numpy.

Shapes are small (the schedules, not the sizes, are under test) so the file runs in about a minute.
Inputs are multiples of 1/8, so sums of their products are exact in float32 whatever the order.
"""

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.workloads.reference import get_reference

SAMPLES = 20
RTOL = ATOL = 1e-4

CASES = [
    ("matmul", dict(M=32, N=32, K=16)),
    ("batch_matmul", dict(B=2, M=16, N=16, K=8)),
    ("dense", dict(N=2, CI=32, CO=24, relu=True)),
    ("dense", dict(N=3, CI=16, CO=20, bias=False)),
    ("conv2d", dict(H=8, W=8, CI=4, CO=8)),
    ("conv2d", dict(H=9, W=9, CI=4, CO=8, layout="NHWC", stride=2)),
    ("depthwise_conv2d", dict(C=4, H=8, W=8)),
    ("pool2d", dict(C=4, H=8, W=8)),
    ("pool2d", dict(C=4, H=8, W=8, pool_type="avg", stride=1)),
    ("softmax", dict(M=8, N=32)),
    ("elementwise", dict(C=3, H=5, W=8, op="sigmoid_mul")),
]


def case_id(case):
    name, args = case
    extra = [str(v) for k, v in args.items() if isinstance(v, str | bool)]
    return "-".join([name] + extra)


def random_inputs(tensors, seed=0):
    rng = np.random.default_rng(seed)
    ins = [(rng.integers(-8, 9, size=tuple(int(d) for d in t.shape)) / 8.0).astype(t.dtype) for t in tensors[:-1]]
    out_t = tensors[-1]
    return ins, np.full(tuple(int(d) for d in out_t.shape), np.nan, dtype=out_t.dtype)


def check_traces(task, traces, ref_fn):
    """Build every trace and compare it with ``ref_fn(inputs)``; all failures are reported together."""
    ins, out0 = random_inputs(task.tensors())
    want = ref_fn([a.astype(np.float64) for a in ins]).astype(out0.dtype)
    failures = []
    for k, trace in enumerate(traces):
        try:
            sch, args = task.apply(trace)
            mod = autosched.build(sch, args)
            out = out0.copy()
            mod(*ins, out)
            np.testing.assert_allclose(out, want, rtol=RTOL, atol=ATOL)
        except Exception as e:  # noqa: BLE001 - collect, then fail with every reproducer
            failures.append(f"sample {k}: {type(e).__name__}: {str(e)[:400]}\n  trace: {trace.dumps()}")
    assert not failures, f"{len(failures)}/{len(traces)} traces of {task} failed:\n" + "\n".join(failures)


@pytest.mark.parametrize("kind", ["template", "generated"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_builtin_samples_are_correct(case, kind):
    name, args = case
    task = autosched.Task(name, args)
    space = task.space(kind)
    traces = space.sample(SAMPLES, np.random.default_rng(2024))
    assert len(set(traces)) == len(traces)
    if kind == "template":  # exact size: all of them when there are fewer than asked
        assert len(traces) == min(SAMPLES, space.size())
    else:  # estimated size
        assert len(traces) == SAMPLES or len(traces) >= space.size() // 2
    ref = get_reference(name)
    check_traces(task, traces, lambda ins: ref(ins, **task.args))


# ---------------------------------------------------------------- a workload that is not built in
@autosched.register_workload("test_space_mlp")
def mlp(M: int = 12, K: int = 20, N: int = 24):
    """rowsum(relu(X @ W^T + b) * v): a tiled reduction, an elementwise epilogue, a second reduction."""
    X = te.placeholder((M, K), name="X")
    W = te.placeholder((N, K), name="W")
    b = te.placeholder((N,), name="b")
    v = te.placeholder((N,), name="v")
    k = te.reduce_axis((0, K), name="k")
    H = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), name="H")
    A = te.compute((M, N), lambda i, j: te.max(H[i, j] + b[j], te.const(0.0, "float32")), name="act")
    j2 = te.reduce_axis((0, N), name="j2")
    Y = te.compute((M,), lambda i: te.sum(A[i, j2] * v[j2], axis=j2), name="Y")
    return [X, W, b, v, Y]


def mlp_ref(ins):
    X, W, b, v = ins
    return np.maximum(X @ W.T + b, 0) @ v


@autosched.register_workload("test_space_odd")
def odd(M: int = 7, N: int = 13, K: int = 5):
    """Prime extents, a transposed elementwise consumer of a reduction, a scalar-like output."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    T = te.compute((N, M), lambda j, i: C[i, j] * 0.5, name="T")
    return [A, B, T]


def odd_ref(ins):
    A, B = ins
    return (A @ B).T * 0.5


@pytest.mark.parametrize("name,ref", [("test_space_mlp", mlp_ref), ("test_space_odd", odd_ref)])
def test_registered_workload_gets_a_generated_space(name, ref):
    task = autosched.Task(name)
    space = task.space("generated")
    traces = space.sample(SAMPLES, np.random.default_rng(7))
    assert len(traces) == SAMPLES
    check_traces(task, traces, ref)
    # mutants of a registered workload are legal too
    rng = np.random.default_rng(8)
    check_traces(task, [space.mutate(t, rng) for t in traces[:5]], ref)


def test_mlp_space_has_both_sketches():
    """The epilogue is inlined (cache_write sketch) or kept (fused consumer sketch); both occur."""
    task = autosched.Task("test_space_mlp")
    space = task.space("generated")
    points = [space.point_of(t) for t in space.sample(40, np.random.default_rng(3))]
    assert {p["inline/act"] for p in points} == {True, False}
    fused = [p for p in points if not p["inline/act"]]
    assert all("cache_write/H" not in p for p in fused)  # act is H's fusible consumer
    assert any(p.get("cache_write/H") for p in points if p["inline/act"])
