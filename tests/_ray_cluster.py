"""Hold a real Ray cluster on 127.0.0.1 in a process of its own, so the test session's own Ray (and the tuners
under test) only ever join it as a user's would.

    python _ray_cluster.py [--workers N] [--head-cpus C] [--worker-cpus C] [--label I=CPU ...]

Starts a head and ``N`` worker nodes (``--label 1=fakecpu`` gives worker 1 the custom resource
``autosched-cpu:fakecpu``, the way a user names a node's CPU), prints the address on one line and a JSON
line ``{"head": node id, "workers": [node ids]}``, then obeys lines on stdin: ``kill I`` kills worker ``I``
(every process of that node, at once, as a crashed machine would go), ``kill head`` kills the head (its GCS,
raylet and workers); each answers ``killed``. The cluster is torn down when stdin closes.
"""

import argparse
import contextlib
import json
import os
import signal
import sys

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # bind loopback only, as autosched's local Ray does
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray._private.ray_constants as ray_constants  # noqa: E402

ray_constants.ENABLE_RAY_CLUSTER = False
from ray.cluster_utils import Cluster  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--workers", type=int, default=1)
p.add_argument("--head-cpus", type=int, default=1)
p.add_argument("--worker-cpus", type=int, default=1)
p.add_argument("--label", action="append", default=[], metavar="I=CPU")
args = p.parse_args()
labels = {int(i): cpu for i, _, cpu in (x.partition("=") for x in args.label)}

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.head_cpus, "node_ip_address": "127.0.0.1",
                                                        "include_dashboard": False})
workers = [cluster.add_node(num_cpus=args.worker_cpus, node_ip_address="127.0.0.1",
                            resources={f"autosched-cpu:{labels[i]}": 1} if i in labels else None)
           for i in range(args.workers)]
cluster.wait_for_nodes()


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
    return out


def kill(node) -> None:
    """Kill every process of ``node`` at once: Ray's own removal leaves the raylet's agents behind."""
    raylet = node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET) or []
    orphans = children(raylet[0].process.pid) if raylet else []
    cluster.remove_node(node, allow_graceful=False)
    for pid in orphans:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


print(cluster.address, flush=True)
print(json.dumps({"head": cluster.head_node.node_id, "workers": [w.node_id for w in workers]}), flush=True)
try:
    for line in sys.stdin:
        what = line.split()[1:]
        if what == ["head"]:
            kill(cluster.head_node)
        elif what:
            kill(workers[int(what[0])])
        print("killed", flush=True)
finally:
    for w in list(cluster.worker_nodes):
        kill(w)
    if cluster.head_node is not None:
        kill(cluster.head_node)
