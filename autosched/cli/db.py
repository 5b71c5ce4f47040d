"""``autosched db``: look into a tuning database and move records in and out of it.

    autosched db list                                   # the tasks it holds: workload, parameters, target,
                                                        # records, best (copy a row's flags into best/report)
    autosched db best                                   # the best kernel (the one task, or the one you name)
    autosched db best --workload matmul --param M=512 -k 5
    autosched db list --records --failed --limit 20     # records instead of tasks, oldest first
    autosched db export out.jsonl --workload matmul --ok
    autosched db import tuning_logs/matmul.jsonl --strict

--db takes an SQLite path, a postgresql:// URL or a .jsonl tuning log (default: $AUTOSCHED_DB, else the
user data directory). Results go to standard output, messages to standard error.

Exit codes: 0 done; 1 nothing found (best: no such task or no record of it; the tasks held are listed);
2 bad usage (an unknown workload or parameter, a database or file that cannot be used); 3 imported, but
some lines of the log were bad (each is named once).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from typing import Any

from autosched import build, lower
from autosched.cli.common import UsageError, add_verbosity, at_least, first_line, parse_params, setup_logging
from autosched.codegen.nvptx import ptxas_check, ptxas_path, ptxas_registers
from autosched.database import LogFormatError
from autosched.errors import AutoschedError
from autosched.measure.measurer import TIMEOUT_FACTOR
from autosched.result import ResultFlag, count_summary
from autosched.target import Target
from autosched.task import Task
from autosched.tir import stmt as S
from autosched.tir.banks import shared_passes
from autosched.workloads import get_workload

EXIT_OK, EXIT_NOT_FOUND, EXIT_ERROR, EXIT_PARTIAL = 0, 1, 2, 3


class NotFound(Exception):
    """No task, or several, answer what the user named; the message lists the tasks the database holds."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``db`` command to an ``add_subparsers()`` object; returns its parser."""
    p = sub.add_parser("db", help="look into a tuning database; import and export JSON-lines tuning logs",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    db_help = ("tuning database: an SQLite path, a postgresql:// URL or a .jsonl log "
               "(default: $AUTOSCHED_DB, else the user data directory)")
    p.add_argument("--db", default=None, metavar="URL_OR_PATH", help=db_help)
    add_verbosity(p)
    cmds = p.add_subparsers(dest="db_command", metavar="ACTION")

    cmds.add_parser("info", help="location, schema version, and records per workload and target")

    def filters(q: argparse.ArgumentParser, target_default: str) -> None:
        q.add_argument("--workload", help="workload name, e.g. matmul (not needed when one task matches)")
        q.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="a workload parameter (repeatable); selects the tasks with that value")
        q.add_argument("--target", default=None, help=f"target, e.g. 'llvm -mcpu=znver3' ({target_default})")

    b = cmds.add_parser("best", help="the fastest records of one task (the database's only one, or the one named)")
    filters(b, "default: this machine's CPU")
    b.add_argument("-k", "--top", type=at_least(1), default=1, metavar="K", help="how many (default 1)")
    b.add_argument("--allow-other-cpus", action="store_true",
                   help="if this CPU has no record, show those tuned on other CPUs")
    b.add_argument("--json", action="store_true", help="one JSON object per record, for scripts")
    b.add_argument("--show", action="store_true",
                   help="also print the best kernel: its loops and, on a GPU target, its launch, shared memory, "
                        "bank conflicts (a static model) and registers")

    ls = cmds.add_parser("list", help="the tasks the database holds (with --records: their records)")
    filters(ls, "default: every target")
    ls.add_argument("--records", action="store_true", help="list records, oldest first, instead of tasks")
    g = ls.add_mutually_exclusive_group()
    g.add_argument("--ok", action="store_true", help="successful records only (implies --records)")
    g.add_argument("--failed", action="store_true", help="failed records only (implies --records)")
    ls.add_argument("--limit", type=at_least(0), default=50,
                    help="with --records: at most this many (default 50; 0: all)")
    ls.add_argument("--json", action="store_true", help="one JSON object per task (or record), for scripts")

    ex = cmds.add_parser("export", help="write records as a JSON-lines log")
    ex.add_argument("output", help="the .jsonl file to write ('-' for standard output)")
    filters(ex, "default: every target")
    ex.add_argument("--ok", action="store_true", help="successful records only")
    ex.add_argument("--append", action="store_true", help="append to the file instead of replacing it")
    ex.add_argument("-k", "--top", type=at_least(1), default=None, metavar="K",
                    help="only the K fastest successful records of each workload and target")

    im = cmds.add_parser("import", help="read JSON-lines logs into the database")
    im.add_argument("input", nargs="+", help="one or more .jsonl files")
    im.add_argument("--strict", action="store_true", help="refuse the whole file at its first bad line")
    im.add_argument("--replace", action="store_true",
                    help="a candidate already stored takes the log's measurement (default: keep the stored one)")
    st = cmds.add_parser("stats", help="per workload and target: records, failures by kind, best GFLOPS")
    st.add_argument("--json", action="store_true", help="one JSON object per workload and target")
    gc = cmds.add_parser("gc", help="remove what the database no longer needs, then compact it")
    gc.add_argument("--failed", action="store_true",
                    help="also remove failed records (their candidates may then be measured again)")
    gc.add_argument("-k", "--top", type=at_least(1), default=None, metavar="K",
                    help="keep only the K fastest successful records of each workload and target")
    gc.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    # `autosched db stats --db X -v` works as well as `autosched db --db X -v stats`
    for action in cmds.choices.values():
        action.add_argument("--db", default=argparse.SUPPRESS, metavar="URL_OR_PATH", help=db_help)
        add_verbosity(action, suppress=True)
    return p


