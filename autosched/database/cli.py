"""``autosched db``: look into a tuning database and move records in and out of it.

    autosched db info                                   # where it is, schema version, records per workload
    autosched db best --workload matmul --arg M=512 -k 5
    autosched db list --workload conv2d --failed --limit 20
    autosched db export out.jsonl --workload matmul --ok
    autosched db import tuning_logs/matmul.jsonl [--strict]

``--db`` takes a URL, an SQLite path or a ``.jsonl`` log (default: ``$AUTOSCHED_DB``, else the user
data directory). Exit codes: 0 done, 1 nothing found (``best``), 2 error, 3 imported with bad lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

EXIT_OK, EXIT_NOT_FOUND, EXIT_ERROR, EXIT_PARTIAL = 0, 1, 2, 3


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``db`` command to an ``add_subparsers()`` object; returns its parser."""
    p = sub.add_parser("db", help="inspect a tuning database; import and export JSON-lines tuning logs",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=None, metavar="URL_OR_PATH",
                   help="database URL, SQLite path or .jsonl log "
                        "(default: $AUTOSCHED_DB, else the user data directory)")
    cmds = p.add_subparsers(dest="db_command", metavar="ACTION")

    cmds.add_parser("info", help="location, schema version, and records per workload and target")

    def filters(q: argparse.ArgumentParser, workload_required: bool = False) -> None:
        q.add_argument("--workload", required=workload_required, help="workload name, e.g. matmul")
        q.add_argument("--param", "--arg", dest="arg", action="append", default=[], metavar="NAME=VALUE",
                       help="a workload parameter (repeatable); with --workload, selects one task")
        q.add_argument("--target", default=None,
                       help="target, e.g. 'llvm -mcpu=sapphirerapids' (default for best: this host)")

    b = cmds.add_parser("best", help="the fastest records of one task")
    filters(b, workload_required=True)
    b.add_argument("-k", type=int, default=1, help="how many (default 1)")
    b.add_argument("--allow-other-cpus", action="store_true",
                   help="if this CPU has no record, show those tuned on other CPUs")
    b.add_argument("--json", action="store_true", help="print records as JSON lines")

    ls = cmds.add_parser("list", help="records, oldest first")
    filters(ls)
    g = ls.add_mutually_exclusive_group()
    g.add_argument("--ok", action="store_true", help="successful records only")
    g.add_argument("--failed", action="store_true", help="failed records only")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0: all)")
    ls.add_argument("--json", action="store_true", help="print records as JSON lines")

    ex = cmds.add_parser("export", help="write records as a JSON-lines log")
    ex.add_argument("output", help="the .jsonl file to write ('-' for standard output)")
    filters(ex)
    ex.add_argument("--ok", action="store_true", help="successful records only")
    ex.add_argument("--append", action="store_true", help="append to the file instead of replacing it")
    ex.add_argument("--best", type=int, default=None, metavar="K",
                    help="only the K fastest successful records of each workload and target")

    im = cmds.add_parser("import", help="read a JSON-lines log into the database")
    im.add_argument("input", nargs="+", help="one or more .jsonl files")
    im.add_argument("--strict", action="store_true", help="refuse the whole file at its first bad line")
    im.add_argument("--replace", action="store_true",
                    help="a candidate already stored takes the log's measurement "
                         "(default: keep the stored one)")
    st = cmds.add_parser("stats", help="per workload and target: records, failures by kind, best GFLOPS")
    st.add_argument("--json", action="store_true", help="print one JSON object per workload and target")
    gc = cmds.add_parser("gc", help="remove what the database no longer needs, then compact it")
    gc.add_argument("--failed", action="store_true",
                    help="also remove failed records (their candidates may then be measured again)")
    gc.add_argument("--keep", type=int, default=None, metavar="K",
                    help="keep only the K fastest successful records per workload and target")
    gc.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    # `autosched db stats --db X` works as well as `autosched db --db X stats`
    for action in cmds.choices.values():
        action.add_argument("--db", default=argparse.SUPPRESS, metavar="URL_OR_PATH",
                            help="database URL, SQLite path or .jsonl log (as before the action)")
    return p


def _task(args: argparse.Namespace) -> Any:
    from autosched.task import Task

    params: dict[str, Any] = {}
    for item in args.arg:
        if "=" not in item:
            raise ValueError(f"--arg takes NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            params[k] = json.loads(v)
        except json.JSONDecodeError:
            params[k] = v
    return Task(args.workload, params, args.target or "llvm")


def _fmt_record(rec: Any, flop: int | None) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.timestamp)) if rec.timestamp else "-"
    if rec.ok:
        perf = f"{rec.cost * 1e6:12.2f} us"
        if flop:
            perf += f" {flop / rec.cost / 1e9:9.2f} GFLOPS"
        perf += f"  spread {rec.spread:5.1%}"
    else:
        perf = f"{rec.error_kind}: {rec.error_msg.splitlines()[0][:80] if rec.error_msg else ''}"
    flags = f"  [{', '.join(rec.flags)}]" if rec.flags else ""  # e.g. unchecked: no reference compared it
    where = f"  on {rec.host}" + (f" (node {rec.node_id[:12]})" if rec.node_id else "") if rec.host != "unknown" else ""
    return (f"#{rec.id:<8} {rec.workload_name:<16} {rec.target:<32} {when}  {perf}  ({len(rec.trace)} steps)"
            f"{flags}{where}")


