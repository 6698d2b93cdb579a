"""Background health prober of the RedisCluster operator: PING every pod, report master changes.

The operator registers each cluster's pods with :meth:`HealthProber.watch` (every reconcile may call
it again; unchanged registrations keep their history) and feeds the ``notify`` callback into a
``Channel`` source, e.g. ``notify=lambda key: queue.put_nowait(GenericEvent(key))``. Reconcile then
reads :meth:`HealthProber.master_unhealthy_for` instead of waiting on Redis itself (REFERENCE
"Operator rules": never block in reconcile).

Guarantees:
- Every registered pod is probed every ``interval`` seconds with a short-timeout PING
  (``RedisConnection.ping``: PONG, -LOADING and -MASTERDOWN are valid replies, as in Sentinel). At
  most one probe per pod is in flight, so a hung Redis (SIGSTOP) delays only its own probes, which
  end after ``2 * io_timeout + 0.5`` s at most (the connection's ``io_timeout``).
- History is kept per pod, not per address: a pod whose IP changes, or that has none (registered
  as ``None``, a failed probe), keeps its :class:`~examples.rediscluster.replication.topology.DownDetector`.
  A pod's window starts when it is registered, so a first probe that hangs still counts from when
  it was sent.
- The master is *down* only after no valid reply for the cluster's whole ``down_after`` window
  (REFERENCE "never promote on one bad probe"); times come from the injected monotonic ``clock``.
- ``notify(key)`` is called when a cluster's health changes: the master becomes down (window
  elapsed) or recovers, or a pod starts or stops answering (so a returning old master is fenced
  promptly). Repeated identical states notify once. While the master is failing, a timer at the
  end of its window reports it down at that instant, not at the next probe (up to ``interval``
  later).
- Probes reuse one kept-open connection per pod
  (:class:`~examples.rediscluster.shared.redis_admin.KeptConnection`; connecting, AUTH and
  closing were most of a probe's cost), at most ``max_kept`` of them; past
  that, a probe opens and closes its own. A pod's connection is closed when the pod leaves its
  cluster's registration, when its address or credentials change, when the cluster is
  forgotten (deleted, or handed to another operator replica) and on ``stop()``; a failed probe
  closes it too, so the next probe starts on a fresh one.
- ``stop()`` cancels the loop and every in-flight probe, closes every kept connection and returns
  only once all of them ended.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client import Gauge

from examples.rediscluster.replication.topology_types import DownDetector
from examples.rediscluster.shared.redis_admin import KeptConnection, RedisConnection
from examples.rediscluster.shared.tasks import cancel_and_wait
from pyctrl.metrics import registry

__all__ = ["ClusterKey", "Endpoints", "HealthProber", "Probe"]

log = logging.getLogger(__name__)

ClusterKey = tuple[str, str]  # (namespace, cluster name)
Probe = Callable[[RedisConnection], Awaitable[None]]  # returns on a valid reply, else raises
#: pod -> its Redis; None while the pod has no IP (counts as a failed probe)
Endpoints = Mapping[str, RedisConnection | None]
PodKey = tuple[ClusterKey, str]

_probed = Gauge(
    "rediscluster_prober_clusters", "RedisClusters whose pods the health prober probes.", registry=registry
)
_kept = Gauge(
    "rediscluster_prober_connections", "Connections the health prober keeps open to pods.", registry=registry
)


@dataclass(slots=True)
class _Cluster:
    endpoints: dict[str, RedisConnection | None]
    master: str | None
    down_after: float
    detectors: dict[str, DownDetector] = field(default_factory=dict)
    state: tuple[bool, frozenset[str]] = (False, frozenset())  # (master down, pods failing)
    deadline: asyncio.TimerHandle | None = None  # re-evaluates when the master's window ends


class HealthProber:
    """Probe registered Redis pods in the background; see the module docstring for guarantees."""

    def __init__(
        self,
        notify: Callable[[ClusterKey], None],
        *,
        interval: float = 0.5,
        probe: Probe | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_kept: int = 1024,
    ) -> None:
        """``probe``: how one pod is probed (default: PING on the pod's kept connection)."""
        if interval <= 0:
            raise ValueError("interval must be positive")
        if max_kept < 0:
            raise ValueError("max_kept must be >= 0")
        self._notify = notify
        self._interval = interval
        self._probe = probe
        self._clock = clock
        self._clusters: dict[ClusterKey, _Cluster] = {}
        self._inflight: dict[PodKey, asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._max_kept = max_kept
        self._kept: dict[PodKey, KeptConnection] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def watch(
        self,
        key: ClusterKey,
        endpoints: Endpoints,
        *,
        master: str | None,
        down_after: float,
    ) -> None:
        """Register or update a cluster: all its pods, the recorded master and its down-after window."""
        cluster = self._clusters.get(key)
        if cluster is None:
            cluster = self._clusters[key] = _Cluster(dict(endpoints), master, down_after)
        cluster.endpoints = dict(endpoints)
        cluster.master, cluster.down_after = master, down_after
        for pod in list(cluster.detectors):
            if pod not in cluster.endpoints:
                del cluster.detectors[pod]
        for pod_key, kept in list(self._kept.items()):
            if pod_key[0] == key and cluster.endpoints.get(pod_key[1]) != kept.conn:
                self._close(pod_key)  # the pod left, or its address or credentials changed
        now = self._clock()
        for pod in cluster.endpoints:
            cluster.detectors.setdefault(pod, DownDetector(since=now))
        _probed.set(len(self._clusters))

    def forget(self, key: ClusterKey) -> None:
        """Stop probing a cluster (deleted, or handed to another replica) and close its kept
        connections; its in-flight probes finish and are ignored."""
        cluster = self._clusters.pop(key, None)
        if cluster is not None and cluster.deadline is not None:
            cluster.deadline.cancel()
        for pod_key in [k for k in self._kept if k[0] == key]:
            self._close(pod_key)
        _probed.set(len(self._clusters))

    @property
    def probed(self) -> frozenset[ClusterKey]:
        """The clusters registered for probing."""
        return frozenset(self._clusters)

    @property
    def kept_connections(self) -> int:
        """Connections kept open to pods (at most ``max_kept``)."""
        return len(self._kept)

    def _close(self, pod_key: PodKey) -> None:
        kept = self._kept.pop(pod_key, None)
        _kept.set(len(self._kept))
        if kept is not None:
            task = asyncio.get_running_loop().create_task(kept.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def last_valid_reply(self, key: ClusterKey, pod: str) -> float | None:
        """Clock time of the pod's last valid reply (None: never, or not registered)."""
        detector = self._detector(key, pod)
        return detector.last_valid_reply if detector is not None else None

    def unhealthy_for(self, key: ClusterKey, pod: str) -> float:
        """Seconds without a valid reply (0 while the latest probe succeeded or none ran yet)."""
        detector = self._detector(key, pod)
        return detector.unhealthy_for(self._clock()) if detector is not None else 0.0

    def master_unhealthy_for(self, key: ClusterKey) -> float:
        """``unhealthy_for`` of the registered master, the input of ``topology.plan``."""
        cluster = self._clusters.get(key)
        return self.unhealthy_for(key, cluster.master) if cluster and cluster.master else 0.0

    def master_down(self, key: ClusterKey) -> bool:
        """True once the master has had no valid reply for the whole down-after window."""
        return self._evaluate(key)[0] if key in self._clusters else False

    def _detector(self, key: ClusterKey, pod: str) -> DownDetector | None:
        cluster = self._clusters.get(key)
        return cluster.detectors.get(pod) if cluster is not None else None

    async def start(self) -> None:
        if self._loop_task is not None:
            raise RuntimeError("prober already started")
        self._loop_task = asyncio.create_task(self._run(), name="rediscluster-health-prober")

    async def stop(self) -> None:
        tasks = [t for t in (self._loop_task, *self._inflight.values()) if t is not None]
        self._loop_task = None
        for cluster in self._clusters.values():
            if cluster.deadline is not None:
                cluster.deadline.cancel()
                cluster.deadline = None
        await cancel_and_wait(tasks)
        self._inflight.clear()
        for pod_key in list(self._kept):
            self._close(pod_key)
        while self._closing:
            await asyncio.wait(list(self._closing))

    async def _run(self) -> None:
        while True:
            self._tick()
            await asyncio.sleep(self._interval)

    def _tick(self) -> None:
        for key, cluster in list(self._clusters.items()):
            for pod, endpoint in cluster.endpoints.items():
                if (key, pod) not in self._inflight:
                    self._inflight[(key, pod)] = asyncio.create_task(
                        self._probe_once(key, pod, endpoint), name=f"probe {key} {pod}"
                    )
            self._report(key)

    async def _probe_once(self, key: ClusterKey, pod: str, endpoint: RedisConnection | None) -> None:
        try:
            ok = endpoint is not None
            if endpoint is not None:
                async with asyncio.timeout(2 * endpoint.io_timeout + 1):
                    await self._probe_pod((key, pod), endpoint)
        except Exception as exc:  # any failure is "no valid reply" (RedisAdminError, timeout, a bug)
            log.debug("probe %s/%s %s: %s", *key, pod, exc)
            ok = False
        finally:
            self._inflight.pop((key, pod), None)
        detector = self._detector(key, pod)
        if detector is not None:
            detector.record(self._clock(), ok)
            self._report(key)

    async def _probe_pod(self, pod_key: PodKey, endpoint: RedisConnection) -> None:
        if self._probe is not None:
            await self._probe(endpoint)
            return
        kept = self._kept.get(pod_key)
        if kept is not None and kept.conn != endpoint:
            self._close(pod_key)
            kept = None
        if kept is None:
            if len(self._kept) >= self._max_kept or pod_key[0] not in self._clusters:
                await endpoint.ping()  # its own connection, opened and closed
                return
            kept = self._kept[pod_key] = KeptConnection(endpoint)
            _kept.set(len(self._kept))
        await kept.ping()

    def _evaluate(self, key: ClusterKey) -> tuple[bool, frozenset[str]]:
        cluster = self._clusters[key]
        now = self._clock()
        master = cluster.detectors.get(cluster.master) if cluster.master is not None else None
        down = master is not None and master.is_down(now, cluster.down_after)
        failing = frozenset(pod for pod, d in cluster.detectors.items() if not d.answering)
        return down, failing

    def _arm_deadline(self, key: ClusterKey, cluster: _Cluster) -> None:
        """While the master fails, evaluate again exactly when its down-after window ends."""
        if cluster.deadline is not None:
            cluster.deadline.cancel()
            cluster.deadline = None
        detector = cluster.detectors.get(cluster.master) if cluster.master is not None else None
        if detector is None or detector.answering or self._loop_task is None:
            return
        remaining = cluster.down_after - detector.unhealthy_for(self._clock())
        if remaining > 0:
            cluster.deadline = asyncio.get_running_loop().call_later(remaining, self._report, key)

    def _report(self, key: ClusterKey) -> None:
        cluster = self._clusters.get(key)
        if cluster is None:
            return
        self._arm_deadline(key, cluster)
        state = self._evaluate(key)
        if state == cluster.state:
            return
        cluster.state = state
        try:
            self._notify(key)
        except Exception:  # a broken sink must not stop the probing of every cluster
            log.exception("prober notify(%s) failed", key)
