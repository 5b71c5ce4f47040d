"""A new user's first hour with the command line (issue 40), driven as they would: the real command in a
subprocess, its exit code, its standard output and error, and the files it leaves (or does not).

Bad input is stopped before any work starts: one line that names the problem with the flag as written, exit
2, no database file, no Ray. A run whose process crashes leaves no process behind. One run's figures agree:
the progress line after the re-measure, the summary, ``db best`` and ``report`` show one best and name one
vendor library. ``db best``/``list``/``report`` find the task in the database."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from onnx import TensorProto, helper, save

from autosched.database import Database

SMALL = ["--workload", "matmul", "--param", "M=64", "--param", "N=64", "--param", "K=64"]
FAST = ["--backend", "local", "--batch-size", "4", "--seed", "1", "--workers", "1"]
GFLOPS = r"(\d+\.\d) GFLOPS"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A private cache directory holding this machine's peak (measured once here)."""
    cache = tmp_path_factory.mktemp("cache")
    e = dict(os.environ, AUTOSCHED_CACHE_DIR=str(cache), AUTOSCHED_NUM_THREADS="1")
    from autosched.measure import peak

    old = os.environ.get("AUTOSCHED_CACHE_DIR")
    os.environ["AUTOSCHED_CACHE_DIR"] = str(cache)
    try:
        peak.get_peak(None)
    finally:
        if old is None:
            os.environ.pop("AUTOSCHED_CACHE_DIR")
        else:
            os.environ["AUTOSCHED_CACHE_DIR"] = old
    return e


def autosched(env, *args, timeout=240, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autosched", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def one_line(r: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The command failed with ``code`` and said so in one line holding every needle."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "Errno" not in r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# ------------------------------------------------------------------------------- bad input, stopped first
@pytest.mark.parametrize("args, needles", [
    (["--workload", "conv2d", "--target", "llvm -mcpu=notacpu"],
     ["--target 'llvm -mcpu=notacpu'", "-mcpu=notacpu is not a CPU LLVM knows"]),
    (["--workload", "conv2d", "--target", "llvm -mcpu=haswel"], ["-mcpu=haswel", "nearest: haswell"]),
    (["--workload", "conv2d", "--param", "H=0"], ["--param H=0: must be at least 1"]),
    (["--workload", "conv2d", "--param", "KH=99"],
     ["--param KH=99: the kernel (KH=99) is larger than the padded input (H + 2*padding = 58)"]),
    (["--workload", "conv2d_nchwc", "--param", "CI=64", "--param", "groups=3"],
     ["CI=64", "not divisible by groups=3"]),
    (["--workload", "matmul", "--trials", "-3"], ["argument --trials: must be at least 1, got -3"]),
    (["--workload", "matmul", "--trials", "0"], ["argument --trials: must be at least 1, got 0"]),
    (["--workload", "matmul", "--batch-size", "0"], ["argument --batch-size: must be at least 1, got 0"]),
    (["--workload", "matmul", "--time-budget", "3q"], ["argument --time-budget: expected a duration"]),
])
def test_bad_tune_input_is_one_line_exit_2_and_leaves_nothing(env, tmp_path, args, needles):
    db = tmp_path / "never.db"
    t0 = time.time()
    r = autosched(env, "tune", *args, "--db", db, timeout=60)
    one_line(r, 2, "autosched tune: error:", *needles)
    assert not db.exists()  # no database file
    assert "Ray" not in r.stderr and time.time() - t0 < 30  # found before anything started


def test_a_garbage_database_file_is_named_with_advice(env, tmp_path):
    garbage = tmp_path / "notes.db"
    garbage.write_text("these are my notes, not a database\n")
    r = autosched(env, "tune", *SMALL, "--db", garbage, "--trials", 4, timeout=60)
    one_line(r, 2, f"{garbage} is not a tuning database", "give a new path to create one")
    assert garbage.read_text().startswith("these are my notes")
    r = autosched(env, "db", "best", "--db", garbage, timeout=60)
    one_line(r, 2, "is not a tuning database")


def test_a_model_with_nothing_to_tune_says_so_and_exits_0(env, tmp_path):
    """A model of elementwise ops and gathers only (a relu, then a bicubic Resize: constant-index gathers) has no
    tuning task: one line that says so and how to build it, exit 0, no database (it was an IndexError)."""
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 2, 16, 16])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Resize", ["r", "", "", "sizes"], ["y"],
                                                                   mode="cubic")],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[sizes])
    model = tmp_path / "resize.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), model)
    db = tmp_path / "never.db"
    r = autosched(env, "tune", "--model", model, "--trials", 4, "--backend", "local", "--db", db, timeout=120)
    assert r.returncode == 0 and "has no kernel to tune" in r.stdout and "autosched build --model" in r.stdout, r
    assert not r.stderr.strip() and not db.exists()


