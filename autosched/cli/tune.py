"""``autosched tune``: tune one workload (or every task of a model) from the command line.

    autosched tune --workload conv2d --trials 1000
    autosched tune --workload matmul --param M=512 --param N=512 --param K=512 --trials 200 --policy random
    autosched tune --model resnet18.onnx --shape data=1,3,224,224 --trials 2000

Defaults: the embedded SQLite database (``$AUTOSCHED_DB``, else the user data directory), a local Ray,
the evolutionary policy with the XGBoost cost model. Running the same command again resumes: the records
already stored warm the model and are never measured again.

Results go to standard output (--json: one JSON object per task), progress and messages to standard error.

Exit codes: 0 done; 1 the run failed (every candidate failed, the cluster was lost, or the run crashed: one
line says so, and no process it started is left behind); 2 bad usage, found before anything starts (an
unknown workload, policy or parameter, a value out of its range, an unknown -mcpu, a database, Ray cluster
or log file that cannot be used); 130 interrupted (Ctrl-C or SIGTERM: the batch in flight is finished and
committed first; a second Ctrl-C stops at once).
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import socket
import sys
import time
from typing import Any

import psutil

from autosched.cli.build import load_model_tasks, parse_shapes
from autosched.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    above_zero,
    add_verbosity,
    at_least,
    check_gpu_here,
    duration,
    first_line,
    make_task,
    parse_params,
    setup_logging,
    supervised,
)
from autosched.cli.db import task_flags
from autosched.errors import ClusterError, ClusterLost
from autosched.measure.measurer import Measurer
from autosched.measure.peak import PeakWatch, cached_peak, share_of_peak
from autosched.measure.runner import RunConfig
from autosched.result import ResultFlag, count_summary, summarize_errors
from autosched.search.callbacks import AppendLog, BestOverTime, SharedWork, StopCondition, TimeBudget
from autosched.search.policy import check_policy_options, get_policy
from autosched.search.progress import TuneProgress, fewer_flops
from autosched.search.scheduler import tune_tasks
from autosched.search.tune import TuningFailed, tune
from autosched.search.vendor import missing_vendor, vendor_reference
from autosched.target import check_target


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("tune", help="tune a workload or every task of a model, with live progress",
                       description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", help="a registered workload (see `autosched workloads`)")
    what.add_argument("--model", metavar="FILE.onnx", help="tune every task of an ONNX model")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a workload parameter (repeatable), e.g. --param CI=128")
    p.add_argument("--shape", action="append", default=[], metavar="INPUT=D0,D1,...",
                   help="with --model: an input's shape (repeatable)")
    p.add_argument("--trials", type=at_least(1), default=None,
                   help="new candidates to measure in this run (default 200; no limit but the --time-budget)")
    p.add_argument("--time-budget", type=duration, default=None, metavar="DURATION",
                   help="stop after this long (90s, 20m, 1.5h), after the batch in flight; with --model, the task "
                        "scheduler spends it where the model gains most (--trials is then only a ceiling)")
    p.add_argument("--policy", default="evolutionary",
                   help="search policy: random, grid, annealing, evolutionary or an installed one "
                        "(default evolutionary)")
    p.add_argument("--policy-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of the policy (repeatable), e.g. --policy-option population=64")
    p.add_argument("--cost-model", choices=["xgb", "pretrained", "transfer", "random"], default=None,
                   help="cost model for the policies that use one: xgb (XGBoost learning from this task's "
                        "records only), pretrained (XGBoost starting from the model shipped with autosched), "
                        "transfer (XGBoost first trained on the database's records of other tasks) or random "
                        "(default: pretrained for a task with no records in the database, else xgb)")
    p.add_argument("--db", default=None, metavar="URL_OR_PATH",
                   help="tuning database: sqlite path, postgresql:// URL or .jsonl log "
                        "(default: $AUTOSCHED_DB, else the user data directory)")
    p.add_argument("--log", default=None, metavar="FILE.jsonl", help="also append every record to this JSON-lines log")
    p.add_argument("--target", default="llvm", help="target, e.g. 'llvm -mcpu=sapphirerapids' (default: this host)")
    p.add_argument("--seed", type=at_least(0), default=0, help="random seed of the search (default 0)")
    p.add_argument("--backend", choices=["ray", "local"], default=None,
                   help="where candidates are built and timed: ray (default) or local processes")
    p.add_argument("--workers", type=at_least(1), default=None, help="parallel builders (default: the cores)")
    p.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                   help="join this Ray cluster instead of starting a local one")
    p.add_argument("--timeout", type=above_zero, default=10.0,
                   help="seconds one run of a candidate may take (default 10)")
    p.add_argument("--build-timeout", type=above_zero, default=30.0, help="seconds one build may take (default 30)")
    caches = p.add_mutually_exclusive_group()
    caches.add_argument("--cold-cache", dest="cache", action="store_const", const="cold", default=None,
                        help="time candidates with cold caches: the arguments evicted from the CPU caches before "
                             "each (single) run, as a kernel finds them inside a model; on a GPU the L2 flushed "
                             "before each launch, each launch timed alone (default with --model on a CPU)")
    caches.add_argument("--warm-cache", dest="cache", action="store_const", const="warm",
                        help="time candidates with warm caches: runs repeated back to back (default with --workload, "
                             "and on a GPU)")
    p.add_argument("--batch-size", type=at_least(1), default=16, help="candidates per measured batch (default 16)")
    p.add_argument("--early-stopping", type=at_least(1), default=None, metavar="N",
                   help="stop after N trials without a better candidate")
    p.add_argument("--threads", type=at_least(1), default=None, help="threads the kernels use (default: all cores)")
    p.add_argument("--no-compare", action="store_true",
                   help="do not time the vendor library (onnxruntime, numpy's BLAS) on the tuned shape at the end")
    p.add_argument("--json", action="store_true",
                   help="the results as JSON on standard output (one object per task), for scripts")
    add_verbosity(p)
    return p


# ------------------------------------------------------------------------------- checks before tuning
def _check_ray_address(address: str, timeout: float = 5.0) -> None:
    """Fail fast with a clear line when a Ray cluster's address does not answer (ray.init would wait long)."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--ray-address takes HOST:PORT (or ray://HOST:PORT, or auto), got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {e.strerror or e}") from None


