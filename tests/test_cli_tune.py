"""``autosched tune`` / ``report`` / ``peak`` and the new ``db`` actions, driven as a user would: the real
command in a subprocess (its exit code, its output, the database it leaves), small tasks, few trials."""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autosched.database import Database
from autosched.search import SearchPolicy, register_policy, unregister_policy

SMALL = ["--workload", "matmul", "--param", "M=64", "--param", "N=64", "--param", "K=64"]
FAST = ["--backend", "local", "--batch-size", "4", "--seed", "1", "--workers", "1"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The environment of every command: a private cache directory holding this machine's peak, measured
    once here, so each command reads it instead of measuring it again."""
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


def autosched(env, *args, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autosched", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=timeout)


def records(db: Path) -> list:
    with Database(db, create=False) as d:
        return d.records()


def test_tune_then_resume_measures_nothing_twice(env, tmp_path):
    db, log = tmp_path / "t.db", tmp_path / "t.jsonl"
    r = autosched(env, "tune", *SMALL, *FAST, "--trials", 8, "--db", db, "--log", log)
    assert r.returncode == 0, r.stderr
    assert "no earlier records" in r.stderr
    assert "[8/8]" in r.stderr and "trials/s" in r.stderr  # a plain line per batch when not a terminal
    # results on standard output, progress on standard error
    assert "matmul(M=64, N=64, K=64): best" in r.stdout and "GFLOPS = " in r.stdout and "peak" in r.stdout
    assert "matmul(M=64, N=64, K=64): best" not in r.stderr
    # the vendor library on the same shape, timed at the end on the kernels' thread count
    assert re.search(r"vs (onnxruntime|numpy) \S+ \(the fastest library installed here on this computation, "
                     r"kept for it\), timed now on 1 thread\(s\): .* GFLOPS; the tuned kernel is \d+\.\d\dx its "
                     r"speed", r.stdout), r.stdout
    assert re.search(r"8 measured: \d+ kept", r.stdout), r.stdout
    recs = records(db)
    assert len(recs) == 8 and any(x.ok for x in recs)
    assert len(log.read_text().splitlines()) == 8  # --log appends every record
    r = autosched(env, "tune", *SMALL, *FAST, "--trials", 8, "--db", db, "--log", log)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr and "8 records" in r.stderr
    recs = records(db)
    assert len(recs) == 16 and len({x.trace_json for x in recs}) == 16  # 8 new ones, none measured again
    assert len(log.read_text().splitlines()) == 16


def test_sigint_stops_after_the_batch_commits_it_and_exits_130(env, tmp_path):
    db = tmp_path / "i.db"
    # a whole process group gets the signal, as Ctrl-C on a terminal does: workers must not die of it
    p = subprocess.Popen([sys.executable, "-m", "autosched", "tune", *SMALL, *FAST, "--trials", "400", "--db",
                          str(db)], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    lines = []
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stderr.readline()
        lines.append(line)
        if line.startswith("[4/400]"):
            break
    os.killpg(p.pid, signal.SIGINT)
    err = "".join(lines) + p.stderr.read()
    assert p.wait(timeout=120) == 130, err
    assert "stopping after the batch in flight" in err and "Run the same command again to resume" in err
    assert "Traceback" not in err
    recs = records(db)
    assert 4 <= len(recs) < 400 and len(recs) % 4 == 0  # whole batches only
    assert all(r.error_kind != "runtime_crash" for r in recs), [r.error_msg for r in recs]
    with Database(db, create=False) as d:
        assert d.runs()[0].status == "interrupted"
    # resuming measures none of them again
    r = autosched(env, "tune", *SMALL, *FAST, "--trials", 4, "--db", db)
    assert r.returncode == 0, r.stderr
    after = records(db)
    assert len(after) == len(recs) + 4 and len({x.trace_json for x in after}) == len(after)


def test_the_default_backend_is_a_local_ray(env, tmp_path):
    db = tmp_path / "r.db"
    r = autosched(env, "tune", *SMALL, "--trials", 4, "--batch-size", 4, "--db", db, "--policy", "random")
    assert r.returncode == 0, r.stderr
    assert "workers: ray (this machine)" in r.stderr and "policy: random" in r.stderr
    assert len(records(db)) == 4


@pytest.mark.parametrize("args, code, message", [
    (["--workload", "matmulx"], 2, "unknown workload 'matmulx'; registered workloads: batch_matmul, conv2d"),
    (["--workload", "matmul", "--param", "Q=3"], 2, "has no parameter 'Q'; its parameters: M=1024"),
    (["--workload", "matmul", "--param", "M"], 2, "--param takes NAME=VALUE, got 'M'"),
    (["--workload", "matmul", "--policy", "nope"], 2, "unknown search policy 'nope'; available: annealing"),
    (["--workload", "matmul", "--policy", "annealing", "--policy-option", "walkers=64"], 2,
     "search policy 'annealing' has no option 'walkers'; its options: parallel_size=16, n_iter=6"),
    (["--workload", "matmul", "--policy-option", "population"], 2, "--policy-option takes NAME=VALUE"),
    (["--workload", "matmul", "--policy-option", "population=x1"], 2,
     "search policy 'evolutionary', option population: expected an integer (default 32), got 'x1'"),
    (["--workload", "matmul", "--db", "postgresql://autosched@127.0.0.1:1/none"], 2,
     "cannot open the tuning database"),
    (["--workload", "matmul", "--ray-address", "127.0.0.1:1"], 2, "cannot reach the Ray cluster at 127.0.0.1:1"),
    (["--workload", "matmul", "--log", "/proc/no/such/dir/x.jsonl"], 2, "cannot write the log /proc/no/such/dir"),
    (["--workload", "matmul", "--trials", "-1"], 2, "argument --trials: must be at least 1, got -1"),
    (["--trials", "3"], 2, "one of the arguments --workload --model is required"),
])
def test_bad_usage_gets_one_clear_line(env, tmp_path, args, code, message):
    if "--db" not in args:
        args = [*args, "--db", str(tmp_path / "e.db")]
    r = autosched(env, "tune", *args, "--backend", "local", timeout=60)
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("autosched tune: error: ") and message in lines[-1]  # one line says it all
    assert len(lines) == 1  # one line says it all


@pytest.fixture(scope="module")
def tuned_db(env, tmp_path_factory):
    db = tmp_path_factory.mktemp("tuned") / "tuned.db"
    r = autosched(env, "tune", *SMALL, *FAST, "--trials", 12, "--db", db, "--policy", "random")
    assert r.returncode == 0, r.stderr
    return db


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_report_prints_runs_and_draws_a_png(env, tuned_db, tmp_path):
    png = tmp_path / "curve.png"
    r = autosched(env, "report", *SMALL, "--db", tuned_db, "--plot", png)
    assert r.returncode == 0, r.stderr
    assert "random seed 1" in r.stdout and "of this machine's fp32 peak" in r.stdout
    assert re.search(r"vs (onnxruntime|numpy) \S+ \(the fastest library", r.stdout), r.stdout
    assert png_size(png) == (1200, 450)
    r = autosched(env, "report", "--workload", "matmul", "--param", "M=7", "--db", tuned_db)
    # a miss lists the tasks held, as flags to copy
    assert r.returncode == 1 and "no task in" in r.stderr, r.stderr
    assert "--workload matmul --param M=64 --param N=64 --param K=64" in r.stderr


def test_db_stats_export_import_gc(env, tuned_db, tmp_path):
    r = autosched(env, "db", "stats", "--db", tuned_db)  # --db after the action works too
    assert r.returncode == 0 and "matmul(M=64,N=64,K=64)" in r.stdout and "12 records" in r.stdout
    log = tmp_path / "out.jsonl"
    r = autosched(env, "db", "--db", tuned_db, "export", log, "--workload", "matmul", "--param", "M=64",
                  "--param", "N=64", "--param", "K=64")
    assert r.returncode == 0 and len(log.read_text().splitlines()) == 12
    fresh = tmp_path / "fresh.db"
    r = autosched(env, "db", "--db", fresh, "import", log, "--strict")
    assert r.returncode == 0, r.stderr
    assert len(records(fresh)) == 12
    r = autosched(env, "db", "--db", fresh, "gc", "--top", "3", "--failed")
    assert r.returncode == 0 and "3 records remain" in r.stdout
    kept = records(fresh)
    best3 = sorted(x.cost for x in records(tuned_db) if x.ok)[:3]
    assert sorted(x.cost for x in kept) == best3
    r = autosched(env, "db", "--db", fresh, "best", "--workload", "matmul", "--param", "M=64", "--param", "N=64",
                  "--param", "K=64", "--json")
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["result"]["costs"]


def test_peak_is_measured_once_and_cached(env):
    r = autosched(env, "peak", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["gflops"] > 1.0 and got["lanes"] in (4, 8, 16)
    r = autosched(env, "peak")
    if got["trusted"]:  # measured on a quiet machine: cached, and said so with when and how
        assert "; cached, measured " in r.stdout and f"{got['gflops']:.1f} GFLOPS" in r.stdout
    else:  # something else ran meanwhile: not cached, so measured again, and said why
        assert "cached," not in r.stdout  # measured again, not read from the cache


class FirstOnly(SearchPolicy):
    """A researcher's policy defined here: new random samples of the space."""

    name = "test-cli-first"
    widths: list[int] = []  # the width of each instance, as --policy-option gave it

    def __init__(self, context, width: int = 16):
        super().__init__(context)
        self.width = width
        FirstOnly.widths.append(width)

    def propose(self, n):
        return self.context.sample_new(min(n, self.width))

    def update(self, inputs, results):
        pass


def test_a_policy_registered_in_this_file_runs_from_the_cli(env, tmp_path, capsys, monkeypatch):
    from autosched.cli import main

    register_policy("test-cli-first")(FirstOnly)
    monkeypatch.setenv("AUTOSCHED_CACHE_DIR", env["AUTOSCHED_CACHE_DIR"])
    try:
        db = tmp_path / "p.db"
        code = main(["tune", *SMALL, *FAST, "--trials", "4", "--db", str(db), "--policy", "test-cli-first", "-q",
                     "--policy-option", "width=3"])
        assert code == 0 and FirstOnly.widths[-1] == 3
        with Database(db, create=False) as d:
            assert [r.policy for r in d.runs()] == ["test-cli-first"]
            assert d.count() == 4
    finally:
        unregister_policy("test-cli-first")


def test_tune_a_model_then_build_it_with_the_records(env, tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    import onnx

    from _onnx_models import make_resnet18

    model = tmp_path / "tiny.onnx"
    onnx.save(make_resnet18(image=16, width=4, num_classes=10), model)
    db = tmp_path / "m.db"
    r = autosched(env, "tune", "--model", model, *FAST, "--trials", 8, "--db", db, "--policy", "random")
    assert r.returncode == 0, r.stderr
    assert "conv2d+add+relu 1x3x16x16 * 4x3x7x7 s2" in r.stdout and "weight" in r.stdout
    assert "timing: cold caches (as inside a model" in r.stderr
    with Database(db, create=False) as d:
        assert d.count() == 8 and len(d.workloads()) == 2  # two rounds of 4: the first two kernels
        assert all("cold_cache" in rec.flags for rec in d.records() if rec.ok)  # timed as inside the model
    out = tmp_path / "deploy"
    r = autosched(env, "build", "--model", model, "--db", db, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "2 tuned" in r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["deploy_graph.json", "deploy_lib.so", "deploy_params.npz"]


def test_a_stale_cached_peak_is_measured_again_and_no_share_exceeds_100(env, tmp_path):
    """A peak cached far below the machine's (measured under load, say): the first kernel beats it, the
    run measures the peak again between batches with one WARNING, and no share printed is above 100%."""
    from autosched.target import Target

    cache = tmp_path / "cache"
    cache.mkdir()
    key = f"{Target('llvm').mcpu}/1"
    (cache / "peak.json").write_text(json.dumps({key: {"cpu": Target("llvm").mcpu, "threads": 1, "lanes": 16,
                                                       "gflops": 0.5, "measured_at": 0.0}}))
    r = autosched(dict(env, AUTOSCHED_CACHE_DIR=str(cache)), "tune", *SMALL, *FAST, "--threads", 1,
                  "--trials", 8, "--db", tmp_path / "t.db")
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert out.count("that peak is stale; measuring it again") == 1, out
    shares = [int(s) for s in re.findall(r"(\d+)% of (?:peak|the)", out)]
    assert shares and max(shares) <= 100, out
    assert json.loads((cache / "peak.json").read_text())[key]["gflops"] > 5.0  # the new figure is cached


@pytest.mark.parametrize("flag, cold", [(None, True), ("--warm-cache", False), ("--cold-cache", True)])
def test_tune_model_times_cold_on_a_cpu_unless_asked_warm(flag, cold, tmp_path, monkeypatch):
    """`autosched tune --model` on a CPU times with cold caches by default (the ranking that holds inside a
    model); --warm-cache opts out; a single workload stays warm unless asked."""
    import onnx

    import autosched.cli.tune as tune_cli
    from _onnx_models import make_resnet18
    from autosched.cli import main

    path = tmp_path / "m.onnx"
    onnx.save(make_resnet18(image=16, width=4, num_classes=10), str(path))
    seen = {}

    def measurer(*args, config=None, **kwargs):
        seen["config"] = config
        raise ImportError("stopped by the test before anything is measured")

    monkeypatch.setattr(tune_cli, "Measurer", measurer)
    main(["tune", "--model", str(path), "--trials", "1", "--backend", "local", "--db", str(tmp_path / "t.db"), "-q",
          *([flag] if flag else [])])
    assert seen["config"].flush_cache == cold
    main(["tune", "--workload", "matmul", "--param", "M=16", "--param", "N=16", "--param", "K=16", "--trials", "1",
          "--backend", "local", "--db", str(tmp_path / "t.db"), "-q"])
    assert not seen["config"].flush_cache
