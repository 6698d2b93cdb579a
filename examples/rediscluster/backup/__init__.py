"""Backups and restores of RedisClusters (issue 15): the RedisBackup kind and its Jobs.

- ``api``: RedisBackup, and the RedisCluster's ``spec.backup`` / ``spec.restoreFrom`` types;
- ``rdb``, ``store``, ``worker``: the program the Jobs run (RDB off a replica, through SHA-256,
  into a PVC file or an S3 object; the restore check; deletion);
- ``job``: the Job and init-container manifests (pure);
- ``reconciler``: one Job per RedisBackup, its result back into the status;
- :func:`add_backup_controllers`: the wiring into the operator's manager.
"""

from __future__ import annotations

from pyctrl import ControllerBuilder, Manager

__all__ = ["DEFAULT_IMAGE", "add_backup_controllers"]

#: The operator's image; its Jobs run the same image (``python -m examples.rediscluster.backup.worker``).
DEFAULT_IMAGE = "pyctrl/rediscluster-operator:0.1.0"


def add_backup_controllers(mgr: Manager, image: str, *, max_concurrent_reconciles: int = 4) -> None:
    """Register the RedisBackup controller (``owns(Job)``) with ``mgr`` (whose scheme has RedisBackup)."""
    from examples.rediscluster.backup.api import RedisBackup
    from examples.rediscluster.backup.reconciler import RedisBackupReconciler
    from pyctrl.client import Job

    reconciler = RedisBackupReconciler(
        mgr.client, mgr.api_reader, mgr.get_event_recorder_for("rediscluster-operator"), image
    )
    (
        ControllerBuilder(mgr)
        .for_(RedisBackup)
        .owns(Job)
        .with_options(max_concurrent_reconciles=max_concurrent_reconciles)
        .named("redisbackup")
        .complete(reconciler)
    )