def _open_log(path: str) -> Any:
    try:
        return open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the run, closed in run()
    except OSError as e:
        raise UsageError(f"cannot write the log {path}: {e.strerror or e}") from None


def _open_db(url: str | None) -> Any:
    from autosched.database import Database, DatabaseError  # SQLAlchemy: when a database is opened

    try:
        return Database(url)
    except (DatabaseError, OSError, ValueError) as e:
        raise UsageError(f"cannot open the tuning database: {first_line(e)}") from None


def _policy(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The policy class of ``--policy`` and its ``--policy-option`` values, or a UsageError naming the valid ones."""
    options = parse_params(args.policy_option, "--policy-option")
    try:
        policy = get_policy(args.policy)
        check_policy_options(policy, options)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return policy, options


# ------------------------------------------------------------------------------- signals
class StopOnSignal(StopCondition):
    """First SIGINT/SIGTERM: finish the batch in flight, commit it, stop. Second: stop now (KeyboardInterrupt).
    Also a tune callback that ends the run once a signal came."""

    def __init__(self, out: Any) -> None:
        self.signal: str | None = None
        self.out = out
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signal is not None:
            raise KeyboardInterrupt(f"second {name}")
        self.signal = name
        print(f"\n{name}: stopping after the batch in flight (its results are kept); "
              f"press Ctrl-C again to stop now", file=self.out, flush=True)

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        if self.signal is not None:
            state.stop_reason = f"interrupted by {self.signal}"
            state.interrupted = True


# ------------------------------------------------------------------------------- the command
def run(args: argparse.Namespace) -> int:
    """Run ``autosched tune``; returns the exit code.

    Everything the user gave is checked first (target and CPU, workload parameters, flags, database, log,
    cluster address), before Ray starts or a kernel is built. The run itself then goes in a child process
    of its own process group (:func:`supervised`) when it starts a local Ray, so that nothing the run
    started outlives the command, even when native code crashes it."""
    setup_logging(args)
    try:
        tasks, weights, policy_cls, options = _handled(args, lambda: _prepare(args))
    except _Failed as e:
        return e.code
    local_ray = args.backend in (None, "ray") and not args.ray_address
    return supervised(lambda: _code(_handled, args, lambda: _run(args, tasks, weights, policy_cls, options)),
                      "tune", enabled=local_ray)


class _Failed(Exception):
    """An exit code, raised by :func:`_handled` once the error's line is printed."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _code(handled: Any, args: argparse.Namespace, fn: Any) -> int:
    try:
        return handled(args, fn)
    except _Failed as e:
        return e.code


def _handled(args: argparse.Namespace, fn: Any) -> Any:
    """``fn()``, with each way it can fail turned into its one line on stderr and its exit code (_Failed)."""
    try:
        return fn()
    except _Failed:  # (already said)
        raise
    except UsageError as e:
        print(f"autosched tune: error: {e}", file=sys.stderr)
        raise _Failed(EXIT_USAGE) from None
    except KeyboardInterrupt:
        print("autosched tune: stopped at once; what was measured before this batch is in the database. "
              "Run the same command again to resume.", file=sys.stderr)
        raise _Failed(EXIT_INTERRUPTED) from None
    except ClusterError as e:  # the cluster's doing, not a bug: one line, and how to go on
        resume = (". What was measured before is in the database: run the same command again (with the new "
                  "address if the cluster moved) to resume") if isinstance(e, ClusterLost) else ""
        print(f"autosched tune: error: {e}{resume}", file=sys.stderr, flush=True)
        raise _Failed(EXIT_FAILED) from None
    except Exception as e:  # noqa: BLE001 - one clear line, the traceback only with -v
        if args.verbose:
            raise
        print(f"autosched tune: error: {type(e).__name__}: {e} (run with -v for the traceback)", file=sys.stderr)
        raise _Failed(EXIT_FAILED) from None


def _prepare(args: argparse.Namespace) -> tuple[list, list[float], Any, dict[str, Any]]:
    """Check everything the command was given; nothing is started and no file is left behind by a bad one."""
    args.budget = args.time_budget  # seconds (argparse read the duration)
    if args.trials is None:
        args.trials = 200 if args.budget is None else 1_000_000  # a budget alone decides when to stop
    if args.model:
        try:
            check_target(args.target)
        except ValueError as e:
            raise UsageError(f"--target {args.target!r}: {e}") from None
        tasks, weights = _model_tasks(args)
        if not tasks:  # every kernel elementwise or a gather: their default schedules are what a build uses
            print(f"autosched tune: {args.model} has no kernel to tune (no convolution, matrix product, pooling or "
                  f"other reduction: its kernels are elementwise, gathers and copies, which run on their default "
                  f"schedules); build it with `autosched build --model {args.model}`")
            raise _Failed(EXIT_OK)
    else:
        tasks, weights = [make_task(args.workload, parse_params(args.param), args.target)], [1.0]
    policy_cls, options = _policy(args)
    if args.ray_address is None and args.backend in (None, "ray"):
        from autosched.measure.ray_backend import ray_address  # Ray: only when the run will use it

        args.ray_address = ray_address()  # $AUTOSCHED_RAY_ADDRESS: checked like the option
    if args.ray_address:
        _check_ray_address(args.ray_address)
    elif tasks[0].target.kind == "cuda":
        check_gpu_here("tune on one with an NVIDIA GPU, or give --ray-address of a Ray cluster whose workers have one")
    if args.log:
        _open_log(args.log).close()
    _open_db(args.db).close()  # opened again where the run goes on (an SQLite handle is not carried over a fork)
    return tasks, weights, policy_cls, options


def _run(args: argparse.Namespace, tasks: list, weights: list[float], policy_cls: Any,
         options: dict[str, Any]) -> int:
    log_fh = _open_log(args.log) if args.log else None
    db = _open_db(args.db)
    try:
        return _tune(args, tasks, weights, policy_cls, options, db, log_fh, sys.stderr)
    finally:
        db.close()
        if log_fh is not None:
            log_fh.close()


def _model_tasks(args: argparse.Namespace) -> tuple[list, list[float]]:
    try:
        shapes = parse_shapes(args.shape)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return load_model_tasks(args.model, shapes, args.target)


def _tune(args: argparse.Namespace, tasks: list, weights: list[float], policy_cls: Any, options: dict, db: Any,
          log_fh: Any, out: Any) -> int:
    target = tasks[0].target
    gpu = target.kind == "cuda"
    threads = args.threads or target.num_cores
    peak = None
    if not args.quiet:
        if _peak_missing(threads, target):
            what = "the GPU's fp32 peak" if gpu else f"this machine's fp32 peak ({threads} threads)"
            how = "`autosched peak --target cuda`" if gpu else "`autosched peak`"
            print(f"measuring {what} once; later runs read it from the cache ({how})", file=out, flush=True)
        try:
            peak = PeakWatch(threads, target=target if gpu else None)
        except Exception as e:  # noqa: BLE001 - the share of peak is cosmetic; the GPU is checked when measuring
            print(f"(no peak figure: {e})", file=out, flush=True)
    where = "Ray at " + args.ray_address if args.ray_address else (args.backend or "ray") + " (this machine)"
    timing = ("cold caches (as inside a model; --warm-cache to repeat runs back to back)" if cold_cache(args, gpu)
              else "warm caches")
    print(f"database: {db}   workers: {where}   policy: {policy_cls.name}   timing: {timing}", file=out, flush=True)
    t0 = time.time()
    budget = TimeBudget(args.budget)
    with StopOnSignal(out) as stopper:
        try:
            config = RunConfig(timeout=args.timeout, num_threads=args.threads)
            if cold_cache(args, gpu):  # a CPU repeat is one run after the flush; on a GPU every launch follows one
                config = config.replace(flush_cache=True, **({} if gpu else dict(number=1, min_repeat_ms=0.0)))
            measurer = Measurer(backend=args.backend, config=config,
                                n_builders=args.workers, build_timeout=args.build_timeout, seed=args.seed,
                                address=args.ray_address)
        except ImportError as e:
            raise UsageError(str(e)) from None
        startup = time.time() - t0
        try:
            shared, history = SharedWork(), BestOverTime()
            callbacks: list[Any] = [stopper, budget, shared, history]
            if not args.quiet:
                callbacks.insert(0, TuneProgress(peak, stream=out, cutoff_factor=measurer.timeout_factor))
            if log_fh is not None:
                callbacks.append(AppendLog(log_fh))
            common = dict(policy=policy_cls, cost_model=args.cost_model, database=db, measurer=measurer,
                          batch_size=args.batch_size, seed=args.seed, early_stopping=args.early_stopping,
                          callbacks=callbacks, measure_default=True, policy_options=options)
            try:
                if len(tasks) == 1:
                    found = tune(tasks[0], args.trials, **common) is not None
                else:
                    # rounds small enough that every task gets one when the budget allows it
                    rounds = max(args.batch_size, min(32, args.trials // len(tasks)))
                    progress = tune_tasks(tasks, weights, args.trials, round_trials=rounds,
                                          should_stop=lambda: stopper.signal is not None or budget.spent(), **common)
                    found = any(math.isfinite(p.best_cost) for p in progress)
                if not found and stopper.signal is None:  # (a run stopped by the user says so itself)
                    tried = [r.result for t in tasks for r in db.records(t)]
                    raise TuningFailed(f"no candidate could be measured: {summarize_errors(tried)}" if tried else
                                       "no candidate was measured before the time budget ended")
            except TuningFailed as e:
                print(f"autosched tune: error: {e}", file=sys.stderr)
                return EXIT_FAILED
        finally:
            measurer.close()
    compare = None if args.no_compare or stopper.signal or (args.quiet and not args.json) else threads
    _summary(tasks, db, peak, time.time() - t0, stopper.signal, out, measurer, args.db, startup, compare,
             shared.summary(), shared.states, args.json, history)
    if stopper.signal is not None:
        print("interrupted: the measured records are committed. Run the same command again to resume.",
              file=out, flush=True)
        return EXIT_INTERRUPTED
    return EXIT_OK


def cold_cache(args: argparse.Namespace, gpu: bool) -> bool:
    """Whether candidates are timed with cold caches: as asked, else for a model's kernels on a CPU. Inside a
    model a kernel's weights and inputs were evicted by the layers before it; timed warm (alone, repeated), the
    picks of GPT-2 small's kernels ran 11% slower in the model than its default schedules, timed cold 1% faster
    (benchmarks/model_ranking.py, Zen 4; docs/measure.md)."""
    return args.cache == "cold" if args.cache else bool(args.model) and not gpu


def _peak_missing(threads: int, target: Any) -> bool:
    try:
        return cached_peak(threads, target if target.kind == "cuda" else None) is None
    except Exception:  # noqa: BLE001 - no GPU here: nothing will be measured either
        return False


def _summary(tasks: list, db: Any, peak: Any, elapsed: float, interrupted: str | None, out: Any,
             measurer: Any = None, db_arg: str | None = None, startup: float = 0.0,
             compare_threads: int | None = None, shared: str = "", states: dict | None = None,
             as_json: bool = False, history: BestOverTime | None = None) -> None:
    """The closing lines. On ``out`` (standard error): how long it took, where the time went, what other
    tuners on the database did, what to run next. On standard output, the results: per task, the best kernel
    (the database's best after the final re-measure: the figure ``db best`` and ``report`` show too, with
    the run's own figure where it differed), the vendor library timed now on its shape (``compare_threads``),
    and what happened to the candidates measured; with ``as_json``, one JSON object per task instead."""
    from autosched.database.query import trusted  # SQLAlchemy: loaded once a database is read


    res = sys.stdout
    states = states or {}
    factor = getattr(measurer, "timeout_factor", None)
    print(f"{'interrupted' if interrupted else 'done'} in {elapsed:,.1f} s", file=out)
    where = _time_spent(elapsed, startup, getattr(measurer, "stats", None))
    if where:
        print(where, file=out)
    runner = getattr(measurer, "runner", None)
    if runner is not None and runner.turn_waits:
        print(f"{runner.turn_waits} candidates waited {runner.turn_wait_seconds:,.1f} s in all for other "
              f"tuners' measurements on this machine (measurements take turns)", file=out)
    if shared:
        print(shared, file=out)
    stats = {(r["key"], r["target"]): r for r in db.stats()}
    peak_g = getattr(peak, "gflops", peak)
    if len(tasks) > 1 and not as_json:
        print(f"{'kernel':<52} {'weight':>6} {'records':>8} {'best us':>10} {'GFLOPS':>8}", file=res)
    for task in tasks:
        best = db.best(task, k=1)
        row = stats.get((task.workload_key, task.target.key), {"records": 0, "ok": 0, "errors": {}, "flags": {}})
        n = row["records"]
        counts = count_summary(n, row["errors"], row["flags"].get(ResultFlag.NOISY, 0), factor)
        state = states.get(task)
        g = best[0].gflops(task.flop) if best else None
        during = (task.flop / state.best_in_run / 1e9 if state is not None and state.remeasure_note
                  and math.isfinite(state.best_in_run) else None)
        ref = vendor_comparison(task, compare_threads) if compare_threads and best else None
        reached = ({q: time_to_quality(history, task, ref[0].seconds, q) for q in QUALITY}
                   if isinstance(ref, tuple) and history is not None else {})
        if as_json:
            print(json.dumps({
                "task": task.label, "workload": task.name, "params": task.args, "target": task.target.key,
                "best": None if not best else {
                    "record": best[0].id, "seconds": best[0].cost, "gflops": g,
                    "effective": fewer_flops(task), "trusted": trusted(best[0]),
                    "peak_gflops": peak_g, "during_run_gflops": during,
                    "remeasure": state.remeasure_note if state is not None else ""},
                "vendor": None if not isinstance(ref, tuple) else {
                    "library": ref[0].library, "seconds": ref[0].seconds, "gflops": ref[0].gflops,
                    "speedup": ref[0].seconds / best[0].cost,
                    # seconds from the command's start until the run's best reached that share of its speed
                    "time_to": {str(q): None if r is None else r[0] for q, r in reached.items()}},
                "records": n, "counts": counts, "database": str(db)}), file=res)
            continue
        if len(tasks) > 1:
            cost, gt = (f"{best[0].cost * 1e6:,.1f}", f"{g:.1f}" + ("*" if fewer_flops(task) else "")) if best \
                else ("-", "-")
            print(f"{task.label[:52]:<52} {getattr(task, 'weight', 1):>6} {n:>8} {cost:>10} {gt:>8}", file=res)
            continue
        if not best:
            print(f"{task.label}: no successful record ({counts})", file=res)
            continue
        if fewer_flops(task):
            share = " effective (the direct computation's flops over its time)"
        elif peak_g and math.isfinite(g):
            share = f" = {share_of_peak(g, peak_g)} of the {peak_g:.0f} GFLOPS peak"
        else:
            share = ""
        how = "" if interrupted else f", re-measured with {_remeasure_repeats(measurer)} longer repeats"
        print(f"{task.label}: best {best[0].cost * 1e6:,.1f} us, {g:.1f} GFLOPS{share} (record #{best[0].id}{how})",
              file=res)
        if during is not None and f"{during:.1f}" != f"{g:.1f}":
            print(f"  {during:.1f} GFLOPS during the run; {g:.1f} when re-measured: {state.remeasure_note}",
                  file=res)
        elif during is not None:  # the same record: nothing better to trust
            print(f"  not confirmed: {state.remeasure_note}", file=res)
        if not trusted(best[0]):
            print("  noisy: every successful record's timing was disturbed (another program was busy) or its "
                  "repeats disagree; tune again on a quieter machine for a figure to trust", file=res)
        if isinstance(ref, tuple):
            fig, how_chosen = ref
            print(f"  vs {fig.library} ({how_chosen}), timed now on {compare_threads} thread(s): "
                  f"{fig.seconds * 1e6:,.1f} us, {fig.gflops:.1f} GFLOPS; the tuned kernel is "
                  f"{fig.seconds / best[0].cost:.2f}x its speed", file=res)
            if reached:
                print("  time to quality, from the command's start by the run's own timings: " + ", ".join(
                    f"{q:.1f}x its speed " + ("not reached in this run" if r is None else
                                              f"after {r[0]:,.1f} s (trial {r[1]})") for q, r in reached.items()),
                      file=res)
        elif isinstance(ref, str):
            print(f"  {ref}", file=res)
        print(f"  {counts}", file=res)
    if len(tasks) > 1 and not as_json and any(fewer_flops(t) for t in tasks):
        print("* effective GFLOPS: the direct convolution's flops over the time of a Winograd kernel, which does "
              "fewer", file=res)
    print(f"records are in {db}", file=out if as_json else res, flush=True)
    if len(tasks) == 1:
        flags = task_flags(tasks[0].name, tasks[0].args)
        db_opt = f" --db {db_arg}" if db_arg else ""
        if len(stats) > 1:  # the database holds others: name this one
            db_opt += " " + flags
        print(f"next: `autosched db best{db_opt}` shows the best kernel; `autosched report{db_opt} "
              f"--plot {tasks[0].name}.png` plots the run", file=out, flush=True)
    else:
        print("next: `autosched db list` lists every kernel with its best; `autosched build --model ...` builds "
              "the model with them", file=out, flush=True)


#: the shares of the vendor library's speed whose time the summary gives
QUALITY = (0.9, 1.0)


def time_to_quality(history: BestOverTime, task: Any, vendor_seconds: float, share: float) -> tuple[float, int] | None:
    """(seconds since this process started, trials) when the run's best first reached ``share`` of the vendor
    library's speed; None when it never did."""
    hit = history.time_to(task, vendor_seconds, share)
    return None if hit is None else (hit[0] - psutil.Process().create_time(), hit[1])


def vendor_comparison(task: Any, threads: int) -> tuple[Any, str] | str | None:
    """The vendor library to compare with, timed now on ``threads`` threads: (figure, how it was chosen), or
    a line saying why there is none (what to install), or None when no library expresses the task."""
    try:
        ref = vendor_reference(task, threads)
    except Exception as e:  # noqa: BLE001 - a library's own failure must not cost the user the summary
        return f"no comparison: the vendor library failed on this computation ({first_line(e)})"
    if ref is not None:
        return ref, "the fastest library installed here on this computation, kept for it"
    install = missing_vendor(task)
    if install:
        return f"no comparison: no vendor library for this computation is installed ({install} to compare)"
    return None


def _time_spent(elapsed: float, startup: float, stats: Any) -> str:
    """Where a run's wall clock went: starting the workers, waiting for builds, timing, and the rest (the
    search and its cost model, the database, the final remeasure), with the cost of one candidate."""
    if stats is None or not stats.candidates:
        return ""
    built = max(1, stats.candidates - stats.builds_cached)
    rest = max(0.0, elapsed - startup - stats.wall_seconds)
    return (f"time: start-up {startup:,.1f} s, building {stats.build_wall_seconds:,.1f} s "
            f"({stats.build_seconds / built:.2f} s per candidate in a builder), timing {stats.run_wall_seconds:,.1f} s "
            f"({stats.run_seconds / stats.candidates:.2f} s per candidate), search, model, database and final "
            f"remeasure {rest:,.1f} s ({elapsed / stats.candidates:.2f} s per candidate in all)")


def _remeasure_repeats(measurer: Any) -> str:
    cfg = getattr(measurer, "remeasure_config", None)
    return str(cfg.repeat) if cfg is not None else "more"
