"""Code that needs instruction-set extensions this CPU lacks is refused before it runs, with one line that
says why: an exported library built for AVX-512 loaded on an AVX2 host, a JIT module built for another CPU,
a tuning run whose target this host cannot run. The host's features are faked here to show it on any host.

And the suite itself: every test that builds or runs code for a named CPU goes through the one helper
(tests/_cpus.py), so an AVX-512 build is never called on an AVX2 machine (it killed the whole pytest run)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched
from autosched import isa, relay, te
from autosched.codegen.build import clear_cache
from autosched.errors import UnsupportedCPUError
from autosched.runtime import graph_executor, load_module
from autosched.target import llvm_cpu_names

AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"
#: an AVX2 machine (a Zen 3) as the runtime would see it
AVX2_HOST = frozenset({"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi", "bmi2",
                       "lzcnt", "movbe"})


@pytest.fixture
def avx2_host(monkeypatch):
    """This process's host reported as an AVX2-only CPU."""
    monkeypatch.setattr(isa, "host_features", lambda: AVX2_HOST)
    monkeypatch.setattr(isa, "host_cpu", lambda: "znver3")
    clear_cache()  # a module built earlier may have passed its check already
    yield
    clear_cache()


def _scale(n: int = 256):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    return s, [A, B]


@pytest.mark.parametrize("asm,features", [
    ("\tvfmadd231ps\t%zmm1, %zmm2, %zmm0", {"avx", "avx512f", "fma"}),
    ("\tvmulps\t(%rdi), %ymm0, %ymm1 {%k1}", {"avx", "avx512f", "avx512vl"}),
    ("\tvaddps\t%xmm17, %xmm1, %xmm2", {"avx", "avx512f", "avx512vl"}),
    ("\tkmovw\t%edi, %k1", {"avx512f"}),
    ("\tvpaddd\t%ymm1, %ymm2, %ymm3", {"avx", "avx2"}),
    ("\tvpsllvd\t%xmm1, %xmm2, %xmm3", {"avx", "avx2"}),
    ("\tvbroadcastss\t%xmm0, %ymm0", {"avx", "avx2"}),
    ("\tvbroadcastss\t(%rdi), %ymm0", {"avx"}),
    ("\tvmulps\t%ymm1, %ymm2, %ymm3\n\tvpermilps\t$1, %ymm1, %ymm2", {"avx"}),
    ("\tshlxq\t%rax, %rbx, %rcx\n\tlzcntl\t%eax, %eax", {"bmi2", "lzcnt"}),
    ("\troundps\t$9, %xmm0, %xmm0\n\tpshufb\t%xmm1, %xmm0", {"sse4.1", "ssse3"}),
    ("\tmulps\t%xmm1, %xmm0\n\taddss\t%xmm1, %xmm0\n\t.ascii\t\"vfmadd zmm\"\n# vfmadd231ps %zmm0\nzmm:", set()),
])
def test_the_extensions_code_uses_are_read_from_its_assembly(asm, features):
    assert isa.code_features(asm) == features


@pytest.mark.compile_only
def test_each_isa_build_uses_its_own_extensions():
    """Read from LLVM's assembly of a real kernel: the AVX2 build uses AVX2 and FMA and nothing of AVX-512;
    the AVX-512 build uses AVX-512 (whichever machine compiles them)."""
    s, args = _scale()
    avx2 = autosched.build(s, args, target=AVX2).features
    avx512 = autosched.build(s, args, target=AVX512).features
    assert "avx" in avx2 and not any(f.startswith("avx512") for f in avx2)
    assert "avx512f" in avx512
    assert isa.target_features(AVX2) >= {"avx", "avx2", "fma"} and "avx512f" not in isa.target_features(AVX2)
    assert "avx512f" in isa.target_features(AVX512)
    assert isa.target_features("llvm -mcpu=x86-64") == frozenset()


