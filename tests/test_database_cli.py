"""``autosched db``: info, best, list, export, import, with exit codes scripts can use."""

from __future__ import annotations

import json

import pytest

from _database_helpers import CPU, OTHER_CPU, failed, ok, task, trace
from autosched.cli import main
from autosched.database import Database
from autosched.database.schema import SCHEMA_VERSION


@pytest.fixture
def dbpath(tmp_path):
    path = tmp_path / "t.db"
    with Database(path) as db:
        db.commit_many([(task(), trace(i), ok(i * 1e-4)) for i in range(1, 6)])
        db.commit(task(), trace(9), failed())
        db.commit(task(32, OTHER_CPU), trace(2), ok(1e-3))
    return str(path)


def test_info(dbpath, capsys):
    assert main(["db", "--db", dbpath, "info"]) == 0
    out = capsys.readouterr().out
    assert f"schema version: {SCHEMA_VERSION}" in out and "records: 7 (6 successful)" in out
    assert "matmul(M=16, N=16, K=16, dtype=float32)" in out and "6 records" in out
    assert CPU in out and OTHER_CPU in out


def test_best(dbpath, capsys):
    args = ["db", "--db", dbpath, "best", "--workload", "matmul", "--param", "M=16", "--param", "N=16", "--param",
            "K=16", "--target", CPU]
    assert main(args + ["-k", "2", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["trace"] for x in lines] == [trace(1).to_json(), trace(2).to_json()]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "GFLOPS" in out and "us" in out
    # none for this CPU: exit 1 and a hint; --allow-other-cpus finds the other CPU's record
    other = ["db", "--db", dbpath, "best", "--workload", "matmul", "--param", "M=32", "--param", "N=16", "--param",
             "K=16", "--target", CPU]
    assert main(other) == 1
    assert "--allow-other-cpus" in capsys.readouterr().err
    assert main(other + ["--allow-other-cpus"]) == 0
    assert OTHER_CPU in capsys.readouterr().out


def test_list_export_import(dbpath, tmp_path, capsys):
    assert main(["db", "--db", dbpath, "list", "--records", "--failed"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "compile_error" in out[0]
    assert main(["db", "--db", dbpath, "list", "--records", "--workload", "matmul", "--limit", "3", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    log = tmp_path / "out.jsonl"
    assert main(["db", "--db", dbpath, "export", str(log), "--ok"]) == 0
    assert len(log.read_text().splitlines()) == 6
    assert main(["db", "--db", dbpath, "export", "-", "--target", OTHER_CPU]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    new = tmp_path / "new.db"
    assert main(["db", "--db", str(new), "import", str(log)]) == 0
    assert "6 new records" in capsys.readouterr().err
    with log.open("a") as f:
        f.write('{"v": 1, "workload": \n')
    assert main(["db", "--db", str(new), "import", str(log)]) == 3  # imported, with a bad line
    assert "line 7" in capsys.readouterr().err
    assert main(["db", "--db", str(new), "import", "--strict", str(log)]) == 2
    assert ":7: not valid JSON" in capsys.readouterr().err


def test_export_best_keeps_exactly_the_best_k_of_each_task(tmp_path, capsys):
    """Three tasks (two workloads, one of them on two CPUs), records committed in shuffled speed order, a
    failure among them: --best 3 keeps the three fastest of each task, in the order they were stored."""
    path = str(tmp_path / "b.db")
    costs = [7, 3, 9, 1, 8, 2, 6]  # x 1e-4 s
    tasks = [task(16, CPU), task(32, CPU), task(16, OTHER_CPU)]
    with Database(path) as db:
        for j, t in enumerate(tasks):
            db.commit_many([(t, trace(i + 1), ok((c + j) * 1e-4)) for i, c in enumerate(costs)])
            db.commit(t, trace(99), failed())
        want = {(r.workload_key, r.target): [x.trace_json for x in sorted(
            db.records(r.workload_key, r.target, ok=True), key=lambda x: x.cost)[:3]]
            for r in db.records(ok=True)}
    log = tmp_path / "best.jsonl"
    assert main(["db", "--db", path, "export", str(log), "--top", "3"]) == 0
    assert "exported 9 records" in capsys.readouterr().err
    with Database(tmp_path / "back.db") as back:
        back.import_(log)
        got = back.records()
    assert len(got) == 9 and all(r.ok for r in got)
    for (key, target), traces in want.items():
        mine = [r for r in got if r.workload_key == key and r.target == target]
        assert sorted(r.trace_json for r in mine) == sorted(traces)
        # stored order kept: the fastest three of [7, 3, 9, 1, 8, 2, 6] were committed as 3, 1, 2
        assert [round(r.cost * 1e4) for r in mine] in ([3 + j, 1 + j, 2 + j] for j in range(len(tasks)))
    assert main(["db", "--db", path, "export", "-", "--top", "0"]) == 2
    assert "argument -k/--top: must be at least 1, got 0" in capsys.readouterr().err


def test_errors(tmp_path, capsys):
    assert main(["db", "--db", str(tmp_path / "none.db"), "info"]) == 2
    assert "no tuning database" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
    assert main(["db"]) == 2
    path = str(tmp_path / "t.db")
    Database(path).close()
    assert main(["db", "--db", path, "best", "--workload", "nosuch"]) == 2
    assert "unknown workload 'nosuch'" in capsys.readouterr().err
    assert main(["db", "--db", path, "best", "--workload", "matmul", "--param", "M"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