# ------------------------------------------------------------------------------- finding a task
def task_flags(name: str, args: dict[str, Any], target: str | None = None) -> str:
    """The flags that name a task on the command line: ``--workload matmul --param M=64 ...`` (parameters
    at their default left out), with ``--target`` when it is not this machine's CPU."""
    try:
        defaults = get_workload(name).canonical_args()
    except (KeyError, TypeError):
        defaults = {}
    params = " ".join(f"--param {k}={json.dumps(v) if not isinstance(v, str) else v}"
                      for k, v in args.items() if k not in defaults or defaults[k] != v)
    text = f"--workload {name}" + (f" {params}" if params else "")
    if target is not None and target != _host_key():
        text += f" --target {shlex.quote(target)}"
    return text


def _host_key() -> str:
    return Target("llvm").key


def task_rows(db: Any) -> list[dict[str, Any]]:
    """One row per task the database holds (workload and parameters, target): records, successful ones,
    the best record (trusted first, see :func:`~autosched.database.query.trusted`) and its GFLOPS."""
    rows = []
    for r in db.stats():
        best = db.best(r["key"], target=r["target"], k=1)
        row = dict(r, best=best[0] if best else None, gflops=None)
        if best:
            try:
                row["gflops"] = Task(r["name"], r["args"], r["target"]).flop / best[0].cost / 1e9
            except Exception:  # noqa: BLE001 - a workload not registered here has no FLOP count
                pass
        rows.append(row)
    return rows


def task_table(rows: list[dict[str, Any]]) -> list[str]:
    """The table of tasks ``db list`` prints and a miss of ``db best`` / ``report`` shows."""
    from autosched.database.query import trusted  # SQLAlchemy: loaded once a database is read

    lines = [f"{'records':>7} {'ok':>5} {'best GFLOPS':>12}  task (as flags)"]
    for r in rows:
        best = r["best"]
        if best is None:
            fig = "-"
        else:
            fig = f"{r['gflops']:.1f}" if r["gflops"] is not None else f"{best.cost * 1e6:.1f} us"
            if not trusted(best):
                fig += "*"
        lines.append(f"{r['records']:>7} {r['ok']:>5} {fig:>12}  {task_flags(r['name'], r['args'], r['target'])}")
    if any(r["best"] is not None and not trusted(r["best"]) for r in rows):
        lines.append("* all its successful records are noisy (timing disturbed, repeats that disagree): tune again")
    return lines


