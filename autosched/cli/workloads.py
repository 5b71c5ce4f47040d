"""``autosched workloads``: the registered workloads, their parameters with defaults, and their spaces.

    autosched workloads                     # every workload: parameters=defaults, templates
    autosched workloads conv2d              # one workload, with its description
    autosched workloads conv2d --space      # also the size of each space for its default task
    autosched workloads --json              # machine-readable

Exit codes: 0 done, 2 error (an unknown workload, bad arguments).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any

from autosched.cli.common import add_verbosity, setup_logging
from autosched.space import make_space
from autosched.space.template import list_templates
from autosched.task import Task
from autosched.workloads import get_workload, list_workloads

EXIT_OK, EXIT_ERROR = 0, 2


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``workloads`` command to an ``add_subparsers()`` object; returns its parser."""
    p = sub.add_parser("workloads", help="list the workloads with their parameters, defaults and templates",
                       description=__doc__.split("\n\n")[0],
                       epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", default=None, help="show only this workload")
    p.add_argument("--space", action="store_true",
                   help="also build each space of the default task and print its size")
    p.add_argument("--json", action="store_true", help="print JSON (one object per workload)")
    add_verbosity(p)
    return p


def _default(v: Any) -> Any:
    return None if v is inspect.Parameter.empty else v


def describe(wl: Any, with_space: bool = False) -> dict:
    """A JSON-able description of a workload."""
    out = {
        "name": wl.name,
        "params": [{"name": p, "default": _default(d), "required": d is inspect.Parameter.empty}
                   for p, d in wl.params],
        "doc": wl.doc.splitlines()[0] if wl.doc else "",
        "templates": [t for w, t in list_templates() if w == wl.name],
        "expert_schedules": sorted(wl.schedules),
    }
    if with_space:
        sizes = {}
        try:
            task = Task(wl.name)
        except Exception as e:  # noqa: BLE001 - report, do not crash the listing
            sizes["error"] = str(e)
        else:
            for kind in ("template", "generated"):
                try:
                    sizes[kind] = make_space(task, kind).size()
                except Exception as e:  # noqa: BLE001
                    sizes[kind] = f"unavailable: {str(e).splitlines()[0]}"
        out["space_size"] = sizes
    return out


def run(args: argparse.Namespace) -> int:
    setup_logging(args)

    if args.name is not None:
        try:
            wls = [get_workload(args.name)]
        except KeyError as e:
            print(f"autosched workloads: error: {e.args[0]}", file=sys.stderr)
            return EXIT_ERROR
    else:
        wls = list_workloads()
    rows = [describe(wl, args.space) for wl in wls]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return EXIT_OK
    for r in rows:
        params = ", ".join(p["name"] if p["required"] else f"{p['name']}={p['default']!r}" for p in r["params"])
        print(f"{r['name']}({params})")
        if r["doc"]:
            print(f"    {r['doc']}")
        extra = []
        if r["templates"]:
            extra.append("templates: " + ", ".join(r["templates"]))
        if r["expert_schedules"]:
            extra.append("expert schedule: " + ", ".join(r["expert_schedules"]))
        if extra:
            print("    " + "; ".join(extra))
        if "space_size" in r:
            print("    space sizes (default task): " + ", ".join(f"{k} {v}" for k, v in r["space_size"].items()))
    return EXIT_OK
