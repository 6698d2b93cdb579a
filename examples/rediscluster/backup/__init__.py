"""Backups and restores of RedisClusters (issue 15): the RedisBackup kind's Jobs (its types are in
``api.backup``: RedisBackup, and the RedisCluster's ``spec.backup`` / ``spec.restoreFrom``).

- ``rdb``, ``store``, ``worker``: the program the Jobs run (RDB off a replica, through SHA-256,
  into a PVC file or an S3 object; the restore check; deletion);
- ``aof``: a restore into a Redis with persistence (the RDB as the base of its AOF);
- ``job``: the Job and init-container manifests (pure); ``results``: what the Job's pods report;
- ``shards`` (pure) and ``sharded`` (the worker's steps): backups per shard of a ``mode: cluster``
  RedisCluster — one RDB per shard and a manifest — and their restore;
- ``reconciler``: one Job per RedisBackup, its result back into the status;
- ``restore``: ``spec.restoreFrom`` (the init container, condition Restored);
- ``schedule``: ``spec.backup`` (schedules, retention, the final backup on delete);
- ``controllers``: ``add_backup_controllers``, the wiring into the operator's manager.

This package's ``__init__`` imports nothing: the Job's worker (``python -m
examples.rediscluster.backup.worker``) loads only what it uses (no pyctrl, no Kubernetes client),
which keeps its start-up short and its memory small.
"""

from __future__ import annotations

__all__ = ["DEFAULT_IMAGE"]

#: The operator's image; its Jobs run the same image (``python -m examples.rediscluster.backup.worker``).
DEFAULT_IMAGE = "pyctrl/rediscluster-operator:0.1.0"