def find_task(db: Any, workload: str | None, params: dict[str, Any], target: str | None,
              default_target: str | None = "llvm") -> Any:
    """The one task of the database that ``workload``, ``params`` and ``target`` name (each may be left
    out: one task in the database needs none). ``default_target`` applies when ``target`` is None and
    several targets hold the task (this machine's CPU first). Raises :class:`NotFound`, whose message lists
    the tasks held; ValueError/KeyError/TypeError for an unknown workload or parameter."""
    if workload is not None:
        wl = get_workload(workload)
        given = {k: v for k, v in wl.canonical_args(params).items() if k in params}
        exact = Task(workload, params, target or default_target or "llvm")
    else:
        if params:
            raise ValueError("--param needs --workload (the workload the parameters belong to)")
        given, exact = {}, None
    rows = task_rows(db)
    tkey = Target(target).key if target else None
    match = [r for r in rows if (workload is None or r["name"] == workload)
             and all(r["args"].get(k) == v for k, v in given.items())
             and (tkey is None or r["target"] == tkey)]
    if exact is not None and any(r["key"] == exact.workload_key for r in match):
        match = [r for r in match if r["key"] == exact.workload_key]  # every parameter named, or by default
    if len({r["key"] for r in match}) == 1 and len(match) > 1 and tkey is None and default_target:
        here = [r for r in match if r["target"] == Target(default_target).key]
        match = here or match
    if len(match) == 1:
        r = match[0]
        return Task(r["name"], r["args"], r["target"])
    if not match and exact is not None and any(r["key"] == exact.workload_key for r in rows):
        return exact  # held, for other CPUs only: the caller says so (and --allow-other-cpus finds them)
    named = " ".join(filter(None, [f"--workload {workload}" if workload else "",
                                   " ".join(f"--param {k}={v}" for k, v in params.items()),
                                   f"--target {target!r}" if target else ""]))
    if not rows:
        raise NotFound(f"{db} holds no records yet; tune a task first (autosched tune --workload ...)")
    head = (f"{len(match)} tasks in {db} match {named or 'nothing named'}: name one with the flags of its row"
            if match else f"no task in {db} matches {named}; it holds")
    return_rows = match or rows
    raise NotFound("\n".join([head + ":", *task_table(return_rows)]))


# ------------------------------------------------------------------------------- the actions
def _fmt_record(rec: Any, flop: int | None, target: str | None = None) -> str:
    from autosched.database.query import trusted  # SQLAlchemy: loaded once a database is read

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.timestamp)) if rec.timestamp else "-"
    if rec.ok:
        perf = f"{rec.cost * 1e6:,.1f} us"
        if flop:
            perf += f", {flop / rec.cost / 1e9:.1f} GFLOPS"
        perf += f" (repeats spread {rec.spread:.1%})"
    else:
        perf = f"{rec.error_kind}: {rec.error_msg.splitlines()[0][:80] if rec.error_msg else ''}"
    flags = list(rec.flags)
    if rec.ok and not trusted(rec) and "noisy" not in flags:
        flags.append("noisy")
    marks = f"  [{', '.join(flags)}]" if flags else ""  # e.g. unchecked: no reference compared it
    where = f"  on {rec.host}" + (f" (node {rec.node_id[:12]})" if rec.node_id else "") if rec.host != "unknown" else ""
    other = f"  tuned for {rec.target}" if target is not None and rec.target != target else ""
    return f"#{rec.id:<6} {when}  {perf}  {len(rec.trace)} steps{marks}{other}{where}"


