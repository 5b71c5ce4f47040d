"""TVM's test-suite helpers, so that TVM users' test files run under autosched: the pytest plugin
(``target`` / ``dev`` fixtures over the enabled targets, ``tvm.testing.parameter`` / ``parameters``),
``tvm.contrib.pickle_memoize`` and ``tvm.contrib.nvcc``'s capability checks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autosched.contrib import nvcc
from autosched.contrib.pickle_memoize import memoize

ROOT = Path(__file__).resolve().parent.parent

SUITE = '''
import numpy as np
import autosched as tvm
from autosched import te, topi
import autosched.testing

m, n = tvm.testing.parameters((4, 8), (16, 2))
dtype = tvm.testing.parameter("float32", "float64")


def test_relu(target, dev, m, n, dtype):
    A = te.placeholder((m, n), name="A", dtype=dtype)
    B = topi.nn.relu(A)
    with tvm.target.Target(target):
        s = topi.testing.get_elemwise_schedule(target)(B)
    a = np.random.default_rng(0).uniform(-1, 1, (m, n)).astype(dtype)
    b = tvm.nd.array(np.zeros((m, n), dtype), dev)
    tvm.build(s, [A, B], target)(tvm.nd.array(a, dev), b)
    tvm.testing.assert_allclose(b.numpy(), np.maximum(a, 0))


@tvm.testing.parametrize_targets("llvm")
def test_only_llvm(target, dev):
    assert target == "llvm" and dev == tvm.cpu(0)


@tvm.testing.known_failing_targets("llvm")
def test_known_to_fail_on_llvm(target, dev):
    assert target != "llvm"


class TestInAClass:
    # fixtures as class attributes, as TVM's TOPI tests group their cases
    size, scale = tvm.testing.parameters((3, 2.0), (5, 0.5))
    mode = tvm.testing.parameter("a", "b")

    @tvm.testing.fixture
    def ref(self, size, scale):
        return np.arange(size) * scale

    @tvm.testing.parametrize_targets("llvm")
    def test_scaled(self, target, ref, size, scale, mode):
        assert ref.shape == (size,) and ref[-1] == (size - 1) * scale and mode in "ab"
'''


def test_tvm_style_parametrized_tests_run_on_the_enabled_targets(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["autosched.testing.plugin"]\n')
    (tmp_path / "test_suite.py").write_text(textwrap.dedent(SUITE))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # relu: 2 (m, n) pairs x 2 dtypes x 2 targets, cuda skipped where there is no GPU; the llvm-only test; the
    # class's 2 (size, scale) pairs x 2 modes; the known failure: xfail on llvm, run (or skipped) on cuda
    assert "1 xfailed" in out and ("14 passed" in out or "9 passed" in out and "5 skipped" in out and
                                   "cuda is not enabled" in out), out


def test_memoize_caches_per_decorated_function_and_arguments():
    calls = []
    for dtype in ("float32", "int8"):
        @memoize("topi.tests.example")
        def reference(n, dtype=dtype):
            calls.append((n, dtype))
            return n, dtype

        assert reference(3) == (3, dtype) and reference(3) == (3, dtype)
    assert calls == [(3, "float32"), (3, "int8")]


@pytest.mark.parametrize("version,fp16,int8,tensorcore", [("5.2", False, False, False), ("6.1", False, True, False),
                                                          ("7.0", True, True, True), ("9.0", True, True, True)])
def test_gpu_capability_checks(version, fp16, int8, tensorcore):
    assert (nvcc.have_fp16(version), nvcc.have_int8(version), nvcc.have_tensorcore(version)) == (fp16, int8,
                                                                                                   tensorcore)
