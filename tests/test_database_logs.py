"""JSON-lines tuning logs: exact round trips, bad lines reported by number, log-backed databases."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest

import autosched
from _database_helpers import CPU, OTHER_CPU, failed, ok, task, trace
from autosched.database import LOG_VERSION, Database, LogFormatError, TuningRecord
from autosched.measure import ErrorKind, MeasureResult


def filled(path=":memory:") -> Database:
    db = Database(path)
    t, u = task(16), task(32)
    db.commit_many([(t, trace(i), ok(i * 1.0e-4 / 3, ts=1_790_000_000.0 + i / 7)) for i in range(1, 11)])
    db.commit(u, trace(3), MeasureResult(costs=[0.1 + 0.2], build_seconds=1 / 3, run_seconds=2 / 3,
                                         timestamp=1_790_000_001.123456789))
    db.commit(u, trace(4), failed(ErrorKind.WRONG_RESULT, 'max abs error 0.5 at [3, "x"]\nsecond line'))
    db.commit(task(16, OTHER_CPU), trace(1), ok(2e-3))
    return db


def record_fields(r: TuningRecord) -> tuple:
    return (r.workload_key, r.workload_name, r.workload_args, r.target, r.trace_json, r.costs, r.error_kind,
            r.error_msg, r.build_seconds, r.run_seconds, r.timestamp, r.autosched_version, r.llvm_version,
            r.host_cpu, r.version)


def test_export_import_round_trip_is_exact(tmp_path):
    src = filled()
    log = tmp_path / "out.jsonl"
    assert src.export(log) == 13
    lines = log.read_text().splitlines()
    assert len(lines) == 13 and all(json.loads(x)["v"] == LOG_VERSION for x in lines)
    dst = Database(tmp_path / "copy.db")
    report = dst.import_(log)
    assert report.ok and (report.lines, report.imported, report.duplicates) == (13, 13, 0)
    assert [record_fields(r) for r in dst.records()] == [record_fields(r) for r in src.records()]
    log2 = tmp_path / "again.jsonl"
    dst.export(log2)
    assert log2.read_bytes() == log.read_bytes()
    # importing again adds nothing
    again = dst.import_(log)
    assert (again.imported, again.duplicates) == (0, 13) and dst.count() == 13


def test_export_filters_and_streams(tmp_path):
    src = filled()
    t = task(16)
    buf = io.StringIO()
    assert src.export(buf, t, ok=True) == 10
    assert all(TuningRecord.loads(x).target == CPU for x in buf.getvalue().splitlines())
    assert src.export(tmp_path / "other.jsonl", target=OTHER_CPU) == 1
    assert src.export(tmp_path / "other.jsonl", target=OTHER_CPU, append=True) == 1
    assert len((tmp_path / "other.jsonl").read_text().splitlines()) == 2
    assert src.export(tmp_path / "none.jsonl", task(64)) == 0 and (tmp_path / "none.jsonl").read_text() == ""
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file of the atomic write is gone


def bad_log(tmp_path):
    """A log with good lines and, at lines 2, 4 and 6: a newer version, an unknown workload, a truncation."""
    src = filled()
    good = [r.dumps() for r in src.records()[:4]]
    newer = json.loads(good[1])
    newer["v"] = LOG_VERSION + 1
    unknown = json.loads(good[2])
    unknown["workload"]["name"] = "no_such_workload"
    lines = [good[0], json.dumps(newer), good[1], json.dumps(unknown), good[2], good[3][: len(good[3]) // 2]]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))  # the truncated last line has no newline, as after a crash
    return path


def test_bad_lines_are_reported_by_number_and_the_rest_imported(tmp_path, caplog):
    path = bad_log(tmp_path)
    db = Database(":memory:")
    with caplog.at_level(logging.WARNING, logger="autosched.database"):
        report = db.import_(path)
    assert (report.lines, report.imported) == (6, 3) and not report.ok
    by_line = {e.line: e.reason for e in report.errors}
    assert sorted(by_line) == [2, 4, 6]
    assert f"version {LOG_VERSION + 1} is newer" in by_line[2] and "upgrade autosched" in by_line[2]
    assert "unknown workload 'no_such_workload'" in by_line[4]
    assert "not valid JSON (truncated line?)" in by_line[6]
    assert db.count() == 3
    logged = caplog.text
    assert f"{path}:2:" in logged and f"{path}:4:" in logged and f"{path}:6:" in logged
    assert "line 4: unknown workload" in str(report)


def test_strict_import_raises_and_imports_nothing(tmp_path):
    path = bad_log(tmp_path)
    db = Database(":memory:")
    with pytest.raises(LogFormatError, match="newer") as info:
        db.import_(path, strict=True)
    assert info.value.line == 2 and str(info.value).startswith(f"{path}:2: ")
    assert db.count() == 0


@pytest.mark.parametrize("mutate, reason", [
    (lambda o: o.pop("v"), "no record-format version"),
    (lambda o: o.update(v="1"), "positive integer"),
    (lambda o: o.pop("trace"), "missing field(s) trace"),
    (lambda o: o.update(trace=[["spin", 0]]), "bad trace"),
    (lambda o: o.update(trace={"split": 1}), "bad trace"),
    (lambda o: o["result"].update(costs=[-1.0]), "non-negative"),
    (lambda o: o["result"].update(costs=[], error_kind=None), "neither costs nor an error_kind"),
    (lambda o: o["workload"].update(key="abc"), "64 lowercase hex"),
    (lambda o: o.update(target=""), "'target'"),
    (lambda o: o["workload"]["args"].update(M=17), "computation changed"),
    (lambda o: o["workload"]["args"].update(Q=1), "cannot be built here"),
])
def test_each_kind_of_bad_line_is_named(mutate, reason):
    line = json.loads(filled().records()[0].dumps())
    mutate(line)
    report = Database(":memory:").import_(io.StringIO("\n" + json.dumps(line) + "\n"))
    assert report.imported == 0 and [e.line for e in report.errors] == [2]
    assert reason in report.errors[0].reason


def test_not_json_and_not_an_object():
    text = "[1, 2]\n{\"v\": 1,\n\n   \nnull\n"
    report = Database(":memory:").import_(io.StringIO(text))
    assert [e.line for e in report.errors] == [1, 2, 5]
    assert "JSON object" in report.errors[0].reason and "not valid JSON" in report.errors[1].reason


def test_unknown_error_kind_is_kept_as_an_error():
    line = json.loads(filled().records()[0].dumps())
    line["result"] = {"costs": [], "error_kind": "gpu_on_fire", "error_msg": "newer autosched"}
    db = Database(":memory:")
    assert db.import_(io.StringIO(json.dumps(line))).imported == 1
    (rec,) = db.records()
    assert rec.error_kind == "gpu_on_fire" and not rec.ok and db.best(rec.workload_key, rec.target) == []


def test_import_keeps_stored_records_unless_told(tmp_path):
    t = task()
    db = Database(":memory:")
    db.commit(t, trace(1), ok(5e-3))
    other = Database(":memory:")
    other.commit(t, trace(1), ok(1e-3))
    other.commit(t, trace(2), ok(2e-3))
    other.export(tmp_path / "o.jsonl")
    report = db.import_(tmp_path / "o.jsonl")
    assert (report.imported, report.duplicates) == (1, 1)
    assert db.best(t)[0].trace == trace(2)
    db.import_(tmp_path / "o.jsonl", on_conflict="replace")
    assert db.best(t)[0].trace == trace(1)


def test_a_log_file_is_a_database(tmp_path):
    path = tmp_path / "logs" / "tuning.jsonl"
    t = task()
    with Database(path) as db:  # created on first commit
        db.commit(t, trace(1), ok(3e-3))
        db.commit_many([(t, trace(2), ok(2e-3)), (t, trace(3), failed())])
        db.commit(t, trace(1), ok(1e-3))  # re-measured: appended; the last line wins on reading
    lines = path.read_text().splitlines()
    assert len(lines) == 4
    with Database(path) as db:
        assert db.count() == 3 and db.best(t)[0].trace == trace(1) and db.best(t)[0].costs[0] == 1e-3
    with pytest.raises(FileNotFoundError):
        Database(tmp_path / "missing.jsonl", create=False)


def test_record_format_needs_no_sqlalchemy():
    code = ("import sys, autosched, autosched.database as d; "
            "r = d.TuningRecord.loads(sys.argv[1]); assert r.ok and r.trace; "
            "assert 'sqlalchemy' not in sys.modules, 'sqlalchemy imported'; print(r.dumps() == sys.argv[1])")
    line = filled().records()[0].dumps()
    out = subprocess.run([sys.executable, "-c", code, line], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_producer_versions():
    from autosched.database import producer_info

    info = producer_info()
    assert info["autosched"] == autosched.__version__
    import llvmlite.binding as llvm

    assert info["llvm"] == ".".join(map(str, llvm.llvm_version_info))
    assert info["host_cpu"] == llvm.get_host_cpu_name()
