"""The backup controllers' wiring into the operator's manager (kubebuilder's ``SetupWithManager``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.backup import RedisBackup
from examples.rediscluster.backup.endpoints import EndpointAllowlist
from examples.rediscluster.backup.job import CLUSTER_LABEL
from examples.rediscluster.backup.reconciler import RedisBackupReconciler
from examples.rediscluster.backup.schedule import DEFAULT_MIN_INTERVAL, BackupScheduleReconciler
from pyctrl import ControllerBuilder, Manager, Request, _access
from pyctrl.client import Job
from pyctrl.handler import enqueue_requests_from_map_func
from pyctrl.predicate import PredicateLike

__all__ = ["add_backup_controllers"]


def add_backup_controllers(
    mgr: Manager,
    image: str,
    *,
    cluster_predicates: Sequence[PredicateLike] = (),
    max_concurrent_reconciles: int = 4,
    min_backup_interval: float = DEFAULT_MIN_INTERVAL,
    s3_endpoints: EndpointAllowlist | None = None,
) -> None:
    """Register with ``mgr`` (whose scheme has RedisBackup) the RedisBackup controller
    (``owns(Job)``) and the schedule controller on RedisClusters (``cluster_predicates`` filter
    their events; RedisBackups map to their cluster by label; a schedule's runs at least
    ``min_backup_interval`` seconds apart; S3 endpoints restricted to ``s3_endpoints``)."""

    recorder = mgr.get_event_recorder_for("rediscluster-operator")
    (
        ControllerBuilder(mgr)
        .for_(RedisBackup)
        .owns(Job)
        .with_options(max_concurrent_reconciles=max_concurrent_reconciles)
        .named("redisbackup")
        .complete(
            RedisBackupReconciler(mgr.client, mgr.api_reader, recorder, image, s3_endpoints=s3_endpoints)
        )
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
        .complete(BackupScheduleReconciler(mgr.client, recorder, min_interval=min_backup_interval))
    )
