"""Backup freshness metrics of scheduled RedisCluster backups (``spec.backup.schedule``), on the
manager's ``/metrics`` beside the operator's (labels ``namespace``, ``name``):

- ``rediscluster_backup_last_success_timestamp_seconds`` — completion time of the newest
  Succeeded backup of the cluster (the cluster's creation time while there is none, so a cluster
  that never gets a backup becomes late too);
- ``rediscluster_backup_max_age_seconds`` — how old that backup may get before it is late: twice
  the longest interval between the schedule's next runs (one missed run is tolerated, two are
  not), so the alert ``RedisClusterBackupTooOld`` is
  ``time() - last_success > max_age``.

:func:`backup_freshness` is pure (the schedule, the backups, the creation time, now);
:func:`observe_backups` sets the gauges; the schedule reconciler calls it after each pass over a
cluster's backups (``BackupScheduleReconciler._schedule``);
:func:`forget` removes a deleted cluster's series. Mirrors kube-state-metrics'
``kube_cronjob_status_last_successful_time`` (a timestamp gauge, the age computed in PromQL).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from croniter import croniter
from prometheus_client import Gauge

from examples.rediscluster.api.backup import BackupPhase, RedisBackup
from pyctrl.metrics import registry

__all__ = ["RUNS_LOOKED_AT", "Freshness", "backup_freshness", "forget", "observe_backups"]

_LABELS = ("namespace", "name")
#: how many of the schedule's next runs measure its longest interval
RUNS_LOOKED_AT = 10

last_success = Gauge(
    "rediscluster_backup_last_success_timestamp_seconds",
    "Completion time of the newest Succeeded backup (the cluster's creation time while none).",
    _LABELS,
    registry=registry,
)
max_age = Gauge(
    "rediscluster_backup_max_age_seconds",
    "Age the newest Succeeded backup may reach before it is late (twice the schedule's interval).",
    _LABELS,
    registry=registry,
)


@dataclass(frozen=True)
class Freshness:
    last_success: float  # Unix seconds
    max_age: float  # seconds


def _parse(timestamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def backup_freshness(
    schedule: str, backups: Iterable[RedisBackup], created: str, now: datetime.datetime
) -> Freshness:
    """The newest Succeeded backup's completion time (else ``created``) and the allowed age;
    ``ValueError`` for an expression croniter refuses."""
    if not croniter.is_valid(schedule):
        raise ValueError(f"spec.backup.schedule {schedule!r} is not a cron expression")
    done = [
        _parse(b.status.completion_time)
        for b in backups
        if b.status is not None and b.status.phase is BackupPhase.SUCCEEDED and b.status.completion_time
    ]
    newest = max(done) if done else _parse(created)
    runs = croniter(schedule, now)
    times = [runs.get_next(datetime.datetime) for _ in range(RUNS_LOOKED_AT + 1)]
    longest = max((b - a).total_seconds() for a, b in itertools.pairwise(times))
    return Freshness(newest.timestamp(), 2 * longest)


def observe_backups(
    namespace: str,
    name: str,
    schedule: str,
    backups: Iterable[RedisBackup],
    *,
    created: str,
    now: datetime.datetime,
) -> None:
    """Set the cluster's two gauges (nothing for an invalid schedule: its Event says why)."""
    try:
        fresh = backup_freshness(schedule, backups, created, now)
    except ValueError:
        return
    last_success.labels(namespace, name).set(fresh.last_success)
    max_age.labels(namespace, name).set(fresh.max_age)


def forget(namespace: str, name: str) -> None:
    """Drop a deleted (or no longer scheduled) cluster's series."""
    for metric in (last_success, max_age):
        with contextlib.suppress(KeyError):
            metric.remove(namespace, name)
