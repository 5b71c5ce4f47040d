"""What every command shares: exit codes, the usage error, ``-q``/``-v`` and logging, argparse types for
numbers, durations and NAME=VALUE parameters, the task a command names, and running a command's work in a
supervised child process so that nothing it started outlives it."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import json
import logging
import math
import os
import signal
import sys
import traceback
from typing import Any

import psutil

from autosched.measure.engine import remove_cache_dirs_of
from autosched.runtime.cuda_driver import CUDAError, device_info
from autosched.target import check_target
from autosched.task import Task
from autosched.workloads import get_workload

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


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


def first_line(e: BaseException) -> str:
    """The first line of an error's message (drivers append hints and links on later lines)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def make_task(workload: str, params: dict[str, Any], target: str) -> Any:
    """The task, or a UsageError naming the valid workloads or parameters."""
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


def check_gpu_here(way_out: str) -> None:
    """A cuda task's candidates run where the workers are: on this machine's GPU, which must be there."""
    try:
        device_info()
    except CUDAError as e:
        raise UsageError(f"--target cuda: {e}. The candidates run on this machine: {way_out}") from None


def supervised(work: Any, command: str, enabled: bool = True) -> int:
    """Run ``work()`` (returns an exit code) in a forked child, wait for it, then end every process the run
    left behind: the local Ray's daemons and workers that a crash (LLVM aborting, a segmentation fault) or an
    abrupt exit does not stop, and the temporary library directories of a child killed by a signal. This
    process becomes the "subreaper" of what the child starts (Linux), so those orphans stay its descendants
    and are found (psutil) however they regrouped. Ctrl-C reaches the child as before (same process group;
    ignored here); SIGTERM and SIGHUP are passed on to it. A child that died of a signal is said in one line
    (exit 1). Without ``fork``, or not ``enabled``, ``work()`` runs here."""
    ray = sys.modules.get("ray")
    if not enabled or not hasattr(os, "fork") or (ray is not None and ray.is_initialized()):
        return work()  # (a Ray this process already runs, a caller's, is used here: it does not survive a fork)
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
            traceback.print_exc()
        finally:
            try:
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
        remove_cache_dirs_of(pid)
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
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, int(on), 0, 0, 0) == 0  # 36: PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False