def test_db_import_of_a_missing_file_creates_no_database(env, tmp_path):
    db = tmp_path / "new.db"
    r = autosched(env, "db", "import", tmp_path / "nofile.jsonl", "--db", db, timeout=60)
    one_line(r, 2, "cannot read", "nofile.jsonl: No such file or directory")
    assert not db.exists()


def test_each_bad_log_line_is_reported_once(env, tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"a": 1}\nnot json\n')
    r = autosched(env, "db", "import", log, "--db", tmp_path / "n.db", timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("not valid JSON") == 1 and r.stderr.count("no record-format version") == 1, r.stderr


def test_a_crash_of_the_run_leaves_no_process_behind(env, tmp_path):
    """The tuning process dies of SIGSEGV (native code crashing, as LLVM did on an unknown CPU) after the local
    Ray started: one line says so, exit 1, and no process of the command's session outlives it, nor its
    temporary library directory (in the run's own TMPDIR here; Ray's stays where it always is)."""
    pytest.importorskip("psutil")
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys
        from autosched.cli import main
        from autosched.search import SearchPolicy, register_policy

        @register_policy("crash-test")
        class Crash(SearchPolicy):
            def propose(self, n):
                os.kill(os.getpid(), signal.SIGSEGV)  # the run's process, with Ray's processes started

            def update(self, inputs, results):
                pass

        sys.exit(main(sys.argv[1:]))
    """))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.Popen([sys.executable, str(script), "tune", *SMALL, "--trials", "4", "--policy", "crash-test",
                          "--no-compare", "--db", str(tmp_path / "c.db")], text=True,
                         env=dict(env, TMPDIR=str(tmp), RAY_TMPDIR=os.environ.get("RAY_TMPDIR", "/tmp")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    out, err = p.communicate(timeout=240)
    assert p.returncode == 1, err
    assert err.strip().splitlines()[-1].startswith("autosched tune: error: the run died of SIGSEGV"), err
    left = session_processes(p.pid)  # the command's session (start_new_session): all it started is in it
    assert left == [], left
    assert list(tmp.glob("autosched-build-*")) == []  # (the machine's lock files stay: other runs share them)


def session_processes(sid: int) -> list[tuple[int, str]]:
    """The live processes of session ``sid``: (pid, name)."""
    import psutil

    mine = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                mine.append((proc.pid, proc.info["name"]))
        except (OSError, psutil.Error):
            pass
    return mine


def test_ctrl_c_on_a_ray_run_exits_130_and_leaves_no_process(env, tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) on a run with its local Ray: the batch in flight is
    committed, exit 130, and nothing the command started outlives it."""
    pytest.importorskip("psutil")
    p = subprocess.Popen([sys.executable, "-m", "autosched", "tune", *SMALL, "--trials", "400", "--batch-size", "4",
                          "--no-compare", "--db", str(tmp_path / "i.db")], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 200
    while time.time() < deadline:
        line = p.stderr.readline()
        if line.startswith("[4/400]") or not line:
            break
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=200)
    assert p.returncode == 130, err
    assert "Run the same command again to resume" in err and re.search(r"\d+ measured: \d+ kept", out), out
    assert session_processes(p.pid) == []


def test_the_cutoff_batch_is_not_called_unmeasurable():
    from autosched.result import ErrorKind, MeasureResult, count_summary, summarize_errors

    cut = [MeasureResult(error_kind=ErrorKind.CUT_OFF) for _ in range(3)]
    assert summarize_errors(cut) == "all 3 candidates were cut off (far slower than the best)"
    kinds = {None: 3, ErrorKind.CUT_OFF: 12, ErrorKind.COMPILE_ERROR: 1}
    assert count_summary(16, kinds, 0, 10) == "16 measured: 3 kept, 12 cut off (> 10x best), 1 failed (compile_error 1)"


def test_workload_ranges_are_declared_or_read_from_defaults():
    from autosched.workloads import get_workload, register_workload

    conv = get_workload("conv2d")
    assert conv.check(conv.canonical_args({})) == []
    assert conv.check(conv.canonical_args({"H": 0}))[0][0] == "H"
    assert conv.check(conv.canonical_args({"padding": -1}))[0] == ("padding", "must be at least 0")

    @register_workload("first_hour_ranged", ranges={"n": (2, 8)}, override=True)
    def ranged(n: int = 4):
        from autosched import te

        A = te.placeholder((n,), name="A")
        return [A, te.compute((n,), lambda i: A[i] * 2, name="B")]

    wl = get_workload("first_hour_ranged")
    assert wl.check({"n": 9}) == [("n", "must be at most 8")] and wl.check({"n": 1})[0][1] == "must be at least 2"


# ------------------------------------------------------------------------------- one run, one figure
@pytest.fixture(scope="module")
def one_run(env, tmp_path_factory):
    db = tmp_path_factory.mktemp("one") / "one.db"
    r = autosched(env, "tune", *SMALL, *FAST, "--trials", 12, "--db", db)
    assert r.returncode == 0, r.stderr
    return db, r


def test_progress_summary_db_best_and_report_agree_on_the_best_and_the_vendor(env, one_run, tmp_path):
    db, r = one_run
    # the progress line after the re-measure (stderr), the summary (stdout)
    progress = [x for x in r.stderr.splitlines() if x.startswith("[12/12] re-measured: best")]
    assert len(progress) == 1, r.stderr
    shown = re.search(GFLOPS, progress[0]).group(1)
    summary = next(x for x in r.stdout.splitlines() if x.startswith("matmul(M=64, N=64, K=64): best"))
    assert re.search(GFLOPS, summary).group(1) == shown
    vendor = re.search(r"vs (\S+) \S+ \(the fastest library", r.stdout).group(1)
    # when the run's best got within 0.9x and 1.0x of the vendor, counted from the command's start
    ttq = re.search(r"time to quality, from the command's start by the run's own timings: 0\.9x its speed "
                    r"(after [\d.,]+ s \(trial \d+\)|not reached in this run), 1\.0x its speed", r.stdout)
    assert ttq, r.stdout
    if re.search(r"(\d+\.\d) GFLOPS during the run", r.stdout):  # the run's figure moved: said, with why
        assert "when re-measured: " in r.stdout
    # db best with no --workload: the database holds one task
    b = autosched(env, "db", "best", "--db", db)
    assert b.returncode == 0, b.stderr
    assert re.search(GFLOPS, b.stdout).group(1) == shown
    record = re.search(r"record #(\d+)", summary).group(1)
    assert f"#{record} " in b.stdout
    # report, with no --workload either
    rep = autosched(env, "report", "--db", db)
    assert rep.returncode == 0, rep.stderr
    best_line = next(x for x in rep.stdout.splitlines() if x.startswith("best kernel:"))
    assert re.search(GFLOPS, best_line).group(1) == shown and f"record #{record}" in best_line
    assert re.search(rf"vs {vendor} \S+ \(the fastest library", rep.stdout), rep.stdout
    # --json on all three, for scripts: the same record and figure
    j = json.loads(autosched(env, "report", "--db", db, "--json").stdout)
    assert j["best"]["record"] == int(record) and f"{j['best']['gflops']:.1f}" == shown
    assert j["vendor"]["library"].split()[0] == vendor
    jb = json.loads(autosched(env, "db", "best", "--db", db, "--json").stdout.splitlines()[0])
    assert jb["summary"]["record"] == int(record)
    if not jb["summary"]["trusted"]:  # a loaded machine disturbed every timing: the best is shown, flagged
        assert "noisy" in b.stdout and "noisy:" in r.stdout and "noisy:" in rep.stdout


def test_tune_json_results_on_stdout(env, one_run):
    db, _ = one_run
    r = autosched(env, "tune", *SMALL, *FAST, "--trials", 4, "--db", db, "--json", "-q")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["workload"] == "matmul" and got["params"]["M"] == 64 and got["records"] == 16
    assert got["best"]["gflops"] > 0 and got["counts"].startswith("16 measured: ")
    with Database(db, create=False) as d:
        assert got["best"]["record"] == d.best(d.records()[0].workload_key, target=got["target"])[0].id


def test_a_noisy_record_is_not_the_best_unless_alone(tmp_path):
    from autosched.result import MeasureResult, ResultFlag
    from autosched.task import Task
    from autosched.te.trace import Split, Trace

    task = Task("matmul", dict(M=16, N=16, K=16))
    traces = [Trace([Split(2, 0, i, None)]) for i in (2, 4, 8)]
    with Database(tmp_path / "n.db") as db:
        db.commit(task, traces[0], MeasureResult(costs=[1e-6, 1e-6, 1.3e-5]))  # repeats disagree by 12x
        assert db.best(task)[0].cost == 1e-6  # the only one: still shown
        db.commit(task, traces[1], MeasureResult(costs=[3e-6, 3e-6, 3e-6], flags=[ResultFlag.NOISY]))
        db.commit(task, traces[2], MeasureResult(costs=[5e-6, 5e-6, 5.1e-6]))
        best = db.best(task, k=3)
        assert [r.cost for r in best] == [5e-6, 1e-6, 3e-6]  # trusted first, then the others, fastest first


# ------------------------------------------------------------------------------- finding the task
def test_db_list_and_best_name_the_tasks_held(env, tmp_path, one_run):
    db, _ = one_run
    two = tmp_path / "two.db"
    with Database(db, create=False) as src, Database(two) as dst:
        dst.commit_records(src.records())
    r = autosched(env, "tune", "--workload", "matmul", "--param", "M=32", "--param", "N=32", "--param", "K=32",
                  *FAST, "--trials", 4, "--db", two, "-q", "--no-compare")
    assert r.returncode == 0, r.stderr
    ls = autosched(env, "db", "list", "--db", two)
    assert ls.returncode == 0
    rows = ls.stdout.splitlines()
    assert rows[0].split() == ["records", "ok", "best", "GFLOPS", "task", "(as", "flags)"]
    assert any(x.endswith("--workload matmul --param M=32 --param N=32 --param K=32") for x in rows), rows
    tasks = [json.loads(x) for x in autosched(env, "db", "list", "--db", two, "--json").stdout.splitlines()]
    assert sorted(t["params"]["M"] for t in tasks) == [32, 64] and all(t["records"] >= 4 for t in tasks)
    b = autosched(env, "db", "best", "--db", two)  # two tasks: which one? the miss lists them, exit 1
    assert b.returncode == 1 and "2 tasks" in b.stderr and "--param M=64" in b.stderr and "--param M=32" in b.stderr
    b = autosched(env, "db", "best", "--db", two, "--workload", "matmul", "--param", "M=32")  # enough to tell
    assert b.returncode == 0 and "matmul(M=32, N=32, K=32)" in b.stdout, b.stderr


# ------------------------------------------------------------------------------- help and the README
def test_help_is_plain_words_with_one_spelling_and_verbosity_everywhere(env):
    from autosched.cli import make_parser

    parser = make_parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subs.items():
        text = sub.format_help()
        assert "``" not in text and ":mod:" not in text and ":func:" not in text, (name, text)
        if name != "lower-example":
            assert "-v, --verbose" in text and "-q, --quiet" in text, name
        assert "--arg " not in text and "--keep" not in text and "--best K" not in text, name
    db_subs = next(a for a in subs["db"]._actions if a.dest == "db_command").choices
    for name in ("list", "export"):
        assert "default for best" not in db_subs[name].format_help()
    for name in ("best", "export", "gc"):
        assert "-k K, --top K" in db_subs[name].format_help(), name


def _readme_blocks() -> list[tuple[str, str]]:
    text = (Path(__file__).parent.parent / "README.md").read_text()
    return re.findall(r"```(python|bash)\n(.*?)```", text, re.S)


def test_readme_snippets_run_as_written(env, tmp_path):
    """Every Python block of the README runs, in order, in one fresh interpreter (each block may use what the
    ones before it defined, as a reader pasting them would); every bash command that is an autosched command
    parses (its --help), and the README's exit codes are the ones the commands document."""
    blocks = _readme_blocks()
    python = "\n".join(code for lang, code in blocks if lang == "python")
    assert python.count("import autosched") >= 1
    # the README's tuning snippet asks for 256 trials of a 512 matmul: the same code, a smaller task, so a test
    # runs it in seconds (the text is otherwise exactly the README's)
    small = python.replace("dict(M=512, N=512, K=512)", "dict(M=64, N=64, K=64)").replace(
        "best = autosched.tune(task, 256,", "best = autosched.tune(task, 4, backend='local', batch_size=4,")
    assert small.count("backend='local'") == 1
    (tmp_path / "snippets.py").write_text(small)
    r = subprocess.run([sys.executable, "snippets.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "primfn matmul" in r.stdout and "primfn myadd" in r.stdout
    commands = [line.strip() for lang, code in blocks if lang == "bash"
                for line in code.replace("\\\n", " ").splitlines() if line.strip().startswith("autosched ")]
    assert len(commands) >= 2
    from autosched.cli import make_parser

    for cmd in commands:
        argv = cmd.split("#")[0].split()[1:]
        try:
            make_parser().parse_args(argv)
        except SystemExit as e:
            pytest.fail(f"README command does not parse: {cmd} (exit {e.code})")
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for code in ("0 done", "1 ", "2 bad usage", "3 ", "130 interrupted"):
        assert code in readme.split("Exit codes", 1)[1][:800], code


def test_the_api_refuses_an_unknown_cpu_before_it_builds_anything(tmp_path):
    import autosched

    task = autosched.Task("matmul", dict(M=16, N=16, K=16), target="llvm -mcpu=notacpu")
    with pytest.raises(ValueError, match="-mcpu=notacpu is not a CPU LLVM knows"):
        autosched.tune(task, 4, database=str(tmp_path / "api.db"), backend="local")
    assert not (tmp_path / "api.db").exists()


def test_a_misspelt_flag_is_named_as_written_not_read_as_another(env, tmp_path):
    r = autosched(env, "tune", "--workload", "matmul", "--trial", "-3", "--db", tmp_path / "x.db", timeout=60)
    one_line(r, 2, "unrecognized arguments: --trial -3")
    assert not (tmp_path / "x.db").exists()


def test_build_refuses_an_unknown_cpu_in_one_line(env, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    r = autosched(env, "build", "--model", model, "--target", "llvm -mcpu=znver99", "-o", tmp_path / "out",
                  timeout=60)
    one_line(r, 2, "autosched build: error: --target 'llvm -mcpu=znver99'", "nearest: znver")
    assert not (tmp_path / "out").exists()


def test_a_winograd_kernel_reports_effective_gflops_and_leaves_the_peak_alone(env, monkeypatch, caplog):
    """A kernel that does fewer multiplications than the direct convolution may pass the peak in effective
    GFLOPS: that says nothing about the peak, which is not measured again, and no share of it is printed."""
    import io
    from types import SimpleNamespace

    import autosched
    from autosched.measure.peak import PeakWatch
    from autosched.search.progress import TuneProgress, fewer_flops

    monkeypatch.setenv("AUTOSCHED_CACHE_DIR", env["AUTOSCHED_CACHE_DIR"])
    task = autosched.Task("conv2d_winograd_nchwc", dict(CI=8, CO=8, H=8, W=8))
    assert fewer_flops(task) and not fewer_flops(autosched.Task("conv2d"))
    watch = PeakWatch(None)
    above = task.flop / (2 * watch.gflops * 1e9)  # twice the peak, in effective GFLOPS
    state = SimpleNamespace(task=task, best_cost=above, trials_done=4, trials=8, best_gflops=2 * watch.gflops,
                            shared=0, raced=0, best_in_run=above, remeasure_note="")
    out = io.StringIO()
    progress = TuneProgress(watch, stream=out, live=False)
    progress(state, [], [])
    assert watch.refreshes == 0 and not watch._warned and "peak is stale" not in caplog.text
    assert "effective GFLOPS" in out.getvalue() and "of peak" not in out.getvalue()
