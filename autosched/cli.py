"""The ``autosched`` command line."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

import autosched

_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?: <[^>]*>)?`")  # :func:`~a.b` -> b, :mod:`x` -> x


def plain(text: str) -> str:
    """Help text in plain words: the reST roles and literals of docstrings (``x``, :mod:`y`) as bare text."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if "~" in m.group(0) else m.group(1), text)
    return text.replace("``", "")


class Parser(argparse.ArgumentParser):
    """argparse's parser, with usage errors in one line: what is wrong, with the flag as the user wrote it,
    and where the help is (argparse prints the whole usage block above it, which buries the line), exit 2;
    and help in plain words (:func:`plain`), as the docstrings it is made of are written in reST."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # `--trial -3` is not quietly read, and named, as --trials
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def format_help(self) -> str:
        return plain(super().format_help())


def make_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="autosched",
        description="autosched: a search-based tensor-program tuner (TVM/Ansor lineage) on llvmlite.",
        epilog="Results go to standard output, progress and messages to standard error. Exit codes: 0 done, "
               "1 failed (or nothing found), 2 bad usage (one line names it, before anything starts), 3 db "
               "import skipped bad lines, 130 interrupted. Each command's --help says more.",
    )
    p.add_argument("--version", action="version", version=f"autosched {autosched.__version__}")
    from autosched.search.cli import add_verbosity, at_least

    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    lw = sub.add_parser("lower-example", help="print the lowered loops of a scheduled vector add (a smoke test)")
    lw.add_argument("--factor", type=at_least(1), default=64, help="split factor of the loop (default 64)")
    add_verbosity(lw)
    from autosched.database import cli as db_cli  # argparse only; SQLAlchemy is imported when it runs

    db_cli.add_parser(sub)
    from autosched.space import cli as workloads_cli

    workloads_cli.add_parser(sub)
    from autosched.search import cli as tune_cli

    tune_cli.add_parser(sub)
    from autosched.search import race, report

    report.add_parser(sub)
    race.add_parser(sub)
    _add_peak_parser(sub)
    from autosched.relay import cli as build_cli  # argparse only; the graph level is imported when it runs

    build_cli.add_parser(sub)
    return p


def _add_peak_parser(sub: argparse._SubParsersAction) -> None:
    from autosched.search.cli import add_verbosity, at_least

    pk = sub.add_parser("peak", help="measure (once) and print this machine's fp32 peak GFLOPS",
                        description="Measure this machine's fp32 peak with a loop of vector FMAs compiled by "
                                    "llvmlite; the figure is cached per CPU and thread count. Exit codes: 0 "
                                    "done, 2 bad usage (a target that is not a CPU or GPU here).")
    pk.add_argument("--threads", type=at_least(1), default=None, help="threads (default: all cores)")
    pk.add_argument("--refresh", action="store_true", help="measure again instead of reading the cache")
    pk.add_argument("--json", action="store_true", help="print the figure as JSON")
    pk.add_argument("--target", default=None, help="'cuda': the GPU's fp32 peak instead of the CPU's")
    add_verbosity(pk)


def _peak(args: argparse.Namespace) -> int:
    import json

    from autosched.measure.peak import cached_peak, get_peak
    from autosched.search.cli import setup_logging

    setup_logging(args)
    from autosched.runtime.cuda import CUDAError
    from autosched.target import Target

    try:
        gpu = args.target is not None and Target(args.target).kind == "cuda"
        cached = None if args.refresh else cached_peak(args.threads, args.target)
        peak = cached or get_peak(args.threads, refresh=True, target=args.target)
    except (ValueError, CUDAError) as e:
        print(f"autosched peak: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(peak.to_json()))
    else:
        how = ("cached, " if cached else "") + peak.describe()
        if gpu:
            print(f"fp32 peak: {peak.gflops:.1f} GFLOPS on {peak.cpu} ({how})")
        else:
            print(f"fp32 peak: {peak.gflops:.1f} GFLOPS on {peak.threads} thread(s) of {peak.cpu} "
                  f"({peak.lanes}-lane FMAs; {how})")
    return 0


def _lower_example(factor: int) -> int:
    from autosched import te

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    print(autosched.lower(s, [A, B, C], name="myadd"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version (0) or a usage error (2, its line printed): a code, as below
        return e.code if isinstance(e.code, int) else 2
    if args.command == "lower-example":
        try:
            return _lower_example(args.factor)
        except autosched.ScheduleError as e:
            print(f"autosched: error: {e}", file=sys.stderr)
            return 2
    if args.command == "db":
        from autosched.database import cli as db_cli

        return db_cli.run(args)
    if args.command == "workloads":
        from autosched.space import cli as workloads_cli

        return workloads_cli.run(args)
    if args.command == "tune":
        from autosched.search import cli as tune_cli

        return tune_cli.run(args)
    if args.command == "report":
        from autosched.search import report

        return report.run(args)
    if args.command == "race":
        from autosched.search import race

        return race.run(args)
    if args.command == "peak":
        return _peak(args)
    if args.command == "build":
        from autosched.relay import cli as build_cli

        return build_cli.run(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
