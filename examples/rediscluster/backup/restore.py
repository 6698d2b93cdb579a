"""Restore: a new RedisCluster with ``spec.restoreFrom`` is seeded from a RedisBackup before any of
its pods can become master.

How: every pod of the StatefulSet gets the init container ``restore`` (``job.restore_init_container``),
which downloads the backup into ``/data/dump.rdb`` and checks its size and SHA-256 against the
RedisBackup's status *before* redis-server starts (Redis loads ``dump.rdb`` at start). So whichever
pod the operator promotes first holds the data, and the replicas then sync from it. A pod that fails
the check never starts Redis, is never Ready and so is never promoted.

Guarantees (``restore_state``, called by the RedisCluster reconciler):

- backup missing, not (yet) Succeeded, or without a checksum → no child at all is applied (no pod
  can start empty and look healthy); condition ``Restored`` False, reason ``RestoreFailed`` (or
  ``RestorePending`` while the backup is still running) with the reason, and a Warning Event when
  it first fails;
- a pod's ``restore`` init container failed (corrupt or unreadable backup) → ``RestoreFailed`` with
  the worker's message; nothing is promoted because no pod gets ready;
- the recorded master serves → ``Restored`` True naming the backup, its location and checksum; the
  ConfigMap ``<cluster>-restore`` (``done: "true"``) is written then, which the init container reads
  (optional ``configMapKeyRef``) so pods created later (failover, scale-out) skip the download and
  sync from the master instead of booting with the backup's data;
- Restored stays True once reached (it records what the cluster was seeded from).

Cluster mode (``mode: cluster``, a backup per shard: ``backup.shards``): only each shard's first
pod is seeded, from its shard's RDB (the manifest checked against the RedisBackup's SHA-256, the
RDB against the manifest) before redis-server starts; a node holding keys of unassigned slots
claims them at start, and the slots without keys go to the shard that held them in the backup
(:attr:`RestoreState.slot_homes`, the plan's ``recorded``), so every slot returns to its shard
with its keys before anything serves it. ``spec.shards`` may exceed the backup's shard count (the
new shards start empty and the rebalance fills them), not fall short of it. ``Restored`` is True
once every slot is assigned and each of the backup's shards has a master serving slots. A backup
restores a cluster of its own mode only (RestoreFailed otherwise).

With ``enablePersistence: true`` Redis loads its AOF, not ``dump.rdb``: the init container makes
the checked RDB the base file of a multi-part AOF (``backup.aof``; ``appenddirname`` and
``appendfilename`` of ``redisConfig`` honoured), and leaves a volume that holds an AOF already
as it is (a pod restarted before the restore was done keeps what it has).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import BackupPhase, RedisBackup
from examples.rediscluster.backup.archiving import ARCHIVER_UID, pitr_init_container
from examples.rediscluster.backup.job import restore_init_container, restore_volumes
from examples.rediscluster.backup.shards import cluster_restore_init_container
from examples.rediscluster.cluster.slots import SLOTS, parse_ranges
from pyctrl.client import Client, ConfigMap, Pod
from pyctrl.client.errors import NotFound
from pyctrl.client.objects import Condition
from pyctrl.controllerutil import set_controller_reference
from pyctrl.recorder import EventRecorder

__all__ = ["RESTORED", "RestoreState", "restore_state"]

RESTORED = "Restored"


@dataclass(frozen=True)
class RestoreState:
    """What the restore asks of this reconcile."""

    init_container: dict[str, Any] | None = None
    volumes: list[dict[str, Any]] = field(default_factory=list)
    blocked: str | None = None  # why no child may be applied yet
    condition: Condition | None = None
    slot_homes: Mapping[int, frozenset[int]] = field(default_factory=dict)  # cluster mode: shard -> slots
    fs_group: int | None = None  # the pod's fsGroup the init container needs (it runs as non-root)

    def apply(self, children: list[dict[str, Any]]) -> None:
        """Add the restore init container and its volumes to the StatefulSet among ``children``."""
        if self.init_container is None:
            return
        for child in children:
            if child["kind"] == "StatefulSet":
                pod = child["spec"]["template"]["spec"]
                pod["initContainers"] = [self.init_container]
                pod["volumes"] = [*pod["volumes"], *self.volumes]
                if self.fs_group is not None:
                    pod.setdefault("securityContext", {}).setdefault("fsGroup", self.fs_group)


def _condition(cluster: RedisCluster, status: bool, reason: str, message: str, now: str) -> Condition:
    value = "True" if status else "False"
    old = next((c for c in (cluster.status.conditions if cluster.status else []) if c.type == RESTORED), None)
    same = old is not None and old.status == value and old.reason == reason
    since = old.last_transition_time if same and old is not None else now
    return Condition(type=RESTORED, status=value, reason=reason, message=message, last_transition_time=since)


def _failed_restore(pods: Mapping[str, Pod]) -> str | None:
    """The message of a failed ``restore`` init container, if any pod has one."""
    for pod in pods.values():
        for status in (pod.status.init_container_statuses if pod.status else None) or []:
            if status.name != "restore":
                continue
            for state in (status.state or {}, status.last_state or {}):
                terminated = state.get("terminated") or {}
                if terminated and terminated.get("exitCode", 0) != 0:
                    text = str(terminated.get("message") or f"exit code {terminated.get('exitCode')}").strip()
                    last = text.splitlines()[-1] if text else text
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        last = str(json.loads(last)["error"])  # backup.pitr's {"error": ...} line
                    return f"pod {pod.name}: {last}"
    return None


def _unfit(cluster: RedisCluster, backup: RedisBackup) -> str | None:
    """Why ``backup`` cannot seed ``cluster`` (its mode, its shard count), or None."""
    shards = backup.status.shards if backup.status else None
    if (shards is not None) != (cluster.spec.mode == "cluster"):
        held = "one RDB" if shards is None else f"one RDB per shard of {len(shards)} shards"
        mode = "replication" if shards is None else "cluster"
        return f"RedisBackup {backup.name!r} holds {held}: it restores a {mode}-mode RedisCluster only"
    if shards is not None and cluster.spec.shards < len(shards):
        return (
            f"RedisBackup {backup.name!r} holds {len(shards)} shards: spec.shards must be at least "
            f"that ({cluster.spec.shards})"
        )
    return None


def _serving(cluster: RedisCluster, homes: Mapping[int, Any] | None) -> tuple[bool, str]:
    """(the seeded data serves, who serves it): the recorded master with a replica Ready; in
    cluster mode (``homes``: the backup's shards) every slot assigned, each of the backup's shards
    with a master serving slots."""
    status = cluster.status
    if homes is None:
        master = status.current_master if status else None
        return (
            master is not None and status is not None and status.ready_replicas > 0,
            f"first master {master}",
        )
    shards = {s.index: s for s in (status.shards or [])} if status else {}
    masters = [shards[i].master if i in shards and shards[i].slot_count else None for i in homes]
    serving = status is not None and status.slots_assigned == SLOTS and all(masters)
    return serving, f"{len(masters)} shards, masters {', '.join(str(m) for m in masters)}"


async def _record_done(client: Client, cluster: RedisCluster) -> None:
    """Create (once) the cluster-owned ConfigMap that records its restore as done."""
    cm = _done_config_map(cluster)
    set_controller_reference(cluster, cm)
    try:
        await client.get(ConfigMap, cm["metadata"]["name"], namespace=cluster.namespace)
    except NotFound:
        await client.create(cm)


def _done_config_map(cluster: RedisCluster) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{cluster.name}-restore", "namespace": cluster.namespace},
        "data": {"done": "true"},
    }


async def restore_state(
    client: Client,
    recorder: EventRecorder,
    cluster: RedisCluster,
    pods: Mapping[str, Pod],
    *,
    image: str,
    now: str,
) -> RestoreState:
    """What this reconcile must do for the restore; an Event when its condition changes reason."""
    state = await _restore_state(client, cluster, pods, image, now)
    old = next((c for c in (cluster.status.conditions if cluster.status else []) if c.type == RESTORED), None)
    new = state.condition
    if (
        new is not None
        and (old is None or old.reason != new.reason)
        and new.reason in ("RestoreFailed", RESTORED)
    ):
        recorder.event(
            cluster, "Normal" if new.status == "True" else "Warning", new.reason, new.message or ""
        )
    return state


async def _restore_state(
    client: Client, cluster: RedisCluster, pods: Mapping[str, Pod], image: str, now: str
) -> RestoreState:
    source = cluster.spec.restore_from
    if source is None:
        return RestoreState()
    previous = next(
        (c for c in (cluster.status.conditions if cluster.status else []) if c.type == RESTORED), None
    )
    done = previous is not None and previous.status == "True"
    if source.point_in_time is not None:
        return await _point_in_time(client, cluster, pods, image, now, previous=previous)
    assert source.backup_name is not None  # the API: exactly one of backupName and pointInTime
    try:
        backup: RedisBackup | None = await client.get(
            RedisBackup, source.backup_name, namespace=cluster.namespace
        )
    except NotFound:
        backup = None
    if backup is None or backup.status is None or backup.status.sha256 is None:
        if done and previous is not None:
            return RestoreState(condition=previous)  # seeded long ago; the backup may go
        if backup is None:
            why, reason = f"RedisBackup {source.backup_name!r} not found", "RestoreFailed"
        elif backup.status is not None and backup.status.phase is BackupPhase.FAILED:
            why, reason = (
                f"RedisBackup {source.backup_name!r} failed: {backup.status.message}",
                "RestoreFailed",
            )
        else:
            why, reason = f"RedisBackup {source.backup_name!r} has not succeeded yet", "RestorePending"
        return RestoreState(blocked=why, condition=_condition(cluster, False, reason, why, now))
    sharded = cluster.spec.mode == "cluster"
    if (unfit := _unfit(cluster, backup)) is not None:
        return RestoreState(blocked=unfit, condition=_condition(cluster, False, "RestoreFailed", unfit, now))
    homes: dict[int, frozenset[int]] = {}
    if backup.status.shards is not None:
        homes = {s.index: frozenset(parse_ranges(s.slots)) for s in backup.status.shards}
        init = cluster_restore_init_container(backup, image, cluster.spec.replicas_per_shard)
    else:
        init = restore_init_container(backup, image)
    if cluster.spec.enable_persistence:  # Redis loads the AOF, not dump.rdb: the RDB becomes its base
        config = cluster.spec.redis_config
        aof_dir = f"/data/{config.get('appenddirname', 'appendonlydir')}"
        init["args"] = [*init["args"], "--aof-dir", aof_dir]
        init["args"] += ["--aof-name", config.get("appendfilename", "appendonly.aof")]
    volumes, _ = restore_volumes(backup.spec.destination)
    init["env"] = [
        *init["env"],
        {
            "name": "RESTORE_DONE",
            "valueFrom": {
                "configMapKeyRef": {"name": f"{cluster.name}-restore", "key": "done", "optional": True}
            },
        },
    ]

    def seeded(condition: Condition) -> RestoreState:
        return RestoreState(init_container=init, volumes=volumes, condition=condition, slot_homes=homes)

    source_text = f"RedisBackup {backup.name} ({backup.status.location}, sha256 {backup.status.sha256})"
    if done and previous is not None:
        return seeded(previous)
    failed = _failed_restore(pods)
    if failed is not None:
        why = f"restoring from {source_text}: {failed}"
        return seeded(_condition(cluster, False, "RestoreFailed", why, now))
    serving, serves = _serving(cluster, homes if sharded else None)
    if serving:
        await _record_done(client, cluster)
        message = f"seeded from {source_text}; {serves}"
        return seeded(_condition(cluster, True, RESTORED, message, now))
    why = f"seeding the {'shard masters' if sharded else 'first master'} from {source_text}"
    return seeded(_condition(cluster, False, "Restoring", why, now))


async def _point_in_time(
    client: Client,
    cluster: RedisCluster,
    pods: Mapping[str, Pod],
    image: str,
    now: str,
    *,
    previous: Condition | None,
) -> RestoreState:
    """``spec.restoreFrom.pointInTime``: every pod's init container assembles the AOF at that
    second from the archive (``backup.pitr``); Restored as for a backup."""
    source = cluster.spec.restore_from
    assert source is not None
    assert source.point_in_time is not None
    assert source.archive is not None
    refused = None
    if cluster.spec.mode == "cluster":
        refused = "a point-in-time restore is for mode: replication only (cluster mode has no archive)"
    elif not cluster.spec.enable_persistence:
        refused = (
            "a point-in-time restore needs spec.enablePersistence: true (Redis loads the restored "
            "append-only file only with appendonly yes)"
        )
    if refused is not None:
        return RestoreState(
            blocked=refused, condition=_condition(cluster, False, "RestoreFailed", refused, now)
        )
    init, volumes = pitr_init_container(cluster, image)
    s3 = source.archive.s3
    source_text = (
        f"the archive of RedisCluster {source.archive.cluster_name} "
        f"(s3://{s3.bucket}/{s3.prefix}{cluster.namespace}/{source.archive.cluster_name}/archive/) "
        f"at {source.point_in_time}"
    )

    def seeded(condition: Condition) -> RestoreState:
        return RestoreState(init_container=init, volumes=volumes, condition=condition, fs_group=ARCHIVER_UID)

    if previous is not None and previous.status == "True":
        return seeded(previous)
    failed = _failed_restore(pods)
    if failed is not None:
        return seeded(_condition(cluster, False, "RestoreFailed", f"restoring {source_text}: {failed}", now))
    serving, serves = _serving(cluster, None)
    if serving:
        await _record_done(client, cluster)
        return seeded(_condition(cluster, True, RESTORED, f"restored {source_text}; {serves}", now))
    return seeded(_condition(cluster, False, "Restoring", f"restoring {source_text} into every pod", now))
