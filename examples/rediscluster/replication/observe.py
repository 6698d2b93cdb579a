"""What one reconcile observes of a RedisCluster: its pods (from the cache) and what each Redis says.

- :func:`read_password` reads the password Secret through the API reader (Secrets are not
  cached); a missing Secret or key is an Event ``SecretMissing`` and an error (a missing key is
  terminal: only an edit of the Secret or the spec fixes it). The value is never logged.
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
import base64
import datetime
from dataclasses import dataclass, field

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.replication.topology import NodeObservation
from examples.rediscluster.shared.redis_admin import (
    RedisAccess,
    RedisAdminError,
    RedisConnection,
    RedisUnavailable,
)
from examples.rediscluster.shared.resources import REDIS_CONTAINER, REDIS_PORT, ROLE_LABEL, selector_labels
from pyctrl import TerminalError
from pyctrl.client import Pod, Reader, Secret
from pyctrl.client.errors import NotFound
from pyctrl.recorder import EventRecorder

__all__ = ["Observed", "not_ready_for", "observe", "ordinal", "pod_ready", "read_password", "seconds_since"]


def ordinal(pod: Pod) -> int:
    """The StatefulSet ordinal of ``pod`` (-1 for a name without one)."""
    tail = pod.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _condition(pod: Pod, type_: str) -> tuple[str | None, str | None, str | None]:
    """(status, lastTransitionTime, message) of the pod's condition ``type_``."""
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == type_:
            return c.status, c.last_transition_time, c.message
    return None, None, None


def pod_ready(pod: Pod) -> tuple[bool, str | None]:
    """(Ready, lastTransitionTime of the Ready condition)."""
    status, since, _ = _condition(pod, "Ready")
    return status == "True", since


def not_ready_for(pod: Pod) -> float:
    """Seconds ``pod`` has been NotReady since it was Ready in its current container run.

    0 while it is Ready, and 0 while it has not been Ready yet since its Redis container (re)started:
    a Redis that is starting — a master just chosen at bootstrap, a restarted one — is not a failing
    one (the prober's PINGs say whether it answers). Counting from the pod's creation instead made
    a freshly promoted master whose readiness probe had not passed yet look down for longer than
    ``downAfterMilliseconds``, and fail over at once.
    """
    ready, since = pod_ready(pod)
    statuses = (pod.status.container_statuses if pod.status else None) or []
    running = next((c.state or {} for c in statuses if c.name == REDIS_CONTAINER), {}).get("running")
    started = running.get("startedAt") if isinstance(running, dict) else None
    if ready or not since or not started or _time(since) <= _time(started):
        return 0.0
    return seconds_since(since)


def _time(rfc3339: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))


def seconds_since(rfc3339: str | None) -> float:
    """Seconds from an RFC 3339 time to now (0 for None or a time in the future)."""
    if not rfc3339:
        return 0.0
    return max(0.0, (datetime.datetime.now(datetime.UTC) - _time(rfc3339)).total_seconds())


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


async def read_password(api_reader: Reader, recorder: EventRecorder, cluster: RedisCluster) -> str | None:
    """The cluster's password from its Secret, or None without ``spec.auth``."""
    auth = cluster.spec.auth
    if auth is None:
        return None
    ref = auth.password_secret
    try:
        secret = await api_reader.get(Secret, ref.name, namespace=cluster.namespace)
    except NotFound:
        recorder.event(cluster, "Warning", "SecretMissing", f"Secret {ref.name} not found")
        raise
    value = (secret.data or {}).get(ref.key)
    if value is None:
        msg = f"Secret {ref.name} has no key {ref.key!r}"
        recorder.event(cluster, "Warning", "SecretMissing", msg)
        raise TerminalError(msg)
    return base64.b64decode(value).decode()


async def observe(client: Reader, cluster: RedisCluster, access: RedisAccess, io_timeout: float) -> Observed:
    """List the cluster's pods from the cache and ask each one's Redis what it is."""
    pod_list = await client.list(Pod, namespace=cluster.namespace, labels=selector_labels(cluster))
    pods = {p.name: p for p in pod_list if ordinal(p) >= 0}
    observed = Observed(pods, [], access, io_timeout)

    async def one(pod: Pod) -> NodeObservation:
        ip = pod.status.pod_ip if pod.status else None
        facts = None
        if ip:
            try:
                facts = await observed.connection(pod.name).observe()
            except RedisAdminError:
                facts = None
        return NodeObservation(
            pod=pod.name,
            ordinal=ordinal(pod),
            ip=ip,
            port=REDIS_PORT,
            pod_ready=pod_ready(pod)[0],
            label=(pod.metadata.labels or {}).get(ROLE_LABEL),
            terminating=bool(pod.metadata.deletion_timestamp),
            redis=facts,
            node=(pod.spec.node_name if pod.spec else None) or None,
        )

    observed.nodes = list(await asyncio.gather(*(one(p) for p in pods.values())))
    for name, pod in sorted(pods.items()):
        scheduled, _, message = _condition(pod, "PodScheduled")
        if scheduled == "False":
            observed.unschedulable[name] = message or "not scheduled"
    return observed