def test_an_avx512_library_on_an_avx2_host_is_refused_in_one_line(tmp_path, avx2_host):
    s, args = _scale()
    path = tmp_path / "k512.so"
    autosched.build(s, args, target=AVX512).export_library(path)
    with pytest.raises(UnsupportedCPUError) as err:
        load_module(path)
    msg = str(err.value)
    assert "\n" not in msg and isinstance(err.value, RuntimeError)
    assert "skylake-avx512" in msg and "avx512f" in msg and "znver3" in msg and str(path) in msg
    assert "'llvm'" in msg and "x86-64-v3" in msg  # what to build instead
    # the AVX2 build of the same kernel loads and runs on that host
    ok = tmp_path / "k2.so"
    autosched.build(s, args, target=AVX2).export_library(ok)
    m = load_module(ok)
    assert m.cpu == "haswell" and "avx512f" not in m.features
    a = np.arange(256, dtype="float32")
    b = np.zeros_like(a)
    if isa.host_runs(AVX2):  # the real host, not the faked one, decides whether code is called
        m(a, b)
        np.testing.assert_allclose(b, a * 2 + 1)


@pytest.mark.compile_only  # its calls are refused before any code runs
def test_a_jit_module_for_another_cpu_is_refused_at_its_first_call(avx2_host):
    """Built for AVX-512 on a host without it: compiling and reading the code work, calling it raises (before
    any of it runs), for the module, its functions and the graph executor's raw calls alike."""
    s, args = _scale()
    f = autosched.build(s, args, target=AVX512)
    assert "zmm" in f.get_source("asm")
    a, b = np.ones(256, "float32"), np.zeros(256, "float32")
    for call in (lambda: f(a, b), lambda: f.entry_func(a, b),
                 lambda: f.entry_func.raw_call([a.ctypes.data, b.ctypes.data])):
        with pytest.raises(UnsupportedCPUError, match="skylake-avx512 and uses avx512f"):
            call()
    assert not b.any()


@pytest.mark.compile_only  # refused before any kernel runs
def test_a_graph_built_for_another_cpu_is_refused_at_its_first_run(avx2_host):
    """The graph executor calls its kernels from the library's native run loop, not one by one: the check of
    the instruction set comes before that loop starts."""
    x = relay.var("x", shape=(4, 64))
    graph_json, lib, params = relay.build(relay.Function([x], relay.nn.softmax(relay.exp(x))), AVX512)
    m = graph_executor.GraphModule(graph_json, lib, params)
    m.set_input("x", np.ones((4, 64), "float32"))
    with pytest.raises(UnsupportedCPUError, match="skylake-avx512 and uses avx512f"):
        m.run()
    assert not m.get_output(0).any()


def test_a_tuning_runner_without_the_targets_extensions_says_why(avx2_host):
    """A runner (local or a cluster node) given a task for a CPU whose code it cannot run answers each
    candidate with the reason instead of dying of an illegal instruction."""
    from autosched.measure.data import prepare_task_data
    from autosched.measure.worker import RunWorker

    task = autosched.Task("matmul", dict(M=16, N=16, K=16), target=AVX512)
    data = prepare_task_data(task, check=False)
    assert data.cpu == "skylake-avx512" and "avx512f" in data.features
    worker = RunWorker()
    worker.put_data(data)
    kind, msg = worker.load(data.key, None)
    assert kind == "compile_error"
    assert "znver3" in msg and "avx512f" in msg and "skylake-avx512" in msg


def test_a_library_without_the_record_still_loads(tmp_path):
    """Libraries exported before the CPU and extensions were recorded load as before (unchecked): the kernel's
    IR linked without the record, as an older autosched wrote it."""
    import llvmlite.binding as llvm

    from autosched.codegen.build import target_machine
    from autosched.runtime.cc import link_shared

    s, args = _scale()
    f = autosched.build(s, args, target="llvm")
    obj = target_machine(f.target, for_object=True).emit_object(llvm.parse_assembly(f.opt_ir))
    (tmp_path / "old.o").write_bytes(obj)
    link_shared([str(tmp_path / "old.o")], str(tmp_path / "old.so"), ["-lm"])
    m = load_module(tmp_path / "old.so")
    assert m.cpu is None and m.features == []
    a, b = np.arange(256, dtype="float32"), np.zeros(256, "float32")
    m(a, b)
    np.testing.assert_allclose(b, a * 2 + 1)


# ---------------------------------------------------------------------------------------------------------------
# the suite: named-CPU builds go through the helper
# ---------------------------------------------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
#: baselines every x86-64 machine runs (SSE2; SSE4.2 and POPCNT since 2009)
BASELINES = {"x86-64", "x86-64-v2"}
#: calls that compile or run code for a target
RUNS = {"build", "build_many", "tune", "GraphModule", "load_module", "export_library", "autosched", "run_cli",
        "start_tune"}