def run(args: argparse.Namespace) -> int:
    """Run ``autosched db ...``; returns the exit code."""
    from sqlalchemy.exc import SQLAlchemyError

    from autosched.database import Database, DatabaseError, LogFormatError

    action = getattr(args, "db_command", None)
    if action is None:
        print("autosched db: give an action: info, stats, best, list, export, import or gc "
              "(see autosched db --help)",
              file=sys.stderr)
        return EXIT_ERROR
    try:
        with Database(args.db, create=action in ("import",)) as db:
            return _ACTIONS[action](db, args)
    except (DatabaseError, FileNotFoundError, KeyError, ValueError, TypeError, LogFormatError, OSError,
            SQLAlchemyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"autosched db: error: {msg}", file=sys.stderr)
        return EXIT_ERROR


def _info(db: Any, args: argparse.Namespace) -> int:
    print(f"database: {db}")
    print(f"schema version: {db.schema_version}   records: {db.count()} "
          f"({db.count(ok=True)} successful)   runs: {len(db.runs())}")
    for w in db.workloads():
        wargs = ", ".join(f"{k}={v}" for k, v in w.args.items())
        print(f"  {w.name}({wargs})  key {w.key[:16]}  {w.records} records")
    targets = db.targets()
    if targets:
        print("targets with records: " + ", ".join(targets))
    return EXIT_OK


def _best(db: Any, args: argparse.Namespace) -> int:
    task = _task(args)
    recs = db.best(task, k=args.k, allow_other_cpus=args.allow_other_cpus)
    if not recs:
        others = db.targets(task.workload_key)
        hint = f"; records exist for {', '.join(others)} (--allow-other-cpus)" if others else ""
        print(f"no record for {task.name} (key {task.workload_key}) on target {task.target.key!r}{hint}",
              file=sys.stderr)
        return EXIT_NOT_FOUND
    flop = task.flop
    for rec in recs:
        print(rec.dumps() if args.json else _fmt_record(rec, flop))
    return EXIT_OK


def _select(db: Any, args: argparse.Namespace, ok: bool | None, limit: int | None) -> list:
    key = None
    if args.workload and args.arg:
        key = _task(args).workload_key
    return db.records(key, args.target, workload_name=args.workload if key is None else None, ok=ok,
                      limit=limit)


def _list(db: Any, args: argparse.Namespace) -> int:
    ok = True if args.ok else (False if args.failed else None)
    for rec in _select(db, args, ok, args.limit or None):
        print(rec.dumps() if args.json else _fmt_record(rec, None))
    return EXIT_OK


def _export(db: Any, args: argparse.Namespace) -> int:
    key = _task(args).workload_key if args.workload and args.arg else None
    if args.best is not None and args.best < 1:
        print(f"autosched db export: error: --best must be at least 1, got {args.best}", file=sys.stderr)
        return EXIT_ERROR
    kwargs = dict(workload_name=args.workload if key is None else None, ok=True if args.ok else None,
                  best=args.best)
    if args.output == "-":
        n = db.export(sys.stdout, key, args.target, **kwargs)
    else:
        n = db.export(args.output, key, args.target, append=args.append, **kwargs)
        print(f"exported {n} records to {args.output}", file=sys.stderr)
    return EXIT_OK


def _import(db: Any, args: argparse.Namespace) -> int:
    code = EXIT_OK
    for path in args.input:
        report = db.import_(path, strict=args.strict, on_conflict="replace" if args.replace else "skip")
        print(report, file=sys.stderr)
        if report.errors:
            code = EXIT_PARTIAL
    return code


def _stats(db: Any, args: argparse.Namespace) -> int:
    rows = db.stats()
    if args.json:
        for r in rows:
            print(json.dumps(r, sort_keys=True))
        return EXIT_OK
    if not rows:
        print(f"{db}: no records")
        return EXIT_OK
    print(f"{'workload':<44} {'target':<30} {'records':>8} {'ok':>7} {'best GFLOPS':>12}  other results")
    for r in rows:
        wargs = ",".join(f"{k}={v}" for k, v in r["args"].items() if k != "dtype")
        name = f"{r['name']}({wargs})"
        best = "-"
        if r["best_cost"]:
            try:
                from autosched.task import Task

                best = f"{Task(r['name'], r['args']).flop / r['best_cost'] / 1e9:.1f}"
            except Exception:  # noqa: BLE001 - a workload not registered here has no FLOP count
                best = f"{r['best_cost'] * 1e6:.1f} us"
        from autosched.result import ResultFlag, outcome_summary

        errors = outcome_summary(r["errors"], r["flags"].get(ResultFlag.NOISY, 0))
        if r["flags"].get(ResultFlag.UNCHECKED):
            errors += f"  unchecked: {r['flags'][ResultFlag.UNCHECKED]}"
        print(f"{name[:44]:<44} {r['target'][:30]:<30} {r['records']:>8} {r['ok']:>7} {best:>12}  {errors}")
    total = sum(r["records"] for r in rows)
    print(f"{total} records, {len(rows)} workload/target pairs, {len(db.runs())} tuning runs")
    return EXIT_OK


def _gc(db: Any, args: argparse.Namespace) -> int:
    removed = db.gc(failed=args.failed, keep=args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb}: {removed['failed_records']} failed records, {removed['slow_records']} slower records, "
          f"{removed['workloads']} empty workloads, {removed['runs']} empty runs; {db.count()} records remain")
    return EXIT_OK


_ACTIONS = {"stats": _stats, "gc": _gc, "info": _info, "best": _best, "list": _list, "export": _export,
            "import": _import}
