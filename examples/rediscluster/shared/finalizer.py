"""The RedisCluster finalizer ``redis.pyctrl.dev/finalizer``: a final snapshot before deletion.

- :func:`finalizer_patch` is the one merge patch that writes the finalizer list (with the
  object's resourceVersion, so a concurrent change gets Conflict and the reconcile retries);
  adding and removing the finalizer both send it;
- :func:`ensure_finalizer`: step 3 of a reconcile, the finalizer added when missing;
- :func:`finalize` (step 2, the object is being deleted): :func:`snapshot`, then the finalizer is
  removed;
- :func:`snapshot`: with persistence and a recorded master, start a
  ``BGSAVE`` on the master (the annotation ``redis.pyctrl.dev/snapshot-started`` records that it
  was started) and return False on later reconciles until it finished — never blocking a worker
  (REFERENCE "Operator rules") — then an Event ``SnapshotTaken``; a master pod that is gone, has
  no IP or does not answer is a ``SnapshotSkipped`` Event instead; then the finalizer is removed
  and garbage collection takes the children.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.shared.redis_admin import RedisAccess, RedisUnavailable
from examples.rediscluster.shared.resources import REDIS_PORT
from pyctrl.client import Client, Pod
from pyctrl.client.errors import NotFound
from pyctrl.client.patch import PatchType, RawPatch
from pyctrl.controllerutil import add_finalizer, remove_finalizer
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = ["FINALIZER", "SNAPSHOT_STARTED", "ensure_finalizer", "finalize", "finalizer_patch", "snapshot"]

FINALIZER = "redis.pyctrl.dev/finalizer"
SNAPSHOT_STARTED = "redis.pyctrl.dev/snapshot-started"


log = get_logger("rediscluster")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def finalizer_patch(cluster: RedisCluster) -> RawPatch:
    """The merge patch writing ``cluster``'s current finalizer list (None when empty)."""
    meta = cluster.metadata
    return RawPatch(
        PatchType.MERGE,
        {"metadata": {"finalizers": meta.finalizers or None, "resourceVersion": meta.resource_version}},
    )


async def snapshot(
    client: Client,
    recorder: EventRecorder,
    cluster: RedisCluster,
    access: Callable[[], Awaitable[RedisAccess]],
    io_timeout: float,
) -> bool:
    """Start a BGSAVE on the recorded master, then report (on later calls) whether it finished.

    True at once without persistence or a recorded master; ``access`` (password, TLS CA) is read
    only when there is a master to save from (a missing Secret never blocks a deletion that needs
    no snapshot)."""
    master = cluster.status.current_master if cluster.status else None
    if not cluster.spec.enable_persistence or master is None:
        return True
    try:
        pod = await client.get(Pod, master, namespace=cluster.namespace)
    except NotFound:
        pod = None
    ip = pod.status.pod_ip if pod is not None and pod.status else None
    if not ip:  # nothing running to save from: say so, as for an unreachable master
        why = "not found" if pod is None else "has no IP"
        recorder.event(
            cluster,
            "Warning",
            "SnapshotSkipped",
            f"master pod {master} {why}; deleting without a final snapshot",
        )
        return True
    redis = (await access()).at(ip, REDIS_PORT, io_timeout)
    try:
        if SNAPSHOT_STARTED not in (cluster.metadata.annotations or {}):
            await redis.bgsave()
            await client.patch(
                cluster, RawPatch(PatchType.MERGE, {"metadata": {"annotations": {SNAPSHOT_STARTED: _now()}}})
            )
            return False
        status = await redis.bgsave_status()
    except RedisUnavailable:
        recorder.event(
            cluster,
            "Warning",
            "SnapshotSkipped",
            f"master {master} unreachable; deleting without a final snapshot",
        )
        return True
    if status.in_progress:
        return False
    recorder.event(cluster, "Normal", "SnapshotTaken", f"final BGSAVE on {master}: {status.last_status}")
    return True


async def ensure_finalizer(client: Client, cluster: RedisCluster) -> RedisCluster:
    """``cluster`` with the finalizer (patched in when it was missing)."""
    if add_finalizer(cluster, FINALIZER):
        return await client.patch(cluster, finalizer_patch(cluster))
    return cluster


async def finalize(
    client: Client,
    recorder: EventRecorder,
    cluster: RedisCluster,
    access: Callable[[RedisCluster], Awaitable[RedisAccess]],
    io_timeout: float,
) -> bool:
    """The snapshot, then the finalizer removed; False while the snapshot still runs (requeue).

    True at once when the finalizer is not (or no longer) there."""
    if FINALIZER not in (cluster.metadata.finalizers or []):
        return True
    if not await snapshot(client, recorder, cluster, lambda: access(cluster), io_timeout):
        return False
    remove_finalizer(cluster, FINALIZER)
    await client.patch(cluster, finalizer_patch(cluster))
    log.info("Finalizer removed", cluster=cluster.name, namespace=cluster.namespace)
    return True
