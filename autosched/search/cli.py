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
import contextlib
import json
import logging
import math
import os
import signal
import socket
import sys
import time
from typing import Any

from autosched.errors import ClusterError, ClusterLost

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

log = logging.getLogger("autosched.cli")


class UsageError(Exception):
    """The command as given cannot run; the message is the one line the user sees (exit 2)."""


def add_verbosity(p: argparse.ArgumentParser, suppress: bool = False) -> None:
    """``-q`` / ``-v`` (repeatable), the same on every command. ``suppress``: on an action of a command that
    has them too (``db -v stats`` and ``db stats -v`` both work)."""
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS if suppress else 0,
                   help="more detail: -v logs each step and shows tracebacks, -vv debug logging")
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS if suppress else False,
                   help="less: no progress display, errors and results only")


def setup_logging(args: argparse.Namespace) -> None:
    level = logging.WARNING
    if getattr(args, "verbose", 0) >= 2:
        level = logging.DEBUG
    elif getattr(args, "verbose", 0) == 1:
        level = logging.INFO
    elif getattr(args, "quiet", False):
        level = logging.ERROR
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)
    logging.getLogger("autosched").setLevel(level)


def at_least(lo: float, kind: type = int) -> Any:
    """An argparse ``type=``: a number of ``kind`` not below ``lo``. argparse's one error line then names the
    flag as the user wrote it and the value ("argument --trials: must be at least 1, got -3"), exit 2."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if not value >= lo or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {text}")
        return value

    parse.__name__ = "integer" if kind is int else "number"  # what argparse calls it in its messages
    return parse


def above_zero(text: str) -> float:
    """An argparse ``type=``: seconds, more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def duration(text: str) -> float:
    """An argparse ``type=``: seconds of ``90``, ``90s``, ``20m``, ``1.5h``."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_params(items: list[str], flag: str = "--param") -> dict[str, Any]:
    """``["M=512", "layout=NHWC"]`` -> ``{"M": 512, "layout": "NHWC"}`` (values are JSON when they parse)."""
    params: dict[str, Any] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"{flag} takes NAME=VALUE, got {item!r}")
        try:
            params[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[name.strip()] = value
    return params


def make_task(workload: str, params: dict[str, Any], target: str) -> Any:
    """The task, or a UsageError naming the valid workloads or parameters."""
    from autosched.target import check_target
    from autosched.task import Task
    from autosched.workloads import get_workload

    try:
        check_target(target)  # an unknown -mcpu would make LLVM abort the process mid-run
    except Exception as e:  # noqa: BLE001 - any parse failure of a target string is a usage error
        raise UsageError(f"--target {target!r}: {e}") from None
    try:
        wl = get_workload(workload)
        canonical = wl.canonical_args(params)
    except KeyError as e:
        raise UsageError(str(e.args[0]) if e.args else str(e)) from None
    except TypeError as e:
        raise UsageError(str(e)) from None
    bad = wl.check(canonical)
    if bad:  # found here, named by parameter, not later in the schedule space's words
        named = [(f"--param {p}={params[p]}" if p in params else f"{p}={canonical[p]} (its default)", why)
                 for p, why in bad]
        raise UsageError(f"workload {workload}: " + "; ".join(f"{p}: {why}" for p, why in named))
    try:
        task = Task(workload, params, target)
        _ = task.workload_key  # builds the computation: bad parameter values fail here, not mid-run
    except KeyError as e:
        raise UsageError(str(e.args[0]) if e.args else str(e)) from None
    except TypeError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(f"workload {workload}: {e}") from None
    return task


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
    from autosched.database import Database, DatabaseError

    try:
        return Database(url)
    except (DatabaseError, OSError, ValueError) as e:
        raise UsageError(f"cannot open the tuning database: {first_line(e)}") from None


def first_line(e: BaseException) -> str:
    """The first line of an error's message (drivers append hints and links on later lines)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _policy(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The policy class of ``--policy`` and its ``--policy-option`` values, or a UsageError naming the valid ones."""
    from autosched.search.policy import check_policy_options, get_policy

    options = parse_params(args.policy_option, "--policy-option")
    try:
        policy = get_policy(args.policy)
        check_policy_options(policy, options)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return policy, options


# ------------------------------------------------------------------------------- signals
class StopOnSignal:
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


def parse_duration(text: str) -> float:
    """Seconds of ``90``, ``90s``, ``20m``, ``1.5h``; a ValueError that says what is expected otherwise.
    (Hand-written on purpose: three suffixes do not need a dependency, and the libraries that parse
    durations accept forms, ``1:30`` or ``P1D``, that would read oddly in a tuning command.)"""
    t = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    try:
        seconds = float(t[:-1] if scale else t) * (scale or 1)
    except ValueError:
        raise ValueError(f"expected a duration such as 90s, 20m or 1.5h, got {text!r}") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"must be a positive duration, got {text!r}")
    return seconds


