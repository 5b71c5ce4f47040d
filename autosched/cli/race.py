"""``autosched race``: search policies side by side on one workload, against references that do not move.

Each (policy, seed) run tunes the same task from an empty database of its own, one after another on the
same workers; after each batch it notes the best GFLOPS so far, against trials and against seconds. The
reference is the fastest installed vendor library on the same computation (:mod:`autosched.search.vendor`),
else the machine's fp32 peak, both timed in this process: a policy's figure is its share of it, so runs
that stall are not flattered by comparing them with their own best. Prints a table (median over seeds,
with the worst and best seed) and draws the curves::

    autosched race --policies random,evolutionary --workload matmul --param M=256 --trials 64 --seeds 0,1,2
    autosched race --policies evolutionary --cost-models xgb,pretrained --from-scratch --workload conv2d

Exit codes: 0 done, 1 every run failed (or the race crashed), 2 bad usage (found before anything starts).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from autosched.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_verbosity,
    at_least,
    check_gpu_here,
    make_task,
    parse_params,
    setup_logging,
    supervised,
)
from autosched.search.policy import get_policy
from autosched.search.race import RaceRun, plot, race, reference, table
from autosched.search.tune import COST_MODELS


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("race", help="compare search policies on one workload: a table and a PNG of their curves",
                       description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", required=True, metavar="A,B,...",
                   help="registered policies, comma-separated (see the list in `autosched tune --help`)")
    p.add_argument("--workload", required=True, help="a registered workload (see `autosched workloads`)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a workload parameter")
    p.add_argument("--trials", type=at_least(1), default=64, help="trials per run (default 64)")
    p.add_argument("--seeds", default="0,1,2", metavar="S,S,...", help="seeds, comma-separated (default 0,1,2)")
    p.add_argument("--cost-models", default=None, metavar="A,B,...",
                   help=f"race each policy with each of these cost models ({', '.join(COST_MODELS)}; default: "
                        "what `autosched tune` picks)")
    p.add_argument("--from-scratch", action="store_true",
                   help="do not measure the workload's default schedule first: the curves are the search's alone")
    p.add_argument("--batch-size", type=at_least(1), default=16, help="candidates per measured batch (default 16)")
    p.add_argument("--backend", choices=["ray", "local"], default=None, help="workers: ray (default) or local")
    p.add_argument("--target", default="llvm", help="target (default: this host)")
    p.add_argument("--plot", default="race.png", metavar="FILE.png", help="the curves (default race.png)")
    p.add_argument("--json", action="store_true",
                   help="every run's curve as JSON on standard output instead of the table (for scripts)")
    p.add_argument("--startup", type=float, default=None, metavar="SECONDS",
                   help="the seconds each run counts for starting a command, in time to quality (default: "
                        "measured now, the best of three launches of this interpreter; 0: the search alone)")
    p.add_argument("--workdir", default=None, metavar="DIR",
                   help="keep each run's database here (default: a temporary directory)")
    add_verbosity(p)
    return p


def run(args: argparse.Namespace) -> int:
    setup_logging(args)
    try:
        task = make_task(args.workload, parse_params(args.param), args.target)
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        for p in policies:
            try:
                get_policy(p)
            except (KeyError, ValueError) as e:
                raise UsageError(str(e).strip("'\"")) from None
        try:
            seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        except ValueError:
            raise UsageError(f"--seeds must be integers separated by commas, got {args.seeds!r}") from None
        models = [m.strip() for m in (args.cost_models or "").split(",") if m.strip()]
        unknown = [m for m in models if m not in COST_MODELS]
        if unknown:
            raise UsageError(f"unknown cost model {unknown[0]!r}; use {', '.join(COST_MODELS)}")
        args.models = {m: m for m in models} or None
        if args.startup is not None and not args.startup >= 0:
            raise UsageError(f"--startup must be 0 or more seconds, got {args.startup}")
        if not policies or not seeds or args.trials < 1:
            raise UsageError("give at least one policy, one seed and --trials >= 1")
        if task.target.kind == "cuda":
            check_gpu_here("race on one with an NVIDIA GPU")
    except UsageError as e:
        print(f"autosched race: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    # a local Ray: the race goes on in a watched child, so that a crash leaves no process behind
    return supervised(lambda: _race(args, task, policies, seeds), "race", enabled=args.backend in (None, "ray"))


def _race(args: argparse.Namespace, task: Any, policies: list[str], seeds: list[int]) -> int:
    threads = task.target.num_cores
    out = sys.stderr
    print(f"racing {', '.join(policies)} on {task.label}: {args.trials} trials x seeds {seeds}", file=out)
    ref = reference(task, threads)

    def progress(r: RaceRun, trials: int) -> None:
        n, t, g = r.curve[-1]
        share = f" = {g / ref.gflops:.2f} of the reference" if ref else ""
        print(f"  {r.policy} seed {r.seed}: [{n}/{trials}] {t:.0f} s  best {g:.1f} GFLOPS{share}", file=out,
              flush=True)

    runs = race(task, policies, args.trials, seeds, backend=args.backend, batch_size=args.batch_size,
                workdir=args.workdir, progress=None if args.quiet else progress, cost_models=args.models,
                measure_default=not args.from_scratch, startup=args.startup)
    for r in runs:
        if r.error:
            print(f"  {r.policy} seed {r.seed} failed: {r.error}", file=out)
    if args.json:
        print(json.dumps({"task": task.label, "trials": args.trials, "reference": asdict(ref) if ref else None,
                          "runs": [asdict(r) for r in runs]}, indent=1))
    else:
        print(table(runs, args.trials, ref))
    try:
        plot(args.plot, runs, args.trials, ref, f"autosched race: {task.label}")
        print(f"plot: {args.plot}", file=out)
    except ImportError:
        print("(no plot: matplotlib is not installed; pip install matplotlib)", file=out)
    return EXIT_FAILED if all(r.error for r in runs) else EXIT_OK
