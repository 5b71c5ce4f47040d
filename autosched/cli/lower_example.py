"""``autosched lower-example``: print the lowered loops of a scheduled vector add, a smoke test that the
expression IR, the schedule and lowering work here (nothing is compiled)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autosched import te
from autosched.cli.common import add_verbosity, at_least
from autosched.errors import ScheduleError
from autosched.tir.lower import lower


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``lower-example`` command to an ``add_subparsers()`` object; returns its parser."""
    lw = sub.add_parser("lower-example", help="print the lowered loops of a scheduled vector add (a smoke test)")
    lw.add_argument("--factor", type=at_least(1), default=64, help="split factor of the loop (default 64)")
    add_verbosity(lw)
    return lw


def run(args: argparse.Namespace) -> int:
    """Run ``autosched lower-example``; returns the exit code (2: a factor the schedule refuses)."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    try:
        xo, xi = s[C].split(C.op.axis[0], factor=args.factor)
        s[C].vectorize(xi)
        s[C].parallel(xo)
        print(lower(s, [A, B, C], name="myadd"))
    except ScheduleError as e:
        print(f"autosched: error: {e}", file=sys.stderr)
        return 2
    return 0
