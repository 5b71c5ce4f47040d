"""The runtime calls of TVM's tutorials, under TVM's names: devices, nd.array / nd.empty, functions that take
NDArrays and scalar te.var arguments, time_evaluator, entry_name, save / create_shared / load_module,
Target(target=, host=). Each kernel is compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import autosched
from autosched import te
from autosched.contrib import cc, nvcc, utils
from autosched.tir import stmt as S


def _vadd(n=None):
    n = n if n is not None else te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def test_devices_and_ndarrays():
    dev = autosched.device("llvm", 0)
    assert dev == autosched.cpu(0) and dev.device_type == "cpu" and dev.exist
    assert autosched.device("cuda", 0) == autosched.cuda(0) == autosched.gpu(0)
    assert autosched.cpu(0).device_type_code == 1 and autosched.cuda(0).device_type_code == 2
    with pytest.raises(ValueError, match="unknown device"):
        autosched.device("tpu", 0)
    assert not autosched.device("metal", 0).exist  # TVM's other devices: names, never present
    src = np.arange(6, dtype="float32").reshape(2, 3)
    a = autosched.nd.array(src, dev)
    src[0, 0] = 100  # nd.array copies
    assert a.shape == (2, 3) and a.dtype == "float32" and a.device == dev
    np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype="float32").reshape(2, 3))
    np.testing.assert_array_equal(a.asnumpy(), a.numpy())
    e = autosched.nd.empty((2, 3), "float32", dev)
    a.copyto(e)
    np.testing.assert_array_equal(e.numpy(), a.numpy())
    assert autosched.nd.empty((), "int32").shape == ()


def test_function_takes_ndarrays_numpy_and_scalar_vars():
    A, B, C = _vadd()
    s = te.create_schedule(C.op)
    tgt = autosched.target.Target(target="llvm", host="llvm")
    assert tgt.kind.name == "llvm" and tgt.host.kind.name == "llvm"
    f = autosched.build(s, [A, B, C], tgt, name="myadd")
    assert f.entry_name == "myadd"
    dev = autosched.device(tgt.kind.name, 0)
    n = 1031
    a = autosched.nd.array(np.random.uniform(size=n).astype("float32"), dev)
    b = np.random.uniform(size=n).astype("float32")
    c = autosched.nd.array(np.zeros(n, dtype="float32"), dev)
    f(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b)
    # a scalar te.var argument: passed as a Python number where the argument list puts it
    x = te.var("x", dtype="float32")
    k = te.var("k")
    D = te.compute(A.shape, lambda i: A[i] * x + k.astype("float32"), name="D")
    g = autosched.build(te.create_schedule(D.op), [A, x, D, k])
    assert "x: float32" in str(autosched.lower(te.create_schedule(D.op), [A, x, D, k]))
    d = np.zeros(n, "float32")
    g(a, 1.5, d, 3)
    np.testing.assert_allclose(d, a.numpy() * 1.5 + 3, rtol=1e-6)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        g(a, 1.5, d)
    with pytest.raises(TypeError, match="integer"):
        g(a, 1.5, d, 2.5)


def test_scalar_var_only_in_a_shape_expression():
    n, m, x = te.size_var("n"), te.size_var("m"), te.size_var("x")
    A = te.placeholder((n, m), name="A")
    B = te.compute((m, n // x), lambda i, j: A[i, j], name="B")
    f = autosched.build(te.create_schedule(B.op), [A, B, x])
    a = np.random.rand(8, 8).astype("float32")
    b = np.zeros((8, 4), "float32")
    f(a, b, 2)
    np.testing.assert_array_equal(b, a[:, :4])
    with pytest.raises(ValueError, match="shape"):
        f(a, b, 4)


def test_time_evaluator_returns_mean_median_results():
    A, B, C = _vadd(4096)
    f = autosched.build(te.create_schedule(C.op), [A, B, C], "llvm", name="vadd")
    dev = autosched.cpu(0)
    a, b = autosched.nd.array(np.ones(4096, "float32"), dev), autosched.nd.array(np.ones(4096, "float32"), dev)
    c = autosched.nd.empty((4096,), "float32", dev)
    res = f.time_evaluator(f.entry_name, dev, number=3, repeat=4)(a, b, c)
    assert len(res.results) == 4 and all(t > 0 for t in res.results)
    assert min(res.results) <= res.median <= max(res.results) and res.mean > 0
    np.testing.assert_array_equal(c.numpy(), 2)
    slow = f.time_evaluator("vadd", dev, number=1, repeat=1, min_repeat_ms=5)(a, b, c)
    assert len(slow.results) == 1


def test_save_object_create_shared_and_export_library_load(tmp_path):
    A, B, C = _vadd()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(xo)
    f = autosched.build(s, [A, B, C], "llvm", name="myadd")
    temp = utils.tempdir(str(tmp_path))
    f.save(temp.relpath("myadd.o"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    f.export_library(temp.relpath("myadd_pack.so"))
    f.save(temp.relpath("myadd.ll"))
    assert {"myadd.o", "myadd.so", "myadd_pack.so", "myadd.ll"} <= set(temp.listdir())
    n = 777
    a, b = np.random.rand(n).astype("float32"), np.random.rand(n).astype("float32")
    for lib in ("myadd.so", "myadd_pack.so"):
        g = autosched.runtime.load_module(temp.relpath(lib))
        c = autosched.nd.array(np.zeros(n, "float32"))
        g(autosched.nd.array(a), autosched.nd.array(b), c)
        np.testing.assert_allclose(c.numpy(), a + b, err_msg=lib)
    own = utils.tempdir()
    path = own.path
    own.remove()
    assert not __import__("os").path.exists(path)


def test_lower_accepts_an_inlined_tensor_and_tvm_keywords():
    n = 64
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + 1, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = str(autosched.lower(s, [A, B, C], simple_mode=True))
    assert "B: float32[64]" in text and "B[" not in text.split("{", 1)[1]
    f = autosched.build(s, [A, B, C])
    a, b, c = np.random.rand(n).astype("float32"), np.full(n, 7, "float32"), np.zeros(n, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(b, 7)  # an inlined argument is neither read nor written


def test_fuse_of_no_axes_gives_a_unit_loop_to_split():
    X = te.placeholder((10,), dtype="int32", name="X")
    k = te.reduce_axis((0, 10))
    Y = te.compute((), lambda: te.sum(X[k], k), name="Y")
    s = te.create_schedule(Y.op)
    ax = s[Y].fuse(*Y.op.axis)
    assert s[Y].leaf_iter_vars[0] is ax
    axo, axi = s[Y].split(ax, nparts=4)
    f = autosched.build(s, [Y, X])
    y = autosched.nd.empty((), "int32")
    f(y, autosched.nd.array(np.arange(10, dtype="int32")))
    assert int(y.numpy()) == 45


def test_cuda_function_takes_ndarrays_and_times_on_the_gpu(tmp_path, monkeypatch):
    """With the stand-in CUDA driver (tests/cuda_driver_stub.c: host memory, launches recorded, kernels not
    run): NDArrays on cuda(0) reach the kernel, and time_evaluator copies the arrays in once and launches
    warm-up + number x repeat times. (On a GPU machine tests/test_gpu.py runs the kernels.)"""
    import ctypes
    import pathlib
    import subprocess

    from autosched.runtime import cuda

    lib = tmp_path / "libcuda_stub.so"
    src = pathlib.Path(__file__).parent / "cuda_driver_stub.c"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    monkeypatch.setenv("AUTOSCHED_LIBCUDA", str(lib))
    monkeypatch.setattr(cuda._Driver, "_instance", None)
    stub = ctypes.CDLL(str(lib))
    stub.stub_counter.restype = ctypes.c_long
    stub.stub_reset()
    A, B, C = _vadd()
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    tgt = autosched.target.Target(target="cuda", host="llvm")
    f = autosched.build(s, [A, B, C], tgt, name="myadd")
    dev = autosched.device(tgt.kind.name, 0)
    assert dev == autosched.cuda(0)
    a = autosched.nd.array(np.ones(1000, "float32"), dev)
    b = autosched.nd.array(np.ones(1000, "float32"), dev)
    c = autosched.nd.empty((1000,), "float32", dev)
    f(a, b, c)
    assert stub.stub_launch_count() == 1 and stub.stub_counter(1) == 3 and stub.stub_counter(2) == 1
    stub.stub_reset()
    res = f.time_evaluator(f.entry_name, dev, number=4, repeat=2)(a, b, c)
    assert len(res.results) == 2 and res.mean >= 0
    assert stub.stub_launch_count() == 1 + 4 * 2 and stub.stub_counter(1) == 3
    cuda._Driver._instance = None


def test_pass_context_unroll_and_the_tensor_core_checks_of_tvm_examples():
    """TVM's tensor-core example builds inside ``PassContext(config={"tir.UnrollLoop": {"auto_max_step": 16}})``
    after ``nvcc.have_tensorcore(dev.compute_version)``: the unroll option is honoured (a short serial loop is
    unrolled, a long one is not), the others are accepted; the checks answer as TVM's do."""
    tvm = autosched
    A = te.placeholder((8, 64), name="A")
    B = te.compute((8, 64), lambda i, j: A[i, j] * 2, name="B")
    s = te.create_schedule(B.op)
    kinds = lambda f: {x.var.name: x.kind for x in S.walk_stmts(f.body) if isinstance(x, S.For)}  # noqa: E731
    assert set(kinds(tvm.lower(s, [A, B])).values()) == {"serial"}
    with tvm.transform.PassContext(config={"tir.UnrollLoop": {"auto_max_step": 64}, "tir.disable_vectorize": True}):
        got = kinds(tvm.lower(s, [A, B]))
        f = tvm.build(s, [A, B])
    assert got == {"i": "serial", "j": "unrolled"}  # 64 steps fit, 8 x 64 do not
    a = np.arange(512, dtype="float32").reshape(8, 64)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    assert nvcc.have_tensorcore("7.0") and nvcc.have_tensorcore("9.0") and not nvcc.have_tensorcore("6.1")
    assert nvcc.have_tensorcore(target="cuda -arch=sm_80") and tvm.cpu(0).compute_version is None
    with pytest.raises(ValueError, match="not of the form"):
        nvcc.parse_compute_version("sm_80")
