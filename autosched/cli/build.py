"""``autosched build``: compile an ONNX model into a deployable folder, using the best tuning records.

    autosched build --model resnet18.onnx --shape data=1,3,224,224 --db tuning.db -o out/

writes ``out/deploy_graph.json`` (the executor's graph), ``out/deploy_lib.so`` (every kernel, one shared
library) and ``out/deploy_params.npz`` (the weights, ``numpy.savez``), which run with
``autosched.runtime.graph_executor.load("out/")`` and nothing but numpy. Each kernel uses its best record
in ``--db`` when one matches, else its default schedule; the summary says how many were tuned.

Exit codes: 0 built, 1 the build failed, 2 bad usage (a missing model or database, a malformed ``--shape``,
an op the importer does not support).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from autosched.relay.backend.build_module import build, extract_tasks
from autosched.relay.frontend import from_onnx
from autosched.relay.ir.expr import RelayError
from autosched.relay.transform import PassContext
from autosched.runtime.graph_executor import export
from autosched.target import check_target

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``build`` command to an argparse subparsers object."""
    p = sub.add_parser("build", help="compile an ONNX model (with the best tuning records) into a deployable folder",
                       description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                   help="the shape of an input (repeatable; needed for inputs with dynamic dimensions)")
    p.add_argument("--db", default=None, metavar="URL_OR_PATH",
                   help="tuning database or .jsonl log whose best records to apply (default: none, default schedules)")
    p.add_argument("--target", default="llvm", help="target (default: llvm, this host)")
    p.add_argument("--opt-level", type=int, default=3, choices=range(4), metavar="{0..3}",
                   help="graph optimisation level (default 3)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write the graph, library, params")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log each kernel's schedule (-vv: debug)")
    p.add_argument("-q", "--quiet", action="store_true", help="errors only")
    return p


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["data=1,3,224,224"]`` -> ``{"data": (1, 3, 224, 224)}``; a ValueError names a malformed item."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, eq, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not eq or not name or not shape or min(shape) < 0:
            raise ValueError(f"--shape takes INPUT=D0,D1,... (non-negative integers), got {item!r}")
        shapes[name] = shape
    return shapes


def load_model(path: str, shapes: dict[str, tuple[int, ...]] | None = None) -> tuple[Any, dict]:
    """``(mod, params)`` of an ONNX file, through ``relay.frontend.from_onnx``."""
    import onnx  # an optional dependency: only a model file needs it

    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path}")
    return from_onnx(onnx.load(path), shape=shapes or None)


def load_model_tasks(path: str, shapes: dict[str, tuple[int, ...]] | None = None,
                     target: Any = "llvm") -> tuple[list, list[float]]:
    """The tuning tasks of an ONNX model and their weights (how often each kernel runs), for ``tune_tasks``."""
    mod, params = load_model(path, shapes)
    tasks = extract_tasks(mod, params, target)
    return tasks, [float(t.weight) for t in tasks]


def _setup_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.verbose >= 2 else logging.INFO if args.verbose == 1 else (
        logging.ERROR if args.quiet else logging.WARNING)
    logging.basicConfig(level=level, format="%(name)s %(levelname)s: %(message)s", stream=sys.stderr)
    logging.getLogger("autosched").setLevel(level)


def run(args: argparse.Namespace) -> int:
    """Run ``autosched build``; returns the exit code."""
    _setup_logging(args)
    try:
        shapes = parse_shapes(args.shape)
    except ValueError as e:
        print(f"autosched build: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not os.path.exists(args.model):
        print(f"autosched build: error: no such model file: {args.model}", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_target(args.target)  # an -mcpu LLVM does not know aborts the process at the first kernel
    except ValueError as e:
        print(f"autosched build: error: --target {args.target!r}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("autosched build: error: --model needs the onnx package (pip install onnx)", file=sys.stderr)
        return EXIT_USAGE
    try:
        mod, params = load_model(args.model, shapes)
    except (RelayError, ValueError, KeyError, NotImplementedError) as e:
        print(f"autosched build: error: cannot import {args.model}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the importer's own errors (unsupported ops, dynamic shapes) are usage errors
        if type(e).__name__ in ("OpNotImplemented", "OnnxImportError"):
            print(f"autosched build: error: cannot import {args.model}: {e}", file=sys.stderr)
            return EXIT_USAGE
        raise
    ctx = None
    if args.db is not None:
        from autosched.database.apply import apply_history_best  # SQLAlchemy: only with --db

        try:
            ctx = apply_history_best(args.db)
        except (FileNotFoundError, ValueError) as e:
            print(f"autosched build: error: cannot open the database {args.db}: {e}", file=sys.stderr)
            return EXIT_USAGE
    t0 = time.perf_counter()
    summary_log = logging.getLogger("autosched.relay.summary")  # its line is printed below instead
    old_level = summary_log.level
    summary_log.setLevel(logging.ERROR)
    try:
        with PassContext(opt_level=args.opt_level):
            if ctx is not None:
                with ctx:
                    result = build(mod, args.target, params)
            else:
                result = build(mod, args.target, params)
        graph_json, lib, out_params = result
        paths = export(args.output, graph_json, lib, out_params)
    except Exception as e:
        if args.verbose:
            raise
        print(f"autosched build: error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        summary_log.setLevel(old_level)
    if not args.quiet:
        print(f"built {args.model} in {time.perf_counter() - t0:.1f}s (records from {args.db or 'no database'}):")
        for key in ("graph", "lib", "params"):
            print(f"  {paths[key]}")
        print(result.summary.replace("relay.build: ", "", 1))
    return EXIT_OK

