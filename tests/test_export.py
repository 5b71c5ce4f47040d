"""Exported shared libraries load and run without llvmlite; the global function registry."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.runtime import get_global_func, register_func

M, N, K = 33, 17, 20

# Runs in a fresh interpreter where `import llvmlite` raises ImportError.
LOADER = textwrap.dedent(
    """
    import sys
    sys.modules["llvmlite"] = None          # import llvmlite -> ImportError
    try:
        import llvmlite  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("llvmlite blocker did not work")
    import numpy as np
    import autosched
    assert "llvmlite.binding" not in sys.modules
    path, kind = sys.argv[1], sys.argv[2]
    g = autosched.runtime.load_module(path)
    rng = np.random.default_rng(0)
    if kind == "add":
        for n in (1, 7, 100, 1000):
            a = rng.standard_normal(n).astype("float32")
            b = rng.standard_normal(n).astype("float32")
            c = np.full(n, np.nan, dtype="float32")
            g["myadd"](a, b, c)
            np.testing.assert_allclose(c, a + b, rtol=1e-6)
    else:
        M, N, K = (int(x) for x in sys.argv[3:6])
        a = rng.standard_normal((M, K)).astype("float32")
        b = rng.standard_normal((K, N)).astype("float32")
        c = np.full((M, N), np.nan, dtype="float32")
        g.get_function("mm")(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=1e-4, atol=1e-5)
    print("OK")
    """
)


def run_without_llvmlite(*argv):
    proc = subprocess.run([sys.executable, "-c", LOADER, *map(str, argv)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout.strip().endswith("OK"), proc.stdout


@pytest.mark.subprocess
def test_export_symbolic_vecadd_loads_without_llvmlite(tmp_path):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(xi)
    f = autosched.build(s, [A, B, C], target="llvm", name="myadd")
    path = tmp_path / "k.so"
    f.export_library(str(path))
    assert path.exists() and path.stat().st_size > 0
    run_without_llvmlite(path, "add")


@pytest.mark.subprocess
def test_export_parallel_matmul_loads_without_llvmlite(tmp_path):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    s[C].reorder(io, ii, k, j)
    s[C].parallel(io)
    s[C].vectorize(j)
    f = autosched.build(s, [A, B, C], target="llvm", name="mm")
    # same kernel in-process first
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.full((M, N), np.nan, dtype="float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=1e-4, atol=1e-5)
    path = tmp_path / "k.so"
    f.export_library(str(path))
    run_without_llvmlite(path, "mm", M, N, K)


def test_load_module_in_process(tmp_path):
    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i] * 3.0, name="C")
    s = te.create_schedule(C.op)
    path = tmp_path / "triple.so"
    autosched.build(s, [A, C], target="llvm", name="triple").export_library(str(path))
    g = autosched.runtime.load_module(str(path))
    a = np.arange(8, dtype="float32")
    c = np.zeros(8, dtype="float32")
    g["triple"](a, c)
    np.testing.assert_allclose(c, 3 * a)


def test_register_func_decorator_and_direct():
    @register_func("autosched_test.add_one")
    def add_one(x):
        return x + 1

    assert add_one(1) == 2  # the decorator gives the function back
    assert get_global_func("autosched_test.add_one")(41) == 42

    register_func("autosched_test.double", lambda x: 2 * x)
    assert get_global_func("autosched_test.double")(21) == 42
    assert autosched.runtime.get_global_func("autosched_test.double")(1) == 2


def test_get_global_func_missing():
    with pytest.raises((ValueError, KeyError)) as ei:
        get_global_func("autosched_test.definitely_missing")
    assert "autosched_test.definitely_missing" in str(ei.value)
    assert get_global_func("autosched_test.definitely_missing", allow_missing=True) is None


def test_a_runner_unloads_every_library_it_loaded(tmp_path):
    """A tuning run loads thousands of candidate libraries: each must leave memory when unloaded (one
    dlopen per load, closed once), or the runner grows by the size of every candidate it ever timed."""
    from autosched.measure.data import TaskData
    from autosched.measure.worker import RunWorker

    A = te.placeholder((64,), name="A")
    paths = []
    for i in range(6):
        C = te.compute((64,), lambda j, i=i: A[j] * float(i + 1), name="C")
        path = tmp_path / f"scale{i}.so"
        autosched.build(te.create_schedule(C.op), [A, C], target="llvm", name="scale").export_library(str(path))
        paths.append(str(path))

    def mapped() -> int:
        with open("/proc/self/maps") as f:
            return sum(1 for line in f if str(tmp_path) in line)

    a = np.arange(64, dtype="float32")
    worker = RunWorker()
    worker.put_data(TaskData(key="k", arrays=[a, np.zeros(64, "float32")], reference=None, rtol=0, atol=0,
                             num_threads=1))
    try:
        for i, path in enumerate(paths * 2):
            assert worker.load("k", path) is None
            assert mapped() > 0  # the candidate is in memory while it is timed...
            worker._caller()()
            np.testing.assert_allclose(worker._arrays[-1], a * (i % len(paths) + 1))
            worker.unload()
            assert mapped() == 0, f"library {i} stayed mapped after unload"  # ...and gone afterwards
    finally:
        worker.cleanup()
