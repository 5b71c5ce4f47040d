"""Search policies against references that do not move: the vendor libraries and the fp32 peak, timed in this run.

    python benchmarks/bench_tuning.py [--workloads matmul1024 conv2d conv2d_256 depthwise]
        [--policies random annealing evolutionary ...] [--seeds 0 1 2 3 4] [--trials 200] [--threads 2]
        [--seconds 30 60 120] [--peers-python /tmp/autosched-peers/bin/python] [--out benchmarks/results] [--resume]

For each workload, first the references at ``--threads`` threads: every vendor library that computes it
(onnxruntime and numpy's BLAS in this process, :mod:`autosched.search.vendor`; numpy, PyTorch and
onnxruntime again in the peers' virtualenv through ``benchmarks/peer_kernels.py``, made by
``bash ../shared/peers/setup.sh``), each listed with its GFLOPS, and ``autosched peak``. The libraries are
timed against each other in alternating rounds, each block after a pause so that the worker threads of the
library timed before have parked, each keeping its best block median (``benchmarks/_timing.py``; the peers'
process is kept alive and times one block per turn, ``benchmarks/_peers.py``). That is done before the
workload's runs and again after them, and each library counts with its faster figure, so a moment of
disturbance does not move the reference: the fastest library. The tuned kernels are not timed in those rounds:
their figures are the tuner's own measurements during each run. Then every (policy, seed) run of
:func:`autosched.search.race.race`, seeds outermost, each from an empty database (local process workers,
batch 16, no final re-measurement), each saved to ``OUT/tuning.json`` as soon as it ends, so ``--resume``
continues a run that was cut off (a run that failed is a result and is not run again).

Prints, per workload and policy, the best so far as a share of the reference: the median over seeds and
[worst, best] seed, at 64 trials, at ``--trials`` and at each of ``--seconds``; the time to quality, seconds
of wall clock from the shell until the best is within 0.9x and 1.0x of the reference (each run counts the
start-up of a fresh ``autosched`` command, measured once, and its own workers' start); each model-guided policy
against random search at 64 trials (the ratio of the medians, and the per-seed ratios' range); and the
issues' goals for the default policy (0.9x within 20 s and 1.0x within 60 s from the shell, >= 3 trials/s;
at 64 trials >= 0.9 of the reference, at 200 >= 1.0, >= 1.2x random at 64). Draws
``OUT/tuning_WORKLOAD.png`` (share of the reference against trials and against seconds from the shell:
median line, band from the worst to the best seed) and writes everything, with the CPU, date and versions,
to ``OUT/tuning.json``.

Last, the cost model's ranking quality: an XGBoost model trained on the records of the random run of the
lowest seed ranks the records of the other runs (never seen in training), as pairwise ranking accuracy and
Kendall's tau; the runs' databases are kept in ``OUT/tuning-dbs`` for it. On a 2-core machine run it with
nothing else running; the full default takes hours.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import inspect
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from _peers import PeerError, PeerProcess, PeerSide
from _peers import timer as peer_aware_timer
from _timing import alternating_medians

import autosched
from autosched.database import Database
from autosched.measure import MeasureInput
from autosched.search.race import RaceRun, Reference, command_startup, race, seconds_to_quality
from autosched.search.race import plot as race_plot
from autosched.target import Target, host_cpu_name

HERE = Path(__file__).resolve().parent
WORKLOADS = {  # name -> (autosched workload, parameters); the first four are issue 24's
    "matmul1024": ("matmul", dict(M=1024, N=1024, K=1024)),
    "conv2d": ("conv2d", {}),  # the default: 1x64x56x56, 64 filters 3x3, stride 1, padding 1
    "conv2d_256": ("conv2d", dict(N=1, CI=256, H=14, W=14, CO=256, KH=3, KW=3, stride=1, padding=1)),
    "depthwise": ("depthwise_conv2d", {}),  # the default: 1x256x28x28, 3x3, stride 1, padding 1
    "matmul512": ("matmul", dict(M=512, N=512, K=512)),  # a quicker one
}
ISSUE_WORKLOADS = ["matmul1024", "conv2d", "conv2d_256", "depthwise"]
BUILTIN_POLICIES = ["random", "annealing", "evolutionary"]
# the references' alternating rounds (twice per workload: it can afford more than a tuning summary)
REF_ROUNDS, REF_SECONDS, REF_PAUSE = 3, 1.0, 0.5
EARLY = 64  # the trial count the issue's early goals are set at
GOALS = {64: 0.9, 200: 1.0}  # median share of the reference the default policy should reach by these trials
GOAL_VS_RANDOM = 1.2  # and its median over random search's at EARLY trials
# issue 44's time to quality: seconds from the shell (start-up included) to these shares of the reference
TIME_GOALS = {0.9: 20.0, 1.0: 60.0}
GOAL_TRIALS_PER_S = 3.0  # over the whole run
DEFAULT_POLICY = inspect.signature(autosched.tune).parameters["policy"].default


def default_policies() -> list[str]:
    """random, annealing, evolutionary, and every policy that an installed package registers."""
    from autosched.search.policy import get_policy, list_policies

    plugins = [p for p in list_policies() if not get_policy(p).__module__.startswith("autosched.")]
    return BUILTIN_POLICIES + [p for p in plugins if p not in BUILTIN_POLICIES]


# ------------------------------------------------------------------------------------------- references


def peer_kernel(task: Any) -> dict | None:
    """The task as ``benchmarks/peer_kernels.py`` takes it, or None for a workload it does not time."""
    a = task.args
    if task.name == "matmul":
        return dict(op="matmul", M=a["M"], N=a["N"], K=a["K"])
    if task.name == "conv2d" and a.get("layout", "NCHW") == "NCHW":
        return dict(op="conv", N=a["N"], CI=a["CI"], H=a["H"], W=a["W"], CO=a["CO"], KH=a["KH"], KW=a["KW"],
                    stride=a["stride"], padding=a["padding"])
    if task.name == "depthwise_conv2d":
        return dict(op="conv", N=a["N"], CI=a["C"], H=a["H"], W=a["W"], CO=a["C"], KH=a["KH"], KW=a["KW"],
                    stride=a["stride"], padding=a["padding"], groups=a["C"])
    return None


def peers_versions(peers_python: str) -> dict[str, str]:
    code = ("import importlib.metadata as m, json\nout = {}\nfor d in ('torch', 'onnxruntime', 'numpy'):\n"
            "    try: out[d] = m.version(d)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
    res = subprocess.run([peers_python, "-c", code], capture_output=True, text=True, timeout=120)
    return json.loads(res.stdout) if res.returncode == 0 else {}


def local_libraries(task: Any, threads: int, scope: contextlib.ExitStack) -> dict[str, Callable[[], Any]]:
    """The libraries ``autosched tune`` compares with (:mod:`autosched.search.vendor`: onnxruntime, numpy's BLAS),
    set up in this process on ``task`` at ``threads`` threads until ``scope`` ends, by name and version."""
    from autosched.measure.data import make_inputs
    from autosched.search import vendor

    if task.target.kind != "llvm" or task.args.get("dtype", "float32") != "float32":
        return {}
    inputs = make_inputs(task, seed=0)[:-1]
    out = {}
    for library, make in vendor._LIBRARIES:  # the same set-up as vendor_figures, timed here in rounds
        try:
            fn = make(task, inputs, threads, scope)
        except ImportError:
            continue
        if fn is not None:
            out[library] = fn
    return out


def peer_process(peers_python: str, task: Any, threads: int) -> tuple[dict[str, PeerSide], str | None, Any]:
    """The peers' virtualenv's libraries on ``task`` as sides to time (named with their versions), why there
    are none when so, and the process to close."""
    kernel = peer_kernel(task)
    if kernel is None:
        return {}, f"peer_kernels.py does not time {task.name}", None
    if not os.path.exists(peers_python):
        return {}, f"no peers virtualenv at {peers_python} (bash ../shared/peers/setup.sh), so no PyTorch", None
    versions = peers_versions(peers_python)
    try:
        peer = PeerProcess(peers_python, str(HERE / "peer_kernels.py"), [json.dumps(kernel), "--threads",
                                                                          str(threads)])
    except PeerError as e:
        return {}, f"peer_kernels.py failed: {e}", None
    sides = {}
    for name, side in peer.sides().items():
        dist = "torch" if name.startswith("torch") else name
        label = f"{name.replace('torch', 'PyTorch', 1)} {versions.get(dist, '')} (peers)".replace("  ", " ")
        sides[label] = side
    return sides, None, peer


def measure_references(task: Any, threads: int, peers_python: str) -> dict:
    """Every library's GFLOPS on ``task`` timed now (``REF_ROUNDS`` alternating rounds of ``REF_SECONDS``
    blocks, ``REF_PAUSE`` before each, during the machine's measurement turn), what is missing from them, and
    the fp32 peak."""
    from autosched.measure.machine import MeasureTurn
    from autosched.measure.peak import get_peak

    missing = []
    with contextlib.ExitStack() as scope:
        local = local_libraries(task, threads, scope)
        peers, note, peer = peer_process(peers_python, task, threads)
        if peer is not None:
            scope.callback(peer.close)
        with MeasureTurn():
            try:
                best = alternating_medians({**local, **peers}, REF_ROUNDS, REF_SECONDS, REF_PAUSE,
                                           timer=peer_aware_timer)
            except PeerError as e:
                note, peers = f"peer_kernels.py failed: {e}", {}
                best = alternating_medians(local, REF_ROUNDS, REF_SECONDS, REF_PAUSE)
    libraries = [{"library": lib, "seconds": t, "gflops": task.flop / t / 1e9,
                  "where": "peers virtualenv" if lib in peers else "this process"} for lib, t in best.items()]
    if note:
        missing.append(note)
    if task.name in ("matmul", "batch_matmul") and threads != os.cpu_count():
        try:
            import threadpoolctl  # noqa: F401 - only whether numpy's BLAS threads can be limited
        except ImportError:
            missing.append(f"numpy in this process: threadpoolctl is not installed, so its BLAS cannot be held "
                           f"to {threads} thread(s)")
    try:
        p = get_peak(threads)
        peak = {"gflops": p.gflops, "trusted": p.trusted, "describe": p.describe()}
    except Exception as e:  # noqa: BLE001 - without a peak the libraries still make a reference
        peak = {"gflops": None, "error": f"{type(e).__name__}: {e}"}
    return {"libraries": libraries, "missing": missing, "peak": peak}


def combine(timings: dict, threads: int) -> dict:
    """The references of a workload from its timings (before its runs, and after them once they are all
    done): each library's faster figure, so one disturbed moment does not move the reference; the
    reference is the fastest library (the peak when no library computes the task)."""
    first = timings["before"]
    libraries: dict[str, dict] = {}
    for when in ("before", "after"):
        for f in timings.get(when, {}).get("libraries", []):
            mine = libraries.setdefault(f["library"], dict(f, timed={}))
            mine["timed"][when] = f["gflops"]
            if f["gflops"] > mine["gflops"]:
                mine.update(seconds=f["seconds"], gflops=f["gflops"])
    best = max(libraries.values(), key=lambda f: f["gflops"], default=None)
    if best is not None:
        ref = {"name": best["library"], "gflops": best["gflops"]}
    elif first["peak"]["gflops"]:
        ref = {"name": f"fp32 peak of {threads} thread(s)", "gflops": first["peak"]["gflops"]}
    else:
        ref = None
    return {"libraries": list(libraries.values()), "missing": first["missing"], "peak": first["peak"],
            "reference": ref}


# ------------------------------------------------------------------------------------------- runs


def run_from_json(d: dict) -> RaceRun:
    return RaceRun(d["policy"], d["seed"], [tuple(x) for x in d["curve"]], d["seconds"], d["error"],
                   d.get("startup", 0.0))


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(runs: list[RaceRun], ref_gflops: float, trials: int, seconds: list[float]) -> dict:
    """Per policy: share of the reference at each trial and second checkpoint (median, worst and best seed);
    each other policy against random search at EARLY trials."""
    at_trials = sorted({n for n in (EARLY, *GOALS) if n < trials} | {trials})
    out: dict[str, Any] = {"at_trials": at_trials, "at_seconds": seconds, "policies": {}, "vs_random": {}}
    for policy in dict.fromkeys(r.policy for r in runs):
        rs = [r for r in runs if r.policy == policy]
        row = {"seeds": [r.seed for r in rs], "failed": sum(1 for r in rs if r.error),
               "trials_per_s": statistics.median((r.curve[-1][0] if r.curve else 0) / max(r.seconds, 1e-9)
                                                 for r in rs),
               "trials": {n: spread([r.best_at(trials=n) / ref_gflops for r in rs]) for n in at_trials},
               "seconds": {s: dict(spread([r.best_at(seconds=s) / ref_gflops for r in rs]),
                                   ended_before=sum(1 for r in rs if r.curve and r.curve[-1][1] < s))
                           for s in seconds},
               # seconds from the shell to each share (None: that many seeds never got there)
               "time_to": {q: {k: (None if math.isinf(v) else v) for k, v in
                               zip(("median", "min", "max"), seconds_to_quality(rs, q * ref_gflops))}
                           for q in TIME_GOALS},
               "startup": statistics.median(r.startup for r in rs)}
        out["policies"][policy] = row
    early = min(EARLY, trials)
    rand = {r.seed: r.best_at(trials=early) for r in runs if r.policy == "random"}
    for policy, row in out["policies"].items():
        if policy == "random" or not rand:
            continue
        per_seed = [r.best_at(trials=early) / rand[r.seed] for r in runs
                    if r.policy == policy and rand.get(r.seed)]
        med_rand = statistics.median(rand.values())
        out["vs_random"][policy] = {
            "trials": early,
            "ratio_of_medians": row["trials"][early]["median"] * ref_gflops / med_rand if med_rand else None,
            "random_median_gflops": med_rand, "per_seed": per_seed}
    return out


def goals(summary: dict, peak_gflops: float | None = None) -> list[str]:
    """The issue's goals for the default policy, each with its figure and whether it is met; a ratio to random
    search that would need a kernel faster than the CPU's fp32 peak is said to be out of reach."""
    row = summary["policies"].get(DEFAULT_POLICY)
    if row is None:
        return []
    out = []
    for q, limit in TIME_GOALS.items():
        got = row.get("time_to", {}).get(q, {}).get("median")
        ok = got is not None and got <= limit
        out.append(f"{q:.1f}x in {'never' if got is None else f'{got:.0f} s'} {'<=' if ok else '>'} {limit:.0f} s "
                   f"({'met' if ok else 'NOT met'})")
    tps = row["trials_per_s"]
    out.append(f"{tps:.2f} trials/s {'>=' if tps >= GOAL_TRIALS_PER_S else '<'} {GOAL_TRIALS_PER_S:g} "
               f"({'met' if tps >= GOAL_TRIALS_PER_S else 'NOT met'})")
    for n, want in GOALS.items():
        if n in row["trials"]:
            got = row["trials"][n]["median"]
            out.append(f"@{n} trials {got:.2f} {'>=' if got >= want else '<'} {want} "
                       f"({'met' if got >= want else 'NOT met'})")
    vs = summary["vs_random"].get(DEFAULT_POLICY)
    if vs and vs["trials"] == EARLY and vs["ratio_of_medians"]:
        got = vs["ratio_of_medians"]
        needed = GOAL_VS_RANDOM * (vs.get("random_median_gflops") or 0.0)
        reach = (f"; out of reach here: random search's median is {vs['random_median_gflops']:.0f} GFLOPS, so "
                 f"{GOAL_VS_RANDOM}x it would be {needed / peak_gflops:.2f} of the peak")
        out.append(f"{got:.2f}x random @{EARLY} {'>=' if got >= GOAL_VS_RANDOM else '<'} {GOAL_VS_RANDOM}x "
                   f"({'met' if got >= GOAL_VS_RANDOM else 'NOT met'}"
                   f"{reach if got < GOAL_VS_RANDOM and peak_gflops and needed > peak_gflops else ''})")
    return out


def print_workload(wl: str, label: str, refs: dict, summary: dict, seeds: int, threads: int) -> None:
    print(f"\n== {wl}: {label}")
    print(f"references, timed in this run at {threads} thread(s):")
    for f in sorted(refs["libraries"], key=lambda f: -f["gflops"]):
        timed = ", ".join(f"{when} the runs {g:.1f}" for when, g in f["timed"].items())
        print(f"  {f['library']:<34} {f['gflops']:>9.1f} GFLOPS  ({f['where']}; {timed})")
    for note in refs["missing"]:
        print(f"  ({note})")
    ref = refs["reference"]
    peak = refs["peak"]
    if peak.get("gflops"):
        print(f"  {'autosched peak (fp32)':<34} {peak['gflops']:>9.1f} GFLOPS"
              + (f"  (the reference is {ref['gflops'] / peak['gflops']:.2f} of it)" if ref else ""))
    else:
        print(f"  (no peak: {peak.get('error')})")
    print(f"share of the reference ({ref['name']}, {ref['gflops']:.1f} GFLOPS): median over {seeds} seed(s) "
          "[worst, best]; * = some runs had ended by then (their final best)")
    cols = [f"@{n} trials" for n in summary["at_trials"]] + [f"@{s:g} s" for s in summary["at_seconds"]]
    print(f"{'policy':<16}" + "".join(f"{c:<19}" for c in cols) + f"{'trials/s':>9}  failed")
    for policy, row in summary["policies"].items():
        cells = [row["trials"][n] for n in summary["at_trials"]] + [row["seconds"][s] for s in summary["at_seconds"]]
        text = [f"{c['median']:.2f} [{c['min']:.2f}, {c['max']:.2f}]" + ("*" if c.get("ended_before") else "")
                for c in cells]
        print(f"{policy:<16}" + "".join(f"{t:<19}" for t in text) + f"{row['trials_per_s']:>9.2f}  "
              f"{row['failed'] or ''}")
    print("time to quality: seconds from the shell (start-up included) until the best is within the share of the "
          "reference; median [fastest, slowest seed]")
    print(f"{'policy':<16}" + "".join(f"{'to ' + format(q, '.1f') + 'x':<22}" for q in TIME_GOALS) + "start-up")

    def secs(v: float | None) -> str:
        return "never" if v is None else f"{v:.1f}"

    for policy, row in summary["policies"].items():
        cells = [row["time_to"][q] for q in TIME_GOALS] if "time_to" in row else []
        print(f"{policy:<16}" + "".join(f"{secs(c['median']) + ' [' + secs(c['min']) + ', ' + secs(c['max']) + ']':<22}"
                                        for c in cells) + f"{row.get('startup', 0.0):.1f} s")
    for policy, vs in summary["vs_random"].items():
        ps = vs["per_seed"]
        rng = f"; per seed {min(ps):.2f}x to {max(ps):.2f}x" if ps else ""
        ratio = f"{vs['ratio_of_medians']:.2f}x" if vs["ratio_of_medians"] else "n/a"
        print(f"{policy} vs random at {vs['trials']} trials: {ratio} (ratio of the medians){rng}")
    met = goals(summary, peak.get("gflops"))
    if met:
        print(f"issues 24 and 44's goals for {DEFAULT_POLICY} (the default): " + "; ".join(met))


# ------------------------------------------------------------------------------------------- cost model


def pairwise_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of pairs with different true values that the prediction orders the same way."""
    d_pred = np.sign(pred[:, None] - pred[None, :])
    d_true = np.sign(truth[:, None] - truth[None, :])
    mask = d_true != 0
    return float((d_pred[mask] == d_true[mask]).mean()) if mask.any() else float("nan")


def kendall_tau(pred: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b (ties in either ranking discounted, as scipy.stats.kendalltau computes it)."""
    iu = np.triu_indices(len(pred), 1)
    d_pred = np.sign(pred[:, None] - pred[None, :])[iu]
    d_true = np.sign(truth[:, None] - truth[None, :])[iu]
    den = np.sqrt(float(np.count_nonzero(d_pred)) * float(np.count_nonzero(d_true)))
    return float((d_pred * d_true).sum() / den) if den else float("nan")


def model_quality(task: Any, runs: list[dict]) -> dict | None:
    """Train on the records of the random run of the lowest seed; rank the other runs' records."""
    from autosched.cost_model import XGBCostModel

    have = [r for r in runs if Path(r["db"]).exists()]
    rand = sorted((r for r in have if r["policy"] == "random"), key=lambda r: r["seed"])
    if not rand:
        return None

    def load(run: dict) -> list:
        with Database(run["db"], create=False) as db:
            return [x for x in db.records(task) if x.ok]

    train = load(rand[0])
    model = XGBCostModel(seed=0)
    model.update([MeasureInput(task, r.trace) for r in train], [r.result for r in train])
    out: dict[str, Any] = {"train_records": len(train), "train_run": f"random seed {rand[0]['seed']}"}
    for label, held in (("random runs", rand[1:]), ("all other runs", [r for r in have if r is not rand[0]])):
        recs = [x for run in held for x in load(run)]
        if len(recs) < 2:
            continue
        pred = model.predict([MeasureInput(task, r.trace) for r in recs])
        thr = np.array([1.0 / r.cost for r in recs])
        out[label] = {"records": len(recs), "pairwise_accuracy": pairwise_accuracy(pred, thr),
                      "kendall_tau": kendall_tau(pred, thr)}
    return out


# ------------------------------------------------------------------------------------------- main


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("autosched", "numpy", "onnxruntime", "xgboost", "llvmlite"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    git = subprocess.run(["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True)
    if git.returncode == 0:
        out["autosched_commit"] = git.stdout.strip()
    return out


def save(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", nargs="+", default=ISSUE_WORKLOADS, choices=list(WORKLOADS))
    ap.add_argument("--policies", nargs="+", default=None,
                    help="default: random annealing evolutionary and every policy installed packages register")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2, help="threads of every kernel, tuned or vendor (default 2)")
    ap.add_argument("--seconds", type=float, nargs="+", default=[30.0, 60.0, 120.0],
                    help="also report the share reached within these seconds of each run (default 30 60 120)")
    ap.add_argument("--backend", choices=["local", "ray"], default="local", help="measurement workers")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--peers-python", default=os.environ.get("AUTOSCHED_PEERS_PYTHON",
                                                             "/tmp/autosched-peers/bin/python"))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs (and the references) already in OUT/tuning.json; run only the missing ones")
    args = ap.parse_args()
    os.environ["AUTOSCHED_NUM_THREADS"] = str(args.threads)  # the tuned kernels' threads, in the workers too
    policies = args.policies or default_policies()
    from autosched.search.policy import get_policy

    for p in policies:
        try:
            get_policy(p)
        except ValueError as e:
            ap.error(str(e))
    args.out.mkdir(parents=True, exist_ok=True)
    result_file = args.out / "tuning.json"
    config = {"trials": args.trials, "threads": args.threads, "batch_size": args.batch_size,
              "backend": args.backend, "cpu": host_cpu_name()}
    data: dict[str, Any] = {"config": config, "references": {}, "runs": []}
    if args.resume and result_file.exists():
        old = json.loads(result_file.read_text())
        if old.get("config") != config:
            ap.error(f"--resume: {result_file} was made with {old.get('config')}, not {config}; "
                     "give the same options or another --out")
        data = old
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    data.setdefault("started", now)
    data.update(date=now,
                cpu=host_cpu_name(), cores=os.cpu_count(), target=Target("llvm").key, versions=versions())
    if os.path.exists(args.peers_python):
        data["versions"]["peers"] = peers_versions(args.peers_python)
    done = {(r["workload"], r["policy"], r["seed"]) for r in data["runs"]}
    startup = command_startup()  # what each run would pay from the shell before its workers start
    data["command_startup"] = startup
    print(f"CPU {host_cpu_name()}, {args.threads} thread(s); {args.trials} trials x seeds {args.seeds} x "
          f"{', '.join(policies)}", file=sys.stderr)

    for wl in args.workloads:
        name, params = WORKLOADS[wl]
        task = autosched.Task(name, params)
        timings = data["references"].setdefault(wl, {})
        if "before" not in timings:
            timings["before"] = measure_references(task, args.threads, args.peers_python)
            save(result_file, data)
        ref = combine(timings, args.threads)["reference"]

        def progress(r: RaceRun, trials: int, wl: str = wl, ref: dict | None = ref) -> None:
            n, t, g = r.curve[-1]
            share = f" = {g / ref['gflops']:.2f} of the reference" if ref else ""
            print(f"\r  {wl} {r.policy} seed {r.seed}: {n}/{trials} {t:.0f} s best {g:.1f} GFLOPS{share}   ",
                  end="", file=sys.stderr, flush=True)

        workdir = args.out / "tuning-dbs" / wl
        for seed in args.seeds:
            for policy in policies:
                if (wl, policy, seed) in done:
                    continue
                (run,) = race(task, [policy], args.trials, [seed], backend=args.backend,
                              batch_size=args.batch_size, workdir=str(workdir), progress=progress,
                              startup=startup)
                print(f"  {run.seconds:.0f} s" + (f"  FAILED: {run.error}" if run.error else ""), file=sys.stderr)
                data["runs"].append(dict(asdict(run), workload=wl, trials=args.trials,
                                         db=str(workdir / f"{task.name}-{policy}-{seed}.db")))
                save(result_file, data)
        if "after" not in timings:
            timings["after"] = measure_references(task, args.threads, args.peers_python)
            save(result_file, data)

    data["summary"], data["model_quality"] = {}, {}
    for wl in args.workloads:
        name, params = WORKLOADS[wl]
        task = autosched.Task(name, params)
        refs = data["references"][wl]["combined"] = combine(data["references"][wl], args.threads)
        mine = [r for r in data["runs"] if r["workload"] == wl and r["policy"] in policies
                and r["seed"] in args.seeds]
        if refs["reference"] is None:
            print(f"\n== {wl}: no reference (no library computes it and the peak failed); skipped")
            continue
        runs = [run_from_json(r) for r in mine]
        summary = summarise(runs, refs["reference"]["gflops"], args.trials, args.seconds)
        data["summary"][wl] = summary
        print_workload(wl, task.label, refs, summary, len(args.seeds), args.threads)
        png = args.out / f"tuning_{wl}.png"
        race_plot(str(png), runs, args.trials, Reference(**refs["reference"]),
                  f"{wl}: {task.label}, {args.threads} thread(s), {host_cpu_name()}")
        q = model_quality(task, mine)
        if q is not None:
            data["model_quality"][wl] = q
            for label in ("random runs", "all other runs"):
                if label in q:
                    m = q[label]
                    print(f"cost model trained on {q['train_run']} ({q['train_records']} records), ranking "
                          f"{m['records']} held-out records of {label}: pairwise accuracy "
                          f"{m['pairwise_accuracy']:.3f}, Kendall tau {m['kendall_tau']:.3f}")
        save(result_file, data)
    print(f"\nwrote {result_file} and {args.out}/tuning_<workload>.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
