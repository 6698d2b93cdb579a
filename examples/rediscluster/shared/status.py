"""Status conditions (``metav1.Condition``) of a RedisCluster, written the same way by every step.

- :func:`condition` mirrors apimachinery's ``meta.SetStatusCondition``: ``lastTransitionTime``
  moves only when the condition's status changes;
- :func:`reported`: the fields both modes report the same way — phase, ready pods, the Ready and
  Degraded conditions (an invalid spec is the reason and message of both), the scale selector;
- :func:`write_status` is step 7 of a reconcile, in both modes: the status subresource is written
  only when it changed (``lastSyncTimestamp`` marks the last change), with an optimistic lock: a
  Conflict (a stale read) propagates and the controller requeues it without an error log;
  :func:`publish_status` first has the operator's metrics follow the new status.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.shared import metrics
from examples.rediscluster.shared.children import CONFLICT_PREFIX
from examples.rediscluster.shared.resources import selector
from examples.rediscluster.shared.security.auth import password_ref
from pyctrl.client import Client
from pyctrl.client.objects import Condition
from pyctrl.client.patch import MergeFrom

__all__ = ["condition", "now", "publish_status", "reported", "write_status"]


def now() -> str:
    """The current time as the status writes it (RFC 3339, seconds, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    old: RedisClusterStatus, type_: str, status: bool, reason: str, message: str, *, now: str
) -> Condition:
    """The condition ``type_`` as it should be now; its ``lastTransitionTime`` kept from ``old``
    while its status does not change (so a converged status stays byte-for-byte the same)."""
    value = "True" if status else "False"
    prev = next((c for c in old.conditions if c.type == type_), None)
    since = prev.last_transition_time if prev is not None and prev.status == value else now
    return Condition(type=type_, status=value, reason=reason, message=message, last_transition_time=since)


async def write_status(client: Client, cluster: RedisCluster, new: RedisClusterStatus) -> None:
    """Write ``new`` when it differs from ``cluster``'s status (``lastSyncTimestamp`` aside)."""
    old = cluster.status or RedisClusterStatus()
    if new.model_dump(exclude={"last_sync_timestamp"}) == old.model_dump(exclude={"last_sync_timestamp"}):
        return  # nothing changed: no write
    new.last_sync_timestamp = now()
    before = cluster.model_copy(deep=True)
    cluster.status = new
    await client.status().patch(cluster, MergeFrom(before, optimistic_lock=True))


async def publish_status(
    client: Client, cluster: RedisCluster, new: RedisClusterStatus, *, pods: int
) -> None:
    """The status step's writes, the same in both modes: the operator's metrics follow ``new``
    (``pods``: how many the spec asks for), then :func:`write_status`."""
    metrics.observe_status(cluster.namespace, cluster.name, pods, new)
    await write_status(client, cluster, new)


def reported(
    cluster: RedisCluster,
    phase: RedisClusterPhase,
    *,
    ready: int,
    message: str,
    reasons: tuple[str, str],
    invalid_spec: str | None,
    invalid_detail: str,
    conditions: Sequence[Condition],
    now: str,
    **more: object,
) -> RedisClusterStatus:
    """``cluster``'s status with ``phase`` and ``ready`` pods; Ready True (reason ``reasons[0]``)
    when Running, else its reason is the phase; Degraded True (``reasons[1]``) when Degraded, else
    ``AsExpected``; with ``invalid_spec`` both say ``InvalidSpec`` and "nothing of the spec was
    applied (``invalid_detail``)"; then ``conditions`` and the mode's own fields (``more``)."""
    old = cluster.status or RedisClusterStatus()
    running, degraded = phase is RedisClusterPhase.RUNNING, phase is RedisClusterPhase.DEGRADED
    ready_reason = reasons[0] if running else phase.value
    degraded_reason = reasons[1] if degraded else "AsExpected"
    if invalid_spec is not None:
        message = f"{invalid_spec}; nothing of the spec was applied ({invalid_detail})"
        ready_reason = degraded_reason = (
            "Conflict" if invalid_spec.startswith(CONFLICT_PREFIX) else "InvalidSpec"
        )
    health = [
        condition(old, "Ready", running, ready_reason, message, now=now),
        condition(old, "Degraded", degraded, degraded_reason, message, now=now),
    ]
    update = {
        "phase": phase,
        "ready_replicas": ready,
        "observed_generation": cluster.metadata.generation,
        "conditions": [*health, *conditions],
        "selector": selector(cluster),
        # the name only, never the value
        "auth_secret": None if (ref := password_ref(cluster)) is None else ref[0],
    }
    return old.model_copy(update=update | more)