def run(args: argparse.Namespace) -> int:
    """Run ``autosched db ...``; returns the exit code."""
    from sqlalchemy.exc import SQLAlchemyError  # SQLAlchemy loads when a database is opened, not for --help

    from autosched.database import Database, DatabaseError

    setup_logging(args)
    action = getattr(args, "db_command", None)
    if action is None:
        print("autosched db: error: give an action: list, best, info, stats, export, import or gc "
              "(see autosched db --help)", file=sys.stderr)
        return EXIT_ERROR
    if action == "best" and args.show and args.json:
        print("autosched db best: error: --show prints the kernel as text; leave out --json or --show",
              file=sys.stderr)
        return EXIT_ERROR
    if action == "import":  # every log must be readable before a database is created for them
        for path in args.input:
            try:
                with open(path, "rb"):
                    pass
            except OSError as e:
                print(f"autosched db import: error: cannot read {path}: {e.strerror or e}", file=sys.stderr)
                return EXIT_ERROR
    try:
        with Database(args.db, create=action in ("import",)) as db:
            return _ACTIONS[action](db, args)
    except NotFound as e:
        print(f"autosched db {action}: {e}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (DatabaseError, FileNotFoundError, KeyError, ValueError, TypeError, LogFormatError, OSError,
            SQLAlchemyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else first_line(e)
        print(f"autosched db {action}: error: {msg}", file=sys.stderr)
        return EXIT_ERROR


def _params(args: argparse.Namespace) -> dict[str, Any]:
    try:
        return parse_params(args.param)
    except UsageError as e:
        raise ValueError(str(e)) from None


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
    from autosched.database.query import trusted  # SQLAlchemy: loaded once a database is read

    task = find_task(db, args.workload, _params(args), args.target)
    recs = db.best(task, k=args.top, allow_other_cpus=args.allow_other_cpus)
    if not recs:
        others = db.targets(task.workload_key)
        hint = f"; records exist for {', '.join(others)} (--allow-other-cpus)" if others else ""
        raise NotFound(f"no successful record of {task.label} on {task.target.key!r}{hint}")
    flop = task.flop
    if args.json:
        for rec in recs:
            d = json.loads(rec.dumps())
            d["summary"] = {"task": task.label, "record": rec.id, "seconds": rec.cost,
                            "gflops": flop / rec.cost / 1e9, "trusted": trusted(rec)}
            print(json.dumps(d))
        return EXIT_OK
    print(f"{task.label} on {task.target.key} ({db.count(task)} records)")
    for rec in recs:
        print(_fmt_record(rec, flop, task.target.key))
    if not trusted(recs[0]):
        print("noisy: every successful record's timing was disturbed (another program was busy), its repeats "
              "disagree, or it failed a re-measure; tune again on a quieter machine for a figure to trust")
    if args.show:
        try:
            print(_show_kernel(task, recs[0]))
        except AutoschedError as e:  # a record this version cannot lower or build again: say so, keep the rest
            print(f"\nkernel of record #{recs[0].id}: cannot be shown here: {first_line(e)}")
    return EXIT_OK


def _show_kernel(task: Task, rec: Any) -> str:
    """The kernel of a record as a performance engineer reads it: for a GPU target its launch, shared memory,
    the static bank model's passes per shared buffer, pipelined loops and ptxas's registers; then its loops."""
    target = Target(rec.target)
    func = lower(*task.apply(rec.trace), target=target)
    lines = [f"\nkernel of record #{rec.id} ({task.label} on {rec.target}):"]
    if target.kind == "cuda":
        launch = func.attrs["launch"]
        lines.append(f"  launch: {launch.grid} blocks x {launch.block} threads, "
                     f"{launch.shared_bytes:,} bytes of shared memory per block")
        passes = shared_passes(func, target.gpu)
        if passes:
            lines.append("  shared memory banks (static model, first warp): " + ", ".join(
                f"{name} {got / best:.2f}x the conflict-free passes" for name, (got, best) in passes.items()
                if best))
        doubled = sorted({b.name for b in _allocs(func) if b.scope == "shared" and b.name + ".next" in
                          {x.name for x in _allocs(func)}})
        if doubled:
            lines.append(f"  double-buffered, the next tile loaded during this one: {', '.join(doubled)}")
        if ptxas_path() is not None:
            ptx = build(*task.apply(rec.trace), target=target).get_source("ptx")
            regs = ptxas_registers(ptxas_check(ptx, target.gpu.arch))
            lines.append(f"  registers per thread (ptxas, {target.gpu.arch}): "
                         + ", ".join(f"{k} {v}" for k, v in regs.items()))
    lines.append(str(func))
    return "\n".join(lines)


def _allocs(func: Any) -> list:
    return [x.buffer for x in S.walk_stmts(func.body) if isinstance(x, S.Allocate)]


def _list(db: Any, args: argparse.Namespace) -> int:
    if args.records or args.ok or args.failed:
        return _list_records(db, args)
    params = _params(args)
    rows = task_rows(db)
    if args.workload or params or args.target:
        tkey = Target(args.target).key if args.target else None
        given = {}
        if args.workload:
            wl = get_workload(args.workload)
            given = {k: v for k, v in wl.canonical_args(params).items() if k in params}
        rows = [r for r in rows if (not args.workload or r["name"] == args.workload)
                and all(r["args"].get(k) == v for k, v in given.items()) and (tkey is None or r["target"] == tkey)]
    if args.json:
        for r in rows:
            print(json.dumps({"workload": r["name"], "params": r["args"], "target": r["target"],
                              "records": r["records"], "ok": r["ok"], "best_gflops": r["gflops"],
                              "best_record": r["best"].id if r["best"] else None,
                              "flags": task_flags(r["name"], r["args"], r["target"])}))
        return EXIT_OK
    if not rows:
        print(f"{db}: no tasks" + (" match" if args.workload or params or args.target else ""), file=sys.stderr)
        return EXIT_OK
    print("\n".join(task_table(rows)))
    return EXIT_OK


def _list_records(db: Any, args: argparse.Namespace) -> int:
    ok = True if args.ok else (False if args.failed else None)
    params = _params(args)
    key = None
    if args.workload and params:
        key = find_task(db, args.workload, params, args.target, default_target=None).workload_key
    recs = db.records(key, args.target, workload_name=args.workload if key is None else None, ok=ok,
                      limit=args.limit or None)
    for rec in recs:
        print(rec.dumps() if args.json else f"{rec.workload_name:<14} {rec.target:<28} {_fmt_record(rec, None)}")
    return EXIT_OK


def _export(db: Any, args: argparse.Namespace) -> int:
    params = _params(args)
    key = Task(args.workload, params, args.target or "llvm").workload_key if args.workload and params else None
    kwargs = dict(workload_name=args.workload if key is None else None, ok=True if args.ok else None,
                  best=args.top)
    if args.output == "-":
        db.export(sys.stdout, key, args.target, **kwargs)
    else:
        n = db.export(args.output, key, args.target, append=args.append, **kwargs)
        print(f"exported {n} records to {args.output}", file=sys.stderr)
    return EXIT_OK


def _import(db: Any, args: argparse.Namespace) -> int:
    code = EXIT_OK
    for path in args.input:
        # the report names each bad line once (the import itself says nothing, quiet)
        report = db.import_(path, strict=args.strict, on_conflict="replace" if args.replace else "skip",
                            _quiet=True)
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
    print(f"{'workload':<44} {'target':<30} {'records':>8} {'ok':>7} {'best GFLOPS':>12}  what the records are")
    for r, t in zip(rows, task_rows(db)):
        wargs = ",".join(f"{k}={v}" for k, v in r["args"].items() if k != "dtype")
        name = f"{r['name']}({wargs})"
        best = "-"
        if t["best"] is not None:
            best = f"{t['gflops']:.1f}" if t["gflops"] is not None else f"{t['best'].cost * 1e6:.1f} us"
        errors = count_summary(r["records"], r["errors"], r["flags"].get(ResultFlag.NOISY, 0),
                               TIMEOUT_FACTOR).split(": ", 1)[1]
        if r["flags"].get(ResultFlag.UNCHECKED):
            errors += f"  unchecked: {r['flags'][ResultFlag.UNCHECKED]}"
        print(f"{name[:44]:<44} {r['target'][:30]:<30} {r['records']:>8} {r['ok']:>7} {best:>12}  {errors}")
    total = sum(r["records"] for r in rows)
    print(f"{total} records, {len(rows)} workload/target pairs, {len(db.runs())} tuning runs")
    return EXIT_OK


def _gc(db: Any, args: argparse.Namespace) -> int:
    removed = db.gc(failed=args.failed, keep=args.top, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb}: {removed['failed_records']} failed records, {removed['slow_records']} slower records, "
          f"{removed['workloads']} empty workloads, {removed['runs']} empty runs; {db.count()} records remain")
    return EXIT_OK


_ACTIONS = {"stats": _stats, "gc": _gc, "info": _info, "best": _best, "list": _list, "export": _export,
            "import": _import}