class TimeBudget:
    """A tune callback (and ``should_stop`` of the task scheduler) that ends the run once ``seconds`` passed."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.time() + seconds

    def spent(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        if self.spent():
            state.stop_reason = "the time budget is spent"


class SharedWork:
    """A tune callback that adds up, over the runs of one command, what other tuners on the same database
    did for it: proposals they had measured (not measured here) and candidates both measured at once."""

    def __init__(self) -> None:
        self.shared = 0
        self.raced = 0
        self.states: dict[Any, Any] = {}

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        pass

    def on_end(self, state: Any) -> None:
        self.shared += state.shared
        self.raced += state.raced
        self.states[state.task] = state  # updated by tune after this: the re-measured best, and why it moved

    def summary(self) -> str:
        """The summary's line ("" when no other tuner was met)."""
        parts = []
        if self.shared:
            parts.append(f"{self.shared} proposals were already measured by another run (taken from the database, "
                         f"not measured again)")
        if self.raced:
            parts.append(f"{self.raced} candidates were measured here and by another run at the same moment (the "
                         f"record stored first is kept)")
        return "shared database: " + "; ".join(parts) if parts else ""


class AppendLog:
    """A tune callback that appends each batch's records to a JSON-lines log (one write per batch)."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def __call__(self, state: Any, inputs: Any, results: Any) -> None:
        from autosched.database.record import TuningRecord

        lines = [TuningRecord.from_measurement(inp.task, inp.trace, res).dumps() + "\n"
                 for inp, res in zip(inputs, results)]
        self.fh.write("".join(lines))
        self.fh.flush()


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
        from autosched.target import check_target

        try:
            check_target(args.target)
        except ValueError as e:
            raise UsageError(f"--target {args.target!r}: {e}") from None
        tasks, weights = _model_tasks(args)
    else:
        tasks, weights = [make_task(args.workload, parse_params(args.param), args.target)], [1.0]
    policy_cls, options = _policy(args)
    if args.ray_address is None and args.backend in (None, "ray"):
        from autosched.measure.ray_backend import ray_address

        args.ray_address = ray_address()  # $AUTOSCHED_RAY_ADDRESS: checked like the option
    if args.ray_address:
        _check_ray_address(args.ray_address)
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


def supervised(work: Any, command: str, enabled: bool = True) -> int:
    """Run ``work()`` (returns an exit code) in a forked child, wait for it, then end every process the run
    left behind: the local Ray's daemons and workers that a crash (LLVM aborting, a segmentation fault) or an
    abrupt exit does not stop. This process becomes the "subreaper" of what the child starts (Linux), so
    those orphans stay its descendants and are found (psutil) however they regrouped. Ctrl-C reaches the
    child as before (same process group; ignored here); SIGTERM and SIGHUP are passed on to it. A child that
    died of a signal is said in one line (exit 1). Without ``fork``, or not ``enabled``, ``work()`` runs here."""
    ray = sys.modules.get("ray")
    if not enabled or not hasattr(os, "fork") or (ray is not None and ray.is_initialized()):
        return work()  # (a Ray this process already runs, a caller's, is used here: it does not survive a fork)
    import psutil

    subreaper = _set_subreaper(True)
    before = {q.pid for q in psutil.Process().children(recursive=True)}  # a caller's own: not the run's
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the run; it never returns into the caller's code
        code = EXIT_FAILED
        try:
            code = work()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else EXIT_FAILED
        except BaseException:  # noqa: BLE001 - printed, then the child ends with the run's failure code
            import traceback

            traceback.print_exc()
        finally:
            try:
                import atexit

                atexit._run_exitfuncs()  # Ray's own shutdown, as a normal exit runs it
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)

    def forward(signum: int, _frame: Any) -> None:
        if signum != signal.SIGINT:  # Ctrl-C reached the child with this process: nothing to pass on
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    saved = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            for _ in range(3):  # again, for what a dying daemon started meanwhile
                left = [q for q in psutil.Process().children(recursive=True)  # none, when the run ended well
                        if q.pid not in before]
                if not left:
                    break
                for proc in left:
                    with contextlib.suppress(psutil.Error):
                        proc.kill()
                psutil.wait_procs(left, timeout=10)  # reaped: they were adopted here
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
            if subreaper:
                _set_subreaper(False)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        print(f"autosched {command}: error: the run died of {name} (a crash in native code: the compiler or a "
              f"driver); its workers are stopped. What was measured before is in the database: run the same "
              f"command again to resume, with -v to see more", file=sys.stderr, flush=True)
        return EXIT_FAILED
    return os.WEXITSTATUS(status)


def _set_subreaper(on: bool) -> bool:
    """Make this process adopt its descendants' orphans (Linux ``PR_SET_CHILD_SUBREAPER``); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, int(on), 0, 0, 0) == 0  # 36: PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _model_tasks(args: argparse.Namespace) -> tuple[list, list[float]]:
    try:
        from autosched.relay.cli import load_model_tasks, parse_shapes
    except ImportError as e:
        raise UsageError(f"--model needs the graph level (autosched.relay): {e}") from None
    try:
        shapes = parse_shapes(args.shape)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return load_model_tasks(args.model, shapes, args.target)


