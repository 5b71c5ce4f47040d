"""Hold a real Ray cluster of ``sys.argv[1]`` nodes (one CPU each), all on 127.0.0.1: prints its address,
keeps it until stdin closes, then tears it down. Run in its own process so the test session's own Ray (and
the tuners under test) only ever join it as a user's would."""

import os
import sys

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # bind loopback only, as autosched's local Ray does
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray._private.ray_constants as ray_constants  # noqa: E402

ray_constants.ENABLE_RAY_CLUSTER = False
from ray.cluster_utils import Cluster  # noqa: E402

nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 2
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                        "include_dashboard": False})
for _ in range(nodes - 1):
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
cluster.wait_for_nodes()
print(cluster.address, flush=True)
try:
    sys.stdin.read()
finally:
    cluster.shutdown()