HELPERS = ("host_runs(", "skip_unless_host_runs(")
KNOWN = set(llvm_cpu_names())  #: the CPU names LLVM knows here (tests of a misspelt one build nothing)
_MCPU = re.compile(r"-mcpu=(\{[^}]*\}|[\w.-]+)")


def _calls(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
    return out


def _named_cpu_tests_without_the_helper() -> list[str]:
    bad = []
    for path in sorted(TESTS.glob("test_*.py")):
        src = path.read_text()
        tree = ast.parse(src)
        consts, funcs = {}, {}
        for node in tree.body:
            if isinstance(node, ast.Assign):
                text = ast.get_source_segment(src, node) or ""
                for t in node.targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            consts[name.id] = set(_MCPU.findall(text))
            elif isinstance(node, ast.FunctionDef):
                funcs[node.name] = node
        for name, fn in funcs.items():
            if not name.startswith("test_") or any("compile_only" in ast.unparse(d) for d in fn.decorator_list):
                continue
            text = "\n".join([ast.unparse(d) for d in fn.decorator_list] + [ast.get_source_segment(src, fn) or ""])
            cpus = set(_MCPU.findall(text))
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and n.id in consts:
                    cpus |= consts[n.id]
            for d in fn.decorator_list:
                for n in ast.walk(d):
                    if isinstance(n, ast.Name) and n.id in consts:
                        cpus |= consts[n.id]
            cpus = {c for c in cpus if c.startswith("{") or not KNOWN or c in KNOWN}  # a typo builds nothing
            if not cpus - BASELINES:
                continue
            called = _calls(fn)
            helpers = [funcs[c] for c in called if c in funcs]  # module helpers it calls, one level down
            body = [text] + [ast.get_source_segment(src, h) or "" for h in helpers]
            if not (called | set().union(*(_calls(h) for h in helpers))) & RUNS:
                continue
            if not any(h in b for b in body for h in HELPERS):
                bad.append(f"{path.name}::{name} ({', '.join(sorted(cpus - BASELINES))})")
    return bad


def test_every_named_cpu_build_that_runs_goes_through_the_helper():
    """A test that names a CPU and builds or runs code for it calls ``host_runs`` / ``skip_unless_host_runs``
    (tests/_cpus.py) or is marked ``compile_only``: on an AVX2 host, an AVX-512 build called without it failed
    the suite (before the runtime check: killed it)."""
    assert _named_cpu_tests_without_the_helper() == []


def test_the_suite_check_finds_a_test_that_calls_without_the_helper(tmp_path, monkeypatch):
    (tmp_path / "test_fake.py").write_text(
        'import autosched\nT = "llvm -mcpu=skylake-avx512"\n\n'
        "def test_calls(s, args, a, b):\n    autosched.build(s, args, target=T)(a, b)\n\n"
        "def test_guarded(s, args, a, b):\n    f = autosched.build(s, args, target=T)\n"
        "    if host_runs(T):\n        f(a, b)\n\n"
        "def test_names_only():\n    assert T\n\n"
        "def test_misspelt(s, args):\n    autosched.build(s, args, target='llvm -mcpu=skylake-avx513')\n")
    monkeypatch.setattr(sys.modules[__name__], "TESTS", tmp_path)
    assert _named_cpu_tests_without_the_helper() == ["test_fake.py::test_calls (skylake-avx512)"]


def test_a_deployed_library_checks_itself_without_llvmlite(tmp_path):
    """Where llvmlite is not installed (a deployment), the host's features come from /proc/cpuinfo."""
    if not Path("/proc/cpuinfo").exists():
        pytest.skip("no /proc/cpuinfo on this OS")
    s, args = _scale()
    autosched.build(s, args, target="llvm -mcpu=x86-64").export_library(tmp_path / "k.so")
    code = ("import sys; sys.modules['llvmlite'] = None; sys.modules['llvmlite.binding'] = None\n"
            "from autosched import isa\nfrom autosched.runtime import load_module\n"
            f"m = load_module({str(tmp_path / 'k.so')!r})\n"
            "print(sorted(isa.host_features() & set(isa.CHECKED)), m.cpu)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "x86-64" in out.stdout and ("avx" in out.stdout) == ("avx" in Path("/proc/cpuinfo").read_text())
