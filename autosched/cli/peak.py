"""``autosched peak``: measure (once) and print this machine's fp32 peak GFLOPS, the yardstick every
tuning summary and report quotes its share of.

Exit codes: 0 done, 2 bad usage (a target that is not a CPU or GPU here).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from autosched.cli.common import add_verbosity, at_least, setup_logging
from autosched.measure.peak import cached_peak, get_peak
from autosched.runtime.cuda import CUDAError
from autosched.target import Target


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``peak`` command to an ``add_subparsers()`` object; returns its parser."""
    pk = sub.add_parser("peak", help="measure (once) and print this machine's fp32 peak GFLOPS",
                        description="Measure this machine's fp32 peak with a loop of vector FMAs compiled by "
                                    "llvmlite; the figure is cached per CPU and thread count. Exit codes: 0 "
                                    "done, 2 bad usage (a target that is not a CPU or GPU here).")
    pk.add_argument("--threads", type=at_least(1), default=None, help="threads (default: all cores)")
    pk.add_argument("--refresh", action="store_true", help="measure again instead of reading the cache")
    pk.add_argument("--json", action="store_true", help="print the figure as JSON")
    pk.add_argument("--target", default=None, help="'cuda': the GPU's fp32 peak instead of the CPU's")
    add_verbosity(pk)
    return pk


def run(args: argparse.Namespace) -> int:
    """Run ``autosched peak``; returns the exit code."""
    setup_logging(args)
    try:
        gpu = args.target is not None and Target(args.target).kind == "cuda"
        cached = None if args.refresh else cached_peak(args.threads, args.target)
        peak = cached or get_peak(args.threads, refresh=True, target=args.target)
    except (ValueError, CUDAError) as e:
        print(f"autosched peak: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(peak.to_json()))
    else:
        how = ("cached, " if cached else "") + peak.describe()
        if gpu:
            print(f"fp32 peak: {peak.gflops:.1f} GFLOPS on {peak.cpu} ({how})")
        else:
            print(f"fp32 peak: {peak.gflops:.1f} GFLOPS on {peak.threads} thread(s) of {peak.cpu} "
                  f"({peak.lanes}-lane FMAs; {how})")
    return 0
