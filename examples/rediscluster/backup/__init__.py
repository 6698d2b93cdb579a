"""Backups and restores of RedisClusters (issue 15): the RedisBackup kind and its Jobs.

- ``api``: RedisBackup, and the RedisCluster's ``spec.backup`` / ``spec.restoreFrom`` types;
- ``rdb``, ``store``, ``worker``: the program the Jobs run (RDB off a replica, through SHA-256,
  into a PVC file or an S3 object; the restore check; deletion);
- ``job``: the Job and init-container manifests (pure);
- ``reconciler``: one Job per RedisBackup, its result back into the status;
- ``restore``: ``spec.restoreFrom`` (the init container, condition Restored);
- ``schedule``: ``spec.backup`` (schedules, retention, the final backup on delete);
- :func:`add_backup_controllers`: the wiring into the operator's manager.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyctrl import ControllerBuilder, Manager
from pyctrl.predicate import PredicateLike

__all__ = ["DEFAULT_IMAGE", "add_backup_controllers"]

#: The operator's image; its Jobs run the same image (``python -m examples.rediscluster.backup.worker``).
DEFAULT_IMAGE = "pyctrl/rediscluster-operator:0.1.0"


def add_backup_controllers(
    mgr: Manager,
    image: str,
    *,
    cluster_predicates: Sequence[PredicateLike] = (),
    max_concurrent_reconciles: int = 4,
) -> None:
    """Register with ``mgr`` (whose scheme has RedisBackup) the RedisBackup controller
    (``owns(Job)``) and the schedule controller on RedisClusters (``cluster_predicates`` filter
    their events; RedisBackups map to their cluster by label)."""
    from examples.rediscluster.api import RedisCluster
    from examples.rediscluster.backup.api import RedisBackup
    from examples.rediscluster.backup.job import CLUSTER_LABEL
    from examples.rediscluster.backup.reconciler import RedisBackupReconciler
    from examples.rediscluster.backup.schedule import BackupScheduleReconciler
    from pyctrl import Request, _access
    from pyctrl.client import Job
    from pyctrl.handler import enqueue_requests_from_map_func

    recorder = mgr.get_event_recorder_for("rediscluster-operator")
    (
        ControllerBuilder(mgr)
        .for_(RedisBackup)
        .owns(Job)
        .with_options(max_concurrent_reconciles=max_concurrent_reconciles)
        .named("redisbackup")
        .complete(RedisBackupReconciler(mgr.client, mgr.api_reader, recorder, image))
    )

    def to_cluster(backup: Any) -> list[Request]:
        cluster = _access.labels(backup).get(CLUSTER_LABEL)
        return [Request(_access.namespace(backup), cluster)] if cluster else []

    (
        ControllerBuilder(mgr)
        .for_(RedisCluster, predicates=cluster_predicates)
        .watches(RedisBackup, enqueue_requests_from_map_func(to_cluster))
        .with_options(max_concurrent_reconciles=max_concurrent_reconciles)
        .named("redisbackup-schedule")
        .complete(BackupScheduleReconciler(mgr.client, recorder))
    )
