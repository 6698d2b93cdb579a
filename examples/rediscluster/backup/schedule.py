"""Backup schedules, retention and the final backup on delete of a RedisCluster (``spec.backup``).

A second controller on RedisCluster objects (``redisbackup-schedule``), beside the one that runs
the cluster; it only ever creates and deletes RedisBackups and holds its own finalizer.

Why the operator creates RedisBackups on time instead of owning a CronJob: every run is then a
RedisBackup with its status (the retention counts them, a restore names one, ``kubectl get rdb``
lists them), and no pod needs API credentials to create one; a CronJob would need a pod with
RBAC to create RedisBackups, or would bypass them. The scheduling state is the RedisBackups
themselves (each carries the time it was due), so a restarted operator neither repeats nor
doubles a run.

Guarantees:

- ``schedule`` is a cron expression (UTC; 5 fields, or 6 with seconds last as croniter reads
  them); the run due at T creates RedisBackup ``<cluster>-<T as YYYYmmddHHMMSS>`` (name from T:
  an AlreadyExists is the run already made); only the latest due run is made (missed runs during
  an outage are not replayed, as a CronJob with ``startingDeadlineSeconds``); an invalid
  expression is a Warning Event ``InvalidSchedule`` and no run;
- retention: of the scheduled backups of the cluster, the newest ``keep`` (by due time) are kept;
  older *finished* ones are deleted — the RedisBackup's finalizer removes the stored object first;
- ``onDelete``: the finalizer ``redis.pyctrl.dev/final-backup`` is held on the RedisCluster; when it
  is deleted, RedisBackup ``<cluster>-final`` is taken (pods keep running: garbage collection waits
  for the finalizers) and the finalizer goes only once it Succeeded. A failed final backup gives a
  Warning Event ``FinalBackupFailed`` and the condition ``FinalBackup`` False, and is retried; the
  annotation ``redis.pyctrl.dev/skip-final-backup=true`` gives up deliberately (Event
  ``FinalBackupSkipped``), as does a namespace being deleted (no RedisBackup can be created
  there). Backups are not owned by the cluster: they outlive it.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterable
from typing import Any

from croniter import croniter

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import BackupPhase, BackupSchedule, RedisBackup
from examples.rediscluster.backup import metrics as backup_metrics
from examples.rediscluster.backup.job import CLUSTER_LABEL
from pyctrl import Request, Result
from pyctrl.client import Client
from pyctrl.client.errors import AlreadyExists, Forbidden, NotFound
from pyctrl.client.objects import Condition
from pyctrl.client.patch import MergeFrom, PatchType, RawPatch
from pyctrl.controllerutil import add_finalizer, remove_finalizer
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = [
    "FINAL_FINALIZER",
    "KIND_LABEL",
    "SCHEDULED_AT",
    "SKIP_FINAL_BACKUP",
    "BackupScheduleReconciler",
    "final_backup_name",
]

FINAL_FINALIZER = "redis.pyctrl.dev/final-backup"
SKIP_FINAL_BACKUP = "redis.pyctrl.dev/skip-final-backup"
KIND_LABEL = "redis.pyctrl.dev/backup-kind"  # "scheduled" or "final"
SCHEDULED_AT = "redis.pyctrl.dev/scheduled-at"
RETRY = 5.0
log = get_logger("redisbackup.schedule")


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _rfc3339(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def final_backup_name(cluster: str) -> str:
    return f"{cluster[:57]}-final"


def _finished(backup: RedisBackup) -> bool:
    return backup.status is not None and backup.status.phase in (BackupPhase.SUCCEEDED, BackupPhase.FAILED)


class BackupScheduleReconciler:
    """Reconciles RedisClusters' ``spec.backup``; see the module docstring. Its RBAC is declared
    by the RedisBackup and RedisCluster reconcilers (redisbackups create/delete, redisclusters
    patch and finalizers, status patch)."""

    def __init__(self, client: Client, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    async def reconcile(self, request: Request) -> Result:
        try:
            cluster: RedisCluster = await self.client.get(
                RedisCluster, request.name, namespace=request.namespace
            )
        except NotFound:
            backup_metrics.forget(request.namespace, request.name)
            return Result()
        spec = cluster.spec.backup
        if cluster.metadata.deletion_timestamp:
            return await self._final(cluster, spec)
        wants_final = spec is not None and spec.on_delete
        changed = (
            add_finalizer(cluster, FINAL_FINALIZER)
            if wants_final
            else remove_finalizer(cluster, FINAL_FINALIZER)
        )
        if changed:
            cluster = await self.client.patch(cluster, self._finalizers_patch(cluster))
        if spec is None or spec.schedule is None:
            backup_metrics.forget(request.namespace, request.name)
            return Result()
        return await self._schedule(cluster, spec, spec.schedule)

    # -- schedule and retention ----------------------------------------------------------------
    async def _schedule(self, cluster: RedisCluster, spec: BackupSchedule, schedule: str) -> Result:
        if not croniter.is_valid(schedule):
            self.recorder.event(
                cluster,
                "Warning",
                "InvalidSchedule",
                f"spec.backup.schedule {schedule!r} is not a cron expression",
            )
            return Result()
        now = _utcnow()
        due: datetime.datetime = croniter(schedule, now + datetime.timedelta(seconds=1)).get_prev(
            datetime.datetime
        )
        backups = await self.client.list(
            RedisBackup,
            namespace=cluster.namespace,
            labels={CLUSTER_LABEL: cluster.name, KIND_LABEL: "scheduled"},
        )
        created = cluster.metadata.creation_timestamp or ""
        if _rfc3339(due) >= created and not any(
            (b.metadata.annotations or {}).get(SCHEDULED_AT) == _rfc3339(due) for b in backups
        ):
            name = f"{cluster.name[:47]}-{due:%Y%m%d%H%M%S}"
            try:
                await self.client.create(
                    self._backup(cluster, spec, name, "scheduled", {SCHEDULED_AT: _rfc3339(due)})
                )
                log.info(
                    "Scheduled backup created", cluster=cluster.name, namespace=cluster.namespace, backup=name
                )
            except AlreadyExists:
                pass
            backups = await self.client.list(
                RedisBackup,
                namespace=cluster.namespace,
                labels={CLUSTER_LABEL: cluster.name, KIND_LABEL: "scheduled"},
            )
        await self._retain(backups, spec.keep)
        backup_metrics.observe_backups(
            cluster.namespace, cluster.name, schedule, backups, created=created, now=now
        )
        next_due: datetime.datetime = croniter(schedule, now).get_next(datetime.datetime)
        return Result(requeue_after=max(0.5, (next_due - _utcnow()).total_seconds() + 0.5))

    async def _retain(self, backups: Iterable[RedisBackup], keep: int) -> None:
        live = [b for b in backups if not b.metadata.deletion_timestamp]
        live.sort(key=lambda b: (b.metadata.annotations or {}).get(SCHEDULED_AT, ""), reverse=True)
        for old in live[keep:]:
            if _finished(old):
                log.info("Retention: deleting backup", backup=old.name, namespace=old.namespace)
                with contextlib.suppress(NotFound):
                    await self.client.delete(old)

    def _backup(
        self, cluster: RedisCluster, spec: BackupSchedule, name: str, kind: str, annotations: dict[str, str]
    ) -> dict[str, Any]:
        return {
            "apiVersion": RedisBackup.gvk.api_version,
            "kind": "RedisBackup",
            "metadata": {
                "name": name,
                "namespace": cluster.namespace,
                "labels": {CLUSTER_LABEL: cluster.name, KIND_LABEL: kind},
                "annotations": annotations,
            },
            "spec": {
                "clusterName": cluster.name,
                "destination": spec.destination.model_dump(by_alias=True, exclude_none=True),
            },
        }

    # -- final backup --------------------------------------------------------------------------
    async def _final(self, cluster: RedisCluster, spec: BackupSchedule | None) -> Result:
        if FINAL_FINALIZER not in (cluster.metadata.finalizers or []):
            return Result()
        if spec is None or (cluster.metadata.annotations or {}).get(SKIP_FINAL_BACKUP) == "true":
            why = (
                "annotation redis.pyctrl.dev/skip-final-backup=true"
                if spec is not None
                else "spec.backup removed"
            )
            self.recorder.event(
                cluster, "Warning", "FinalBackupSkipped", f"deleting without a final backup ({why})"
            )
            return await self._release(cluster)
        name = final_backup_name(cluster.name)
        try:
            backup: RedisBackup | None = await self.client.get(RedisBackup, name, namespace=cluster.namespace)
        except NotFound:
            backup = None
        if backup is None:
            try:
                await self.client.create(self._backup(cluster, spec, name, "final", {}))
            except AlreadyExists:
                pass
            except Forbidden as exc:  # its namespace is being deleted: nothing can be created
                self.recorder.event(
                    cluster, "Warning", "FinalBackupSkipped", f"cannot create the final backup: {exc}"
                )
                return await self._release(cluster)
            self.recorder.event(
                cluster, "Normal", "FinalBackupStarted", f"RedisBackup {name} before deletion"
            )
            return Result(requeue_after=RETRY)
        if backup.metadata.deletion_timestamp or not _finished(backup):
            return Result(requeue_after=RETRY)
        assert backup.status is not None
        if backup.status.phase is BackupPhase.SUCCEEDED:
            self.recorder.event(cluster, "Normal", "FinalBackupTaken", f"stored at {backup.status.location}")
            return await self._release(cluster)
        message = (
            f"final backup {name} failed: {backup.status.message}; retrying"
            f" (annotate {SKIP_FINAL_BACKUP}=true to delete without it)"
        )
        self.recorder.event(cluster, "Warning", "FinalBackupFailed", message)
        await self._condition(cluster, message)
        await self.client.delete(backup)  # a new attempt once it is gone
        return Result(requeue_after=RETRY)

    async def _condition(self, cluster: RedisCluster, message: str) -> None:
        if cluster.status is None:
            return
        before = cluster.model_copy(deep=True)
        conditions = [c for c in cluster.status.conditions if c.type != "FinalBackup"]
        conditions.append(
            Condition(
                type="FinalBackup",
                status="False",
                reason="FinalBackupFailed",
                message=message,
                last_transition_time=_rfc3339(_utcnow()),
            )
        )
        cluster.status = cluster.status.model_copy(update={"conditions": conditions})
        await self.client.status().patch(cluster, MergeFrom(before))

    async def _release(self, cluster: RedisCluster) -> Result:
        remove_finalizer(cluster, FINAL_FINALIZER)
        await self.client.patch(cluster, self._finalizers_patch(cluster))
        log.info("Final-backup finalizer removed", cluster=cluster.name, namespace=cluster.namespace)
        return Result()

    @staticmethod
    def _finalizers_patch(cluster: RedisCluster) -> RawPatch:
        meta = {
            "finalizers": cluster.metadata.finalizers or None,
            "resourceVersion": cluster.metadata.resource_version,
        }
        return RawPatch(PatchType.MERGE, {"metadata": meta})
