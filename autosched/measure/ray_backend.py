"""Measurement on Ray: builder actors compile in parallel, runner actors time one candidate at a time.

The engine (:mod:`autosched.measure.engine`) drives them as it drives local worker processes;
:class:`RayTransport` carries its calls to actors, and adds what a cluster needs: runners placed on the nodes
whose CPU is the target's, libraries shipped as bytes, nodes that die, and a head that stops answering.

Ray starts once per process, lazily, on first use (:func:`init_ray`):

* with no address it starts a local Ray sized to this machine, bound to
  127.0.0.1 only, with its GCS, raylet and agents but without the dashboard,
  the autoscaler monitor, the log monitor or usage reporting, and with a small
  object store; it is shut down when the process exits (also after Ctrl-C);
* with an address (the ``address`` argument, ``--ray-address`` on the command
  line, or ``AUTOSCHED_RAY_ADDRESS``) it joins that cluster instead: builders
  are spread over its nodes, runners go to the nodes whose CPU is the task's
  target's (:class:`RayRunner`), and libraries travel to the runner as bytes,
  so nothing assumes a shared disk.

Actor calls leave no task events: Ray's GCS keeps up to 100,000 of them for its state API, which a
tuner never asks, and they grew its memory with every trial (docs/measure.md).

Actors are started with ``max_restarts=-1``: a kernel that segfaults kills
only its runner actor, which Ray restarts in milliseconds; a kernel that runs
past its deadline is stopped with ``ray.kill`` and restarted the same way.
Either way the candidate gets an error result and the batch goes on.

A node that dies is not a candidate's fault: its actors are dropped, the
candidates they had in flight are built or timed again on the others, and the
run goes on while a builder and a runner are left (:class:`ClusterError`
when none is). A head that stops answering ends the run within
``HEAD_LOST_AFTER`` seconds with :class:`ClusterLost` (Ray itself would wait
for it a minute, then terminate the process with a log line of its own).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Any

import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from autosched.errors import ClusterError, ClusterLost
from autosched.measure.builder import builds_per_worker
from autosched.measure.engine import DIED, FAILED, OK, EngineBuilder, EngineRunner, Reply, Slot, Transport
from autosched.measure.runner import RunConfig
from autosched.measure.worker import BuildService, RunService

log = logging.getLogger("autosched.measure")

ADDRESS_ENV = "AUTOSCHED_RAY_ADDRESS"
OBJECT_STORE_ENV = "AUTOSCHED_RAY_OBJECT_STORE_MB"
DEFAULT_OBJECT_STORE_MB = 200
ACTOR_START_TIMEOUT = 120.0  # seconds for an actor to start (or restart) and answer a ping
#: the custom resource that names a node's CPU: `ray start --resources '{"autosched-cpu:znver4": 1}'`
CPU_RESOURCE = "autosched-cpu:"
PROBE_TIMEOUT = 60.0  # seconds for the nodes without that resource to say what their CPU is
HEAD_LOST_AFTER = 10.0  # seconds the head of a joined cluster may not answer before the run stops
NODE_CHECK = 5.0  # seconds a call may run before we ask whether its node is still there (and again after as long)

_init_lock = threading.Lock()
_started_here = False

# Ray raises these when the actor running a call died (crash, kill) or cannot be reached
_ACTOR_ERRORS: tuple[type[BaseException], ...] = tuple(
    e for e in (getattr(ray.exceptions, n, None) for n in (
        "RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError",
        "LocalRayletDiedError"))
    if isinstance(e, type))


def ray_address(address: str | None = None) -> str | None:
    """The cluster to join: ``address``, else ``$AUTOSCHED_RAY_ADDRESS``, else None (start a local Ray)."""
    return address or os.environ.get(ADDRESS_ENV) or None


def init_ray(address: str | None = None, num_cpus: int | None = None,
             object_store_mb: int | None = None) -> bool:
    """Start (or join) Ray once for this process; returns True if this call started it.

    Does nothing when Ray is already initialised (by an earlier call, or by the
    user's own ``ray.init``, whose settings are then respected).
    """
    global _started_here
    with _init_lock:
        if ray.is_initialized():
            return False
        addr = ray_address(address)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never report usage from a tuner
        # Ray starts its workers at nice 15; a kernel timed at nice 15 loses its core to any nice-0 process
        # (the driver, the raylet) and its threads wait for each other: 15% slower here on a 2-core conv2d
        os.environ.setdefault("RAY_worker_niceness", "0")
        # Ray's own warnings (token auth on a loopback-only cluster, ...) only when autosched logs at INFO
        quiet = logging.getLogger("autosched").getEffectiveLevel() > logging.INFO
        common: dict[str, Any] = dict(include_dashboard=False,
                                      logging_level=logging.ERROR if quiet else logging.WARNING,
                                      log_to_driver=False, configure_logging=True)
        t0 = time.perf_counter()
        if addr is not None:
            if _is_loopback(addr):
                # a cluster on this machine's loopback: Ray would replace 127.0.0.1 by the machine's network
                # address, where nothing listens, and wait for minutes; keep it, and join as a loopback node
                _loopback_only()
                common["_node_ip_address"] = "127.0.0.1"
            ray.init(address=addr, **common)
            log.info("joined the Ray cluster at %s in %.1f s", addr, time.perf_counter() - t0)
            _watch_head(addr)
        else:
            # a local Ray listens on loopback only; joining a cluster is the user's explicit act
            _loopback_only()
            mb = int(object_store_mb or os.environ.get(OBJECT_STORE_ENV) or DEFAULT_OBJECT_STORE_MB)
            if os.environ.get("RAY_ADDRESS"):
                log.warning("RAY_ADDRESS=%s is set, but autosched joins a cluster only when asked (--ray-address "
                            "or %s): starting a private local Ray", os.environ["RAY_ADDRESS"], ADDRESS_ENV)
            with _lean_local_node():
                # address="local": a new Ray of our own, whatever Ray's environment variable or its record of
                # the machine's last cluster (left behind by a cluster that was killed) say
                ray.init(address="local", num_cpus=int(num_cpus or os.cpu_count() or 1),
                         object_store_memory=max(mb, 80) << 20, _node_ip_address="127.0.0.1", **common)
            log.info("started a local Ray in %.1f s", time.perf_counter() - t0)
            # a crashing candidate is an expected outcome, recorded in its result: keep the raylet's
            # paragraph about each dead worker off the user's terminal (private flag, hence the guard)
            wmod = getattr(getattr(ray, "_private", None), "worker", None)
            if wmod is not None and hasattr(wmod, "_worker_logs_enabled"):
                wmod._worker_logs_enabled = False
        _started_here = True
        atexit.register(shutdown_ray)
        return True


#: head-node daemons a private local Ray does not use: the autoscaler's monitor (a fixed one-node cluster), the
#: log monitor (worker logs are not sent to the driver) and the dashboard's API server (jobs and state API),
#: each a sizeable share of a tuning run's memory (docs/measure.md)
_IDLE_DAEMONS = ("start_monitor", "start_log_monitor", "start_api_server")


@contextlib.contextmanager
def _lean_local_node() -> Iterator[None]:
    """Start a local Ray without :data:`_IDLE_DAEMONS`. ``ray.init`` has no switch for them (its node's
    parameters do, unreachable from ``init``), so the node's start methods are skipped for the call: private
    names, hence the guard; a Ray without them starts everything as before."""
    node_cls = getattr(getattr(getattr(ray, "_private", None), "node", None), "Node", None)
    saved = {name: getattr(node_cls, name) for name in _IDLE_DAEMONS if hasattr(node_cls, name)}
    try:
        for name in saved:
            setattr(node_cls, name, lambda self, *args, **kwargs: None)
        yield
    finally:
        for name, method in saved.items():
            setattr(node_cls, name, method)


def _is_loopback(address: str) -> bool:
    host = address.split("://", 1)[-1].rstrip("/").rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _loopback_only() -> None:
    """Make a local Ray bind 127.0.0.1 only. Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` when it is
    imported (it is its "no cluster, loopback only" mode); Ray may be imported before we get here, so the
    constant it derived is set too (a private name, hence the guard), and the variable for its processes."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    consts = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if consts is not None and hasattr(consts, "ENABLE_RAY_CLUSTER"):
        consts.ENABLE_RAY_CLUSTER = False


def shutdown_ray() -> None:
    """Shut down the Ray that :func:`init_ray` started or joined (idempotent; also runs at exit)."""
    global _started_here, _head
    with _init_lock:
        lost = cluster_lost()
        if _head is not None:
            _head.stop()
        _head = None
        if _started_here and ray.is_initialized() and not lost:  # Ray's goodbyes to a lost head would hang
            ray.shutdown()
        _started_here = False


def _total_cpus() -> float:
    return float(ray.cluster_resources().get("CPU", 0.0))


def _error_line(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:300]}"


# ---------------------------------------------------------------------------
# the cluster: its nodes, their CPUs, and whether they (and its head) still answer
# ---------------------------------------------------------------------------


def _answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


class _HeadWatch:
    """Asks the head's GCS every second, from a daemon thread, whether it still accepts connections; once it
    has not for ``HEAD_LOST_AFTER`` seconds the cluster is lost (``lost`` says so) and the next wait of a
    builder or runner raises :class:`ClusterLost`. Ray's own calls would wait for a lost head for a minute
    (its GCS reconnection timeout) and then terminate the process, with no way to say more or clean up."""

    def __init__(self, address: str, gcs: str):
        host, _, port = gcs.rpartition(":")
        self.address, self.lost = address, ""
        self._stop = threading.Event()
        threading.Thread(target=self._run, args=(host.strip("[]"), int(port)), daemon=True,
                         name="autosched-ray-head").start()

    def _run(self, host: str, port: int) -> None:
        since = None
        while not self._stop.wait(1.0):
            if _answers(host, port, timeout=2.0):
                since = None
            elif since is None:
                since = time.monotonic()
            elif time.monotonic() - since >= HEAD_LOST_AFTER:
                self.lost = (f"lost the Ray cluster at {self.address}: its head has not answered for "
                             f"{HEAD_LOST_AFTER:.0f} s")
                log.debug(self.lost)
                return

    def stop(self) -> None:
        self._stop.set()


_head: _HeadWatch | None = None


def _watch_head(address: str) -> None:
    global _head
    try:
        gcs = ray.get_runtime_context().gcs_address
    except Exception as e:  # noqa: BLE001 - Ray Client (ray://) has no GCS address here: nothing to watch
        log.debug("not watching the cluster's head: %s", e)
        return
    if gcs:
        _head = _HeadWatch(address, gcs)


def cluster_lost() -> str:
    """Why the joined cluster is lost ('' while its head answers, and always for a local Ray)."""
    return _head.lost if _head is not None else ""


def _check_head() -> None:
    if _head is not None and _head.lost:
        raise ClusterLost(_head.lost)


_raylets: dict[str, tuple[str, int]] = {}  # node id -> where its raylet listens


def _alive_nodes() -> dict[str, dict]:
    nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
    _raylets.update((nid, (n["NodeManagerAddress"], int(n["NodeManagerPort"]))) for nid, n in nodes.items())
    return nodes


def _one_machine() -> bool:
    """Whether Ray is this machine alone (a local Ray): its one node is the one this process is attached to."""
    return list(_alive_nodes()) == [ray.get_runtime_context().get_node_id()]


def _node_name(node: dict) -> str:
    return f"{node['NodeID'][:8]} ({node.get('NodeManagerAddress', '?')})"


def _node_gone(node_id: str) -> bool:
    """Whether a node is gone: its raylet does not accept connections (a driver reaches every raylet anyway:
    it leases workers from them). At once, where the GCS notices only when its health checks fail, and
    without asking the GCS, which may be what was lost."""
    if node_id not in _raylets:
        _check_head()
        _alive_nodes()  # a node that joined since we last looked
    return node_id not in _raylets or not _answers(*_raylets[node_id])


@ray.remote(num_cpus=0, max_retries=0)
def _host_cpu() -> str:
    from autosched.target import host_cpu_name

    return host_cpu_name()


_probed: dict[str, str] = {}  # node id -> LLVM's name of its CPU, as a task there answered (a node keeps its CPU)


def node_cpus() -> dict[str, tuple[str, ...]]:
    """LLVM's name of the CPU of each alive node that offers CPUs to Ray (a head started with ``--num-cpus=0``
    is kept for the driver: nothing is built or timed there): what its ``autosched-cpu:NAME`` resources say
    (a node may name several), else what a task pinned to it answers (asked once per node, all nodes at
    once); ``()`` for a node that did neither within ``PROBE_TIMEOUT``."""
    nodes = {nid: n for nid, n in _alive_nodes().items() if n.get("Resources", {}).get("CPU", 0) > 0}
    out: dict[str, tuple[str, ...]] = {}
    for nid, node in nodes.items():
        named = sorted(k[len(CPU_RESOURCE):] for k in node.get("Resources", {}) if k.startswith(CPU_RESOURCE))
        if named:
            out[nid] = tuple(named)
    ask = {_host_cpu.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(): nid
           for nid in nodes if nid not in out and nid not in _probed}
    if ask:
        done, late = ray.wait(list(ask), num_returns=len(ask), timeout=PROBE_TIMEOUT)
        for ref in done:
            try:
                _probed[ask[ref]] = ray.get(ref)
            except ray.exceptions.RayError as e:
                log.warning("the Ray node %s did not say what its CPU is: %s", _node_name(nodes[ask[ref]]),
                            _error_line(e))
        for ref in late:
            log.warning("the Ray node %s did not say what its CPU is within %.0f s", _node_name(nodes[ask[ref]]),
                        PROBE_TIMEOUT)
            ray.cancel(ref, force=True)
    for nid in nodes:
        if nid not in out:
            out[nid] = (_probed[nid],) if nid in _probed else ()
    return out


# ---------------------------------------------------------------------------
# actors: the workers' services, with a ping that says where they run
# ---------------------------------------------------------------------------


@ray.remote(max_restarts=-1, max_task_retries=0, enable_task_events=False)
class BuildActor(BuildService):
    """A Ray actor that builds candidates (see :class:`~autosched.measure.worker.BuildService`)."""

    def ping(self) -> tuple[int, str]:
        return os.getpid(), ray.get_runtime_context().get_node_id()


@ray.remote(max_restarts=-1, max_task_retries=0, enable_task_events=False)
class RunActor(RunService):
    """A Ray actor that loads, checks and times candidates (:class:`~autosched.measure.worker.RunService`)."""

    def __init__(self) -> None:
        super().__init__()
        self.worker.machine["node_id"] = ray.get_runtime_context().get_node_id()

    def ping(self) -> tuple[int, str]:
        return os.getpid(), ray.get_runtime_context().get_node_id()

    def put_data(self, data: Any) -> None:
        """``data`` is ``[reference]`` to the runner's one stored copy, fetched once per task per actor."""
        super().put_data(ray.get(data[0]))


class RayTransport(Transport):
    """Actors that are idle, busy, or coming back after a crash or a kill (waiting for a ping). An actor whose
    node is gone is dropped: Ray could only bring it back where CPUs are free, and a cluster that lost a node
    may have none."""

    node_check = NODE_CHECK

    def __init__(self, actors: list[Any], what: str, max_jobs: int | None = None):
        super().__init__(what, max_jobs)
        self.slots = [Slot(a) for a in actors]
        self.reviving: dict[Any, tuple[Slot, float]] = {}  # ping ref -> (slot, deadline)
        self._old_pid: dict[int, int] = {}  # id(slot) -> the pid of the process it was killed in (not back yet)
        self.lost_nodes: dict[str, str] = {}  # node id -> its name, for the nodes whose actors were dropped
        for slot in self.slots:
            self._ping(slot)

    @property
    def actors(self) -> list[Any]:
        return [s.handle for s in self.slots]

    def call(self, slot: Slot, method: str, *args: Any) -> Any:
        return getattr(slot.handle, method).remote(*args)

    def wait(self, calls: list, timeout: float) -> list[tuple[Any, Reply]]:
        waits = [*calls, *self.reviving]
        if not waits:
            return []
        done, _ = ray.wait(waits, num_returns=1, timeout=timeout)
        out = []
        for ref in done:
            if ref in self.reviving:
                self._ping_done(ref)
                continue
            try:
                out.append((ref, Reply(OK, ray.get(ref))))
            except _ACTOR_ERRORS as e:
                out.append((ref, Reply(DIED, _error_line(e))))
            except ray.exceptions.RayTaskError as e:  # a bug in the worker code, not the candidate
                out.append((ref, Reply(FAILED, _error_line(e))))
        return out

    def replace(self, slot: Slot, why: str) -> None:
        """A dead actor is restarted by Ray; one that missed a deadline, or is recycled, is killed first (Ray
        restarts it: its constructor runs anew). Either way it is back once a new process answers a ping: a
        ping sent right after the kill can still be answered by the dying process."""
        if why != DIED:
            if slot.pid is not None:
                self._old_pid[id(slot)] = slot.pid
            ray.kill(slot.handle, no_restart=False)
        self._ping(slot)

    def starting(self) -> bool:
        return bool(self.reviving)

    def _ping(self, slot: Slot) -> None:
        self.reviving[slot.handle.ping.remote()] = (slot, time.monotonic() + ACTOR_START_TIMEOUT)

    def _ping_done(self, ref: Any) -> None:
        slot, deadline = self.reviving.pop(ref)
        try:
            pid, node = ray.get(ref)
            if pid == self._old_pid.get(id(slot)):  # the killed process, still answering
                raise ray.exceptions.ActorUnavailableError("the actor's killed process still answers", None)
        except _ACTOR_ERRORS as e:
            if self.lost(slot):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"a Ray measurement actor did not come back within {ACTOR_START_TIMEOUT:.0f} s "
                    f"(last error: {_error_line(e)}); can every node import autosched, and does the "
                    f"cluster have CPUs free? (cluster resources: {ray.cluster_resources()})") from None
            time.sleep(0.05)
            self.reviving[slot.handle.ping.remote()] = (slot, deadline)
            return
        slot.pid, slot.node = pid, node
        self._old_pid.pop(id(slot), None)
        self.idle.append(slot)

    def lost(self, slot: Slot) -> bool:
        node = slot.node
        if node is None or (node not in self.lost_nodes and not _node_gone(node)):
            return False
        if node not in self.lost_nodes:
            self.lost_nodes[node] = node[:8]
            log.warning("the Ray node %s is gone: its %s are dropped, and what they had in flight goes to the "
                        "others (%d left)", node[:8], self.what, sum(1 for s in self.slots if s.node != node))
            for other in [s for s in self.idle if s.node == node]:
                self._drop(other)
        self._drop(slot)
        return True

    def _drop(self, slot: Slot) -> None:
        self.slots = [s for s in self.slots if s is not slot]
        self.idle = deque(s for s in self.idle if s is not slot)
        self.reviving = {r: v for r, v in self.reviving.items() if v[0] is not slot}
        with contextlib.suppress(ray.exceptions.RayError):
            ray.kill(slot.handle, no_restart=True)

    def check(self) -> None:
        _check_head()
        now = time.monotonic()
        for slot, deadline in list(self.reviving.values()):
            if now > deadline and not self.lost(slot):
                raise RuntimeError(
                    "a Ray measurement actor did not start within "
                    f"{ACTOR_START_TIMEOUT:.0f} s; is the cluster short of CPUs? "
                    f"(cluster resources: {ray.cluster_resources()}, available: {ray.available_resources()})")

    def none_left(self) -> ClusterError:
        gone = ", ".join(self.lost_nodes.values()) or "none known"
        return ClusterError(f"no Ray {self.what} are left: the nodes that ran them are gone (nodes {gone})")

    def close(self) -> None:
        """Let each actor clean up (a builder's directory on its node, a runner's libraries), then kill it."""
        if self.closed:
            return
        self.closed = True
        if not ray.is_initialized() or cluster_lost():
            return
        try:
            ray.get([a.cleanup.remote() for a in self.actors], timeout=10)
        except ray.exceptions.RayError as e:  # best effort: the actors are killed next
            log.warning("Ray %s: an actor did not clean up: %s", self.what, _error_line(e))
        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except ray.exceptions.RayError as e:  # already gone
                log.debug("killing a Ray actor: %s", e)


def _actor_cpus(n_actors: int, reserve: float) -> float:
    """CPUs to ask for per actor: one each when the cluster has them free (after ``reserve``), else an equal
    share of what is free, else none. Never more than is free, so a second builder or runner in the same
    process (or a busy cluster) oversubscribes a little instead of waiting forever for its actors."""
    free = max(0.0, float(ray.available_resources().get("CPU", 0.0)) - reserve)
    if n_actors <= free:
        return 1.0
    return int(free / n_actors * 100) / 100 if free > 0 else 0.0


# ---------------------------------------------------------------------------
# the builder and the runner
# ---------------------------------------------------------------------------


class RayBuilder(EngineBuilder):
    """Builds candidates on ``n_parallel`` Ray actors, by default one per CPU that Ray has.

    On one machine they share its CPUs but the one the runner takes: builds never run beside a timing there
    (the machine's measurement turn drains them), so the runner's CPU builds too while there is nothing to
    time. On a cluster (``cluster``) each takes a whole CPU, spread over the nodes, and runners take none: the
    measurer alternates building and timing there, and a node's measurement turn drains its builds, so a CPU
    kept for a runner would idle through every build phase (two one-CPU nodes would build one at a time).

    ``ship_artifacts`` (default: when the cluster has more than one node) puts
    each library's bytes in its result so a runner on another node can load it.
    """

    def __init__(self, n_parallel: int | None = None, timeout: float = 30.0, cache_dir: str | None = None,
                 address: str | None = None, ship_artifacts: bool | None = None):
        init_ray(address)
        total = _total_cpus()
        one_node = len(_alive_nodes()) <= 1
        n = int(n_parallel or max(1, int(total)))
        self.ship_artifacts = not one_node if ship_artifacts is None else ship_artifacts
        cpus = _actor_cpus(n, reserve=1.0 if one_node and total > 1 else 0.0)  # the runner's
        opts: dict[str, Any] = {"num_cpus": cpus}
        if self.ship_artifacts:
            opts["scheduling_strategy"] = "SPREAD"

        def actors(cache_dir: str) -> RayTransport:
            return RayTransport([BuildActor.options(**opts).remote(cache_dir, self.ship_artifacts) for _ in range(n)],
                                "builders", max_jobs=builds_per_worker())

        # at exit (Ctrl-C, a forgotten close) only our libraries go: Ray's shutdown takes the actors
        super().__init__(actors, n, timeout, cache_dir, stop_at_exit=False)
        self.cluster = not one_node


class RayRunner(EngineRunner):
    """Times candidates on Ray actors, one candidate at a time per machine.

    On one machine (a local Ray) ``n_parallel`` actors (default one) time every candidate there. On a cluster
    a task is timed only on the nodes whose CPU is its target's (``-mcpu``; by default the CPU of the machine
    that tunes), with ``n_parallel`` actors pinned to each, so those nodes time in parallel and the others
    only build. A node's CPU is what its ``autosched-cpu:NAME`` custom resources say (``ray start --resources
    '{"autosched-cpu:znver4": 1}'``), else what LLVM answers to a task pinned to it, asked once per node when
    a CPU's runners start: the probe needs no setup, and a label costs nothing and can keep a node out of the
    timings (name another CPU). :class:`ClusterError` names every node's CPU when none matches. Runners on a
    cluster take no CPU of Ray's: builds never run beside them (see :class:`RayBuilder`), and a node's
    measurement turn keeps other tuners' timings off it too.
    """

    def __init__(self, config: RunConfig | None = None, n_parallel: int = 1, seed: int = 0,
                 address: str | None = None, **config_kw: Any):
        if config_kw:
            config = (config or RunConfig()).replace(**config_kw)
        super().__init__(config, seed)
        init_ray(address)
        if n_parallel < 1:
            raise ValueError(f"RayRunner needs at least one actor, got n_parallel={n_parallel}")
        self.n_parallel = n_parallel
        self.cluster = not _one_machine()
        self._refs: OrderedDict[str, Any] = OrderedDict()
        if not self.cluster:  # started at once, as the runners of every task
            self.pool_for(None)

    def pool_for(self, target: Any) -> Transport:
        """The runners of ``target``: this machine's, or on a cluster those on the nodes of its CPU (started
        on first use). Targets other than CPUs (``cuda``) are timed wherever Ray puts one runner."""
        cpu = target.mcpu if self.cluster and target is not None and target.kind == "llvm" else ""
        pool = self._pools.get(cpu)
        if pool is not None:
            return pool
        if not cpu:
            cpus = _actor_cpus(self.n_parallel, reserve=0.0)
            actors = [RunActor.options(num_cpus=cpus).remote() for _ in range(self.n_parallel)]
        else:
            nodes = node_cpus()
            where = [nid for nid, names in nodes.items() if cpu in names]
            if not where:
                seen = {n["NodeID"]: n for n in ray.nodes()}
                said = ", ".join(f"{_node_name(seen.get(nid, {'NodeID': nid}))}: {'/'.join(names) or 'did not say'}"
                                 for nid, names in nodes.items()) or "none offers CPUs to Ray"
                raise ClusterError(
                    f"no node of the Ray cluster has the target's CPU {cpu} (nodes: {said}); tune for one of "
                    f"theirs (--target 'llvm -mcpu=NAME'), or name a node's CPU with ray start --resources "
                    f"'{{\"{CPU_RESOURCE}{cpu}\": 1}}'")
            log.info("timing %s candidates on %d Ray node(s): %s", cpu, len(where), ", ".join(w[:8] for w in where))
            actors = [RunActor.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False))
                      .remote() for nid in where for _ in range(self.n_parallel)]
        pool = self._pools[cpu] = RayTransport(actors, f"runners for {cpu}" if cpu else "runners")
        return pool

    def ship(self, data: Any) -> list:
        ref = self._refs.get(data.key)
        if ref is None:
            ref = self._refs[data.key] = ray.put(data)  # once per task: actors fetch it on first use
            while len(self._refs) > 8:  # the object store is small: keep the tasks in use
                self._refs.popitem(last=False)
        self._refs.move_to_end(data.key)
        return [ref]  # in a list, so Ray hands the actor the reference, not the object

    def close(self) -> None:
        super().close()
        self._refs.clear()


__all__ = ["BuildActor", "ClusterError", "ClusterLost", "RayBuilder", "RayRunner", "RayTransport", "RunActor",
           "cluster_lost", "init_ray", "node_cpus", "ray_address", "shutdown_ray"]