def _tune(args: argparse.Namespace, tasks: list, weights: list[float], policy_cls: Any, options: dict, db: Any,
          log_fh: Any, out: Any) -> int:
    from autosched.measure.measurer import Measurer
    from autosched.measure.peak import PeakWatch
    from autosched.measure.runner import RunConfig
    from autosched.search.progress import TuneProgress
    from autosched.search.scheduler import tune_tasks
    from autosched.search.tune import TuningFailed, tune

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
    print(f"database: {db}   workers: {where}   policy: {policy_cls.name}", file=out, flush=True)
    t0 = time.time()
    budget = TimeBudget(args.budget)
    with StopOnSignal(out) as stopper:
        try:
            measurer = Measurer(backend=args.backend, config=RunConfig(timeout=args.timeout, num_threads=args.threads),
                                n_builders=args.workers, build_timeout=args.build_timeout, seed=args.seed,
                                address=args.ray_address)
        except ImportError as e:
            raise UsageError(str(e)) from None
        startup = time.time() - t0
        try:
            shared = SharedWork()
            callbacks: list[Any] = [stopper, budget, shared]
            if not args.quiet:
                callbacks.insert(0, TuneProgress(peak, stream=out, cutoff_factor=measurer.timeout_factor))
            if log_fh is not None:
                callbacks.append(AppendLog(log_fh))
            common = dict(policy=policy_cls, cost_model=args.cost_model, database=db, measurer=measurer,
                          batch_size=args.batch_size, seed=args.seed, early_stopping=args.early_stopping,
                          callbacks=callbacks, measure_default=True, policy_options=options)
            try:
                if len(tasks) == 1:
                    tune(tasks[0], args.trials, **common)
                else:
                    # rounds small enough that every task gets one when the budget allows it
                    rounds = max(args.batch_size, min(32, args.trials // len(tasks)))
                    tune_tasks(tasks, weights, args.trials, round_trials=rounds,
                               should_stop=lambda: stopper.signal is not None or budget.spent(), **common)
            except TuningFailed as e:
                print(f"autosched tune: error: {e}", file=sys.stderr)
                return EXIT_FAILED
        finally:
            measurer.close()
    compare = None if args.no_compare or stopper.signal or (args.quiet and not args.json) else threads
    _summary(tasks, db, peak, time.time() - t0, stopper.signal, out, measurer, args.db, startup, compare,
             shared.summary(), shared.states, args.json)
    if stopper.signal is not None:
        print("interrupted: the measured records are committed. Run the same command again to resume.",
              file=out, flush=True)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _peak_missing(threads: int, target: Any) -> bool:
    from autosched.measure.peak import cached_peak

    try:
        return cached_peak(threads, target if target.kind == "cuda" else None) is None
    except Exception:  # noqa: BLE001 - no GPU here: nothing will be measured either
        return False


def _summary(tasks: list, db: Any, peak: Any, elapsed: float, interrupted: str | None, out: Any,
             measurer: Any = None, db_arg: str | None = None, startup: float = 0.0,
             compare_threads: int | None = None, shared: str = "", states: dict | None = None,
             as_json: bool = False) -> None:
    """The closing lines. On ``out`` (standard error): how long it took, where the time went, what other
    tuners on the database did, what to run next. On standard output, the results: per task, the best kernel
    (the database's best after the final re-measure: the figure ``db best`` and ``report`` show too, with
    the run's own figure where it differed), the vendor library timed now on its shape (``compare_threads``),
    and what happened to the candidates measured; with ``as_json``, one JSON object per task instead."""
    from autosched.database.cli import task_flags
    from autosched.database.query import trusted
    from autosched.measure.peak import share_of_peak
    from autosched.result import ResultFlag, count_summary
    from autosched.search.progress import fewer_flops

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
        ref = _vendor(task, compare_threads) if compare_threads and best else None
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
                    "speedup": ref[0].seconds / best[0].cost},
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


def _vendor(task: Any, threads: int) -> tuple[Any, str] | str | None:
    """The vendor library to compare with, timed now on ``threads`` threads: (figure, how it was chosen), or
    a line saying why there is none (what to install), or None when no library expresses the task."""
    from autosched.search.vendor import missing_vendor, vendor_reference

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


def _non_default(task: Any, name: str, value: Any) -> bool:
    """Whether a workload parameter differs from the workload's default (only those need naming)."""
    import inspect

    try:
        default = inspect.signature(task.workload.func).parameters[name].default
    except (KeyError, TypeError, ValueError, AttributeError):
        return True
    return default is inspect.Parameter.empty or default != value
