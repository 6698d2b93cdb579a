"""What one reconcile observes of a RedisCluster: its pods (from the cache) and what each Redis says.

- :func:`observe` lists the cluster's pods (pods with an ordinal only), asks every pod with an IP
  ``INFO`` through a :class:`~examples.rediscluster.shared.redis_admin.RedisConnection` with the
  reconciler's I/O timeout (an unreachable Redis is observed as ``redis=None``, never an error),
  and notes the pods the scheduler could not place (``PodScheduled=False``, with its message).
- :class:`Observed` hands out the connection of any observed pod, so no caller repeats
  ``(ip, port, credentials, timeout)`` (a :class:`~examples.rediscluster.shared.redis_admin.RedisAccess`:
  password, ACL user, TLS CA).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.replication.topology_types import NodeObservation
from examples.rediscluster.shared.pods import ordinal, pod_condition, pod_facts
from examples.rediscluster.shared.redis_admin import (
    RedisAccess,
    RedisAdminError,
    RedisConnection,
    RedisUnavailable,
)
from examples.rediscluster.shared.resources import REDIS_PORT, ROLE_LABEL, selector_labels
from pyctrl.client import Pod, Reader

__all__ = ["Observed", "observe"]


@dataclass
class Observed:
    """The pods of one cluster, what each Redis answered, and how to reach them."""

    pods: dict[str, Pod]
    nodes: list[NodeObservation]
    access: RedisAccess
    io_timeout: float
    #: pod -> the scheduler's message, for pods it could not place (PodScheduled=False)
    unschedulable: dict[str, str] = field(default_factory=dict)

    def connection(self, pod: str) -> RedisConnection:
        """The Redis of ``pod``; ``RedisUnavailable`` while the pod has no IP."""
        p = self.pods[pod]
        ip = p.status.pod_ip if p.status else None
        if not ip:
            raise RedisUnavailable("", 0, f"pod {pod} has no IP yet")
        return self.access.at(ip, REDIS_PORT, self.io_timeout)

    def handing_over(self) -> bool:
        """True while some master runs a ``FAILOVER`` (``master_failover_state`` not idle)."""
        return any(n.redis is not None and n.redis.failover_state != "no-failover" for n in self.nodes)

    def endpoints(self) -> dict[str, RedisConnection | None]:
        """pod -> its Redis (None without an IP), for the health prober."""
        return {n.pod: self.connection(n.pod) if n.ip else None for n in self.nodes}


async def observe(client: Reader, cluster: RedisCluster, access: RedisAccess, io_timeout: float) -> Observed:
    """List the cluster's pods from the cache and ask each one's Redis what it is."""
    pod_list = await client.list(Pod, namespace=cluster.namespace, labels=selector_labels(cluster))
    pods = {p.name: p for p in pod_list if ordinal(p) >= 0}
    observed = Observed(pods, [], access, io_timeout)

    async def one(pod: Pod) -> NodeObservation:
        ip, facts = pod_facts(pod)["ip"], None
        if ip:
            try:
                facts = await observed.connection(pod.name).observe()
            except RedisAdminError:
                facts = None
        return NodeObservation(
            **pod_facts(pod),
            label=(pod.metadata.labels or {}).get(ROLE_LABEL),
            terminating=bool(pod.metadata.deletion_timestamp),
            redis=facts,
            node=(pod.spec.node_name if pod.spec else None) or None,
        )

    observed.nodes = list(await asyncio.gather(*(one(p) for p in pods.values())))
    for name, pod in sorted(pods.items()):
        scheduled, _, message = pod_condition(pod, "PodScheduled")
        if scheduled == "False":
            observed.unschedulable[name] = message or "not scheduled"
    return observed
