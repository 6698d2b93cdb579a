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
- ``stop()`` cancels the loop and every in-flight probe and returns only once all of them ended.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from examples.rediscluster.replication.topology_types import DownDetector
from examples.rediscluster.shared.redis_admin import RedisConnection
from examples.rediscluster.shared.tasks import cancel_and_wait

__all__ = ["ClusterKey", "Endpoints", "HealthProber", "Probe"]

log = logging.getLogger(__name__)

ClusterKey = tuple[str, str]  # (namespace, cluster name)
Probe = Callable[[RedisConnection], Awaitable[None]]  # returns on a valid reply, else raises
#: pod -> its Redis; None while the pod has no IP (counts as a failed probe)
Endpoints = Mapping[str, RedisConnection | None]


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
        probe: Probe = RedisConnection.ping,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self._notify = notify
        self._interval = interval
        self._probe = probe
        self._clock = clock
        self._clusters: dict[ClusterKey, _Cluster] = {}
        self._inflight: dict[tuple[ClusterKey, str], asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None

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
        now = self._clock()
        for pod in cluster.endpoints:
            cluster.detectors.setdefault(pod, DownDetector(since=now))

    def forget(self, key: ClusterKey) -> None:
        """Stop probing a cluster (deleted); its in-flight probes finish and are ignored."""
        cluster = self._clusters.pop(key, None)
        if cluster is not None and cluster.deadline is not None:
            cluster.deadline.cancel()

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
                    await self._probe(endpoint)
        except Exception as exc:  # any failure is "no valid reply" (RedisAdminError, timeout, a bug)
            log.debug("probe %s/%s %s: %s", *key, pod, exc)
            ok = False
        finally:
            self._inflight.pop((key, pod), None)
        detector = self._detector(key, pod)
        if detector is not None:
            detector.record(self._clock(), ok)
            self._report(key)

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
