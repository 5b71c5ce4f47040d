"""Memory of a long tuning run: the PSS of the whole process tree against trials, and what grows per trial.

    python benchmarks/bench_memory.py --trials 2000                 # conv2d, the README's command
    python benchmarks/bench_memory.py --trials 400 --plot mem.png --json mem.json -- --policy random

It starts ``autosched tune --workload conv2d --trials N`` (the embedded defaults: local Ray, a fresh
SQLite file) and samples, once a second, the proportional set size (PSS: shared pages split between the
processes that map them, so the sum is what the tree really costs) of the tuning process and every
process below it (Ray's GCS, raylet and workers, the builder and runner actors). Trials come from the
progress lines. It prints the peak of the tree, and the growth per trial after warm-up (a least-squares
slope of tree PSS against trials, over the samples after the first ``--warmup`` share of the run), per
process kind too, so a holder shows where it lives. Goals on 2 cores: <= 50 KB per trial, peak <= 1 GiB.

Linux only (it reads /proc/PID/smaps_rollup). Memory, not time, is measured: other load does not spoil it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids[ppid].append(int(entry))
    return kids


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    kids, out, todo = _children_map(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def pss_kb(pid: int) -> int | None:
    """Proportional set size of one process in KiB (None if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def kind_of(pid: int) -> str:
    """A short name for what a process is: the tuner, a Ray actor by class, or a Ray system process."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    for name in ("BuildActor", "RunActor", "gcs_server", "raylet", "dashboard", "log_monitor",
                 "monitor.py", "runtime_env", "autosched-runner", "autosched-builder"):
        if name in cmd:
            return name
    if "ray::IDLE" in cmd or "default_worker" in cmd:
        return "ray worker (idle)"
    if "autosched" in cmd and " tune" in cmd:
        return "tuner"
    return cmd.split(" ")[0].rsplit("/", 1)[-1][:30]


def sample(root: int) -> tuple[int, dict[str, int]]:
    """Tree PSS in KiB, and the PSS by process kind."""
    by_kind: dict[str, int] = defaultdict(int)
    total = 0
    for pid in process_tree(root):
        kb = pss_kb(pid)
        if kb is None:
            continue
        total += kb
        by_kind[kind_of(pid)] += kb
    return total, dict(by_kind)


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs (0 for fewer than two distinct xs)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--workload", default="conv2d")
    p.add_argument("--warmup", type=float, default=0.2, help="share of the trials left out of the slope")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--plot", default=None, help="PNG of tree PSS (and by kind) against trials")
    p.add_argument("--json", default=None, help="write the samples and the figures here")
    p.add_argument("tune_args", nargs="*", help="after --: more arguments for `autosched tune`")
    args = p.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="autosched-mem-")
    db = os.path.join(tmp, "tuning.db")
    cmd = [sys.executable, "-m", "autosched", "tune", "--workload", args.workload, "--trials", str(args.trials),
           "--db", db, *args.tune_args]
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    trials = [0]
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            m = _PROGRESS.match(line)
            if m:
                trials[0] = int(m.group(1))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    samples: list[dict] = []
    t0 = time.time()
    while proc.poll() is None:
        total, by_kind = sample(proc.pid)
        samples.append({"t": time.time() - t0, "trials": trials[0], "pss_kb": total, "by_kind": by_kind})
        time.sleep(args.interval)
    reader.join(timeout=5)
    for line in lines[-4:]:
        print("  | " + line)
    if proc.returncode != 0:
        print("\n".join(lines[-40:]))
        print(f"autosched tune exited with {proc.returncode}", file=sys.stderr)
        return 1

    peak = max(samples, key=lambda s: s["pss_kb"])
    # after warm-up, and before the last trial (then the run re-measures its best and shuts Ray down)
    steady = [s for s in samples if args.warmup * args.trials <= s["trials"] < args.trials]
    xs = [s["trials"] for s in steady]
    growth = slope(xs, [s["pss_kb"] for s in steady])
    kinds = sorted({k for s in samples for k in s["by_kind"]})
    by_kind = {k: slope(xs, [s["by_kind"].get(k, 0) for s in steady]) for k in kinds}
    last = steady[-1] if steady else samples[-1]
    print(f"\n{args.trials} trials of {args.workload} in {samples[-1]['t']:.0f} s; {len(samples)} samples")
    print(f"peak PSS of the tree: {peak['pss_kb'] / 1024:,.0f} MiB at trial {peak['trials']} "
          f"(goal <= 1024 MiB)")
    print(f"growth after trial {int(args.warmup * args.trials)}: {growth:,.1f} KiB per trial "
          f"(goal <= 50)")
    print(f"{'process kind':<22} {'after warm-up':>14} {'at the end':>11} {'KiB/trial':>10}   (MiB)")
    first = steady[0] if steady else samples[0]
    for k in kinds:
        print(f"{k:<22} {first['by_kind'].get(k, 0) / 1024:>14.1f} {last['by_kind'].get(k, 0) / 1024:>11.1f} "
              f"{by_kind[k]:>10.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"trials": args.trials, "peak_kb": peak["pss_kb"],
                                               "growth_kb_per_trial": growth, "growth_by_kind": by_kind,
                                               "samples": samples}, indent=1))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5))
        ts = [s["trials"] for s in samples]
        ax.plot(ts, [s["pss_kb"] / 1024 for s in samples], label="whole tree", linewidth=2)
        for k in kinds:
            ys = [s["by_kind"].get(k, 0) / 1024 for s in samples]
            if max(ys) > 20:
                ax.plot(ts, ys, label=k, linewidth=1)
        ax.set_xlabel("trials")
        ax.set_ylabel("PSS (MiB)")
        ax.set_title(f"autosched tune --workload {args.workload}: memory against trials "
                     f"({growth:.1f} KiB/trial after warm-up)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
