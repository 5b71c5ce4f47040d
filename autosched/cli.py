"""The ``autosched`` command line."""

from __future__ import annotations

import argparse
import sys

import autosched


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autosched",
        description="autosched: a search-based tensor-program tuner (TVM/Ansor lineage) on llvmlite.",
    )
    p.add_argument("--version", action="version", version=f"autosched {autosched.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    lw = sub.add_parser("lower-example", help="print the lowered loops of a scheduled vector add (a smoke test)")
    lw.add_argument("--factor", type=int, default=64, help="split factor of the loop (default 64)")
    from autosched.database import cli as db_cli  # argparse only; SQLAlchemy is imported when it runs

    db_cli.add_parser(sub)
    from autosched.space import cli as workloads_cli

    workloads_cli.add_parser(sub)
    return p


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
    args = parser.parse_args(argv)
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
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
