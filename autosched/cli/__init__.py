"""The ``autosched`` command line: one module per command (``tune``, ``db``, ``workloads``, ``report``, ``race``,
``peak``, ``build``, ``lower-example``; ``train_pretrained`` runs as ``python -m autosched.cli.train_pretrained``),
each an ``add_parser(subparsers)`` and a ``run(args) -> exit code`` over the library's public API. This module
gathers them under one parser whose usage errors are one line."""

from __future__ import annotations

import argparse
import re
import sys
from types import ModuleType
from typing import Any, NoReturn

from autosched.cli import build, db, lower_example, peak, race, report, tune, workloads
from autosched.cost_model.xgb import lean_import
from autosched.version import __version__

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


#: the commands in the order ``autosched --help`` lists them
COMMANDS: dict[str, ModuleType] = {"lower-example": lower_example, "db": db, "workloads": workloads, "tune": tune,
                                   "report": report, "race": race, "peak": peak, "build": build}


def make_parser() -> argparse.ArgumentParser:
    """The ``autosched`` parser, with every command's sub-parser."""
    p = Parser(
        prog="autosched",
        description="autosched: a search-based tensor-program tuner (TVM/Ansor lineage) on llvmlite.",
        epilog="Results go to standard output, progress and messages to standard error. Exit codes: 0 done, "
               "1 failed (or nothing found), 2 bad usage (one line names it, before anything starts), 3 db "
               "import skipped bad lines, 130 interrupted. Each command's --help says more.",
    )
    p.add_argument("--version", action="version", version=f"autosched {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``autosched`` with ``argv`` (default: the process's arguments); returns the exit code."""
    lean_import()  # the commands use XGBoost's Booster alone: its scikit-learn wrappers cost 1.7 s to import
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version (0) or a usage error (2, its line printed): a code, as below
        return e.code if isinstance(e.code, int) else 2
    if args.command in COMMANDS:
        return COMMANDS[args.command].run(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
