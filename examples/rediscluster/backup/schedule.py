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
- bounded work per tenant: a schedule whose runs come closer than ``min_interval`` (the
  operator's ``--min-backup-interval``, default ``DEFAULT_MIN_INTERVAL`` = 5 minutes; the CRD
  already refuses per-second schedules) is ``InvalidSchedule`` too, naming the interval, and makes
  no run (:func:`schedule_problem`, which the webhook runs as well); and at most one scheduled
  RedisBackup per cluster is unfinished at a time: while one is (e.g. Pending with no serving
  master), a run that comes due is not made — a Warning Event ``BackupSkipped`` names it and the
  backup it waits for — so RedisBackups never pile up;
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
import functools
import itertools
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
    "DEFAULT_MIN_INTERVAL",
    "FINAL_FINALIZER",
    "KIND_LABEL",
    "SCHEDULED_AT",
    "SKIP_FINAL_BACKUP",
    "BackupScheduleReconciler",
    "final_backup_name",
    "schedule_problem",
    "shortest_gap",
]

FINAL_FINALIZER = "redis.pyctrl.dev/final-backup"
SKIP_FINAL_BACKUP = "redis.pyctrl.dev/skip-final-backup"
KIND_LABEL = "redis.pyctrl.dev/backup-kind"  # "scheduled" or "final"
SCHEDULED_AT = "redis.pyctrl.dev/scheduled-at"
RETRY = 5.0
#: seconds: the least time between two runs of a schedule (``--min-backup-interval``)
DEFAULT_MIN_INTERVAL = 300.0
#: runs of a schedule looked at for its shortest gap, from a fixed start (so the answer is cached)
_GAP_RUNS = 200
_GAP_START = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
log = get_logger("redisbackup.schedule")


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _rfc3339(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def final_backup_name(cluster: str) -> str:
    return f"{cluster[:57]}-final"


@functools.lru_cache(maxsize=256)
def shortest_gap(schedule: str) -> float:
    """Seconds between the two closest of the schedule's next ``_GAP_RUNS`` runs (from a fixed
    start: the same answer every time); ``ValueError`` for an expression croniter refuses."""
    if not croniter.is_valid(schedule):
        raise ValueError(f"spec.backup.schedule {schedule!r} is not a cron expression")
    runs = croniter(schedule, _GAP_START)
    times = [runs.get_next(float) for _ in range(_GAP_RUNS)]
    return min(b - a for a, b in itertools.pairwise(times))


def schedule_problem(schedule: str, min_interval: float) -> str | None:
    """Why ``schedule`` is refused (not cron, or runs closer than ``min_interval`` s), or None."""
    try:
        gap = shortest_gap(schedule)
    except ValueError as exc:
        return str(exc)
    if gap < min_interval:
        return (
            f"spec.backup.schedule {schedule!r} runs every {gap:g} s at the closest: the operator's "
            f"minimum backup interval is {min_interval:g} s (--min-backup-interval)"
        )
    return None


def _finished(backup: RedisBackup) -> bool:
    return backup.status is not None and backup.status.phase in (BackupPhase.SUCCEEDED, BackupPhase.FAILED)


class BackupScheduleReconciler:
    """Reconciles RedisClusters' ``spec.backup``; see the module docstring. Its RBAC is declared
    by the RedisBackup and RedisCluster reconcilers (redisbackups create/delete, redisclusters
    patch and finalizers, status patch). ``min_interval``: seconds, the least time between two
    runs of a schedule."""

    def __init__(
        self, client: Client, recorder: EventRecorder, *, min_interval: float = DEFAULT_MIN_INTERVAL
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.min_interval = min_interval

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
        if (why := schedule_problem(schedule, self.min_interval)) is not None:
            self.recorder.event(cluster, "Warning", "InvalidSchedule", why)
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
        unfinished = sorted(b.name for b in backups if not _finished(b) and not b.metadata.deletion_timestamp)
        made = any((b.metadata.annotations or {}).get(SCHEDULED_AT) == _rfc3339(due) for b in backups)
        if _rfc3339(due) >= created and not made and unfinished:  # at most one pending: no pile-up
            self.recorder.event(
                cluster,
                "Warning",
                "BackupSkipped",
                f"the run due at {_rfc3339(due)} is not made: scheduled backup {unfinished[0]} has "
                "not finished (at most one unfinished scheduled backup per cluster)",
            )
        elif _rfc3339(due) >= created and not made:
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
