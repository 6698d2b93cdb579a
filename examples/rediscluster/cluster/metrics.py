"""Cluster-mode metrics, beside ``shared.metrics``' on the manager's ``/metrics`` (labels namespace, name).

- ``rediscluster_slots_ok`` / ``rediscluster_slots_assigned`` — from CLUSTER NODES (alert on
  ``rediscluster_slots_ok < 16384``);
- ``rediscluster_slots_to_move`` — slots the running resharding still has to move;
- ``rediscluster_keys_migrated_total`` — keys moved by MIGRATE; ``rediscluster_migrate_errors_total``
  — failed (and retried) migration steps;
- ``rediscluster_shard_failovers_total{shard}`` — a shard's slots served by another pod than before.

Set from the status each reconcile computes (only the leader reports) and removed with the cluster.
"""

from __future__ import annotations

from examples.rediscluster.api import RedisClusterStatus
from examples.rediscluster.shared.metrics import counter, gauge, remove

__all__ = ["forget", "observe_failover", "observe_migration", "observe_status"]

slots_ok = gauge("rediscluster_slots_ok", "Slots served by a master that is not failing.")
slots_assigned = gauge("rediscluster_slots_assigned", "Slots assigned to a master.")
slots_to_move = gauge("rediscluster_slots_to_move", "Slots the running resharding still has to move.")
keys_migrated = counter("rediscluster_keys_migrated_total", "Keys moved by MIGRATE.")
migrate_errors = counter("rediscluster_migrate_errors_total", "Failed (retried) slot migration steps.")
shard_failovers = counter(
    "rediscluster_shard_failovers_total", "A shard's slots taken over by another of its pods.", "shard"
)


def observe_status(namespace: str, name: str, status: RedisClusterStatus) -> None:
    slots_ok.labels(namespace, name).set(status.slots_ok or 0)
    slots_assigned.labels(namespace, name).set(status.slots_assigned or 0)
    slots_to_move.labels(namespace, name).set(status.slots_to_move or 0)


def observe_migration(namespace: str, name: str, keys: int, errors: int) -> None:
    if keys:
        keys_migrated.labels(namespace, name).inc(keys)
    if errors:
        migrate_errors.labels(namespace, name).inc(errors)


def observe_failover(namespace: str, name: str, shard: int) -> None:
    shard_failovers.labels(namespace, name, str(shard)).inc()


def forget(namespace: str, name: str, shards: int) -> None:
    for metric in (slots_ok, slots_assigned, slots_to_move, keys_migrated, migrate_errors):
        remove(metric, namespace, name)
    for shard in range(shards):
        remove(shard_failovers, namespace, name, str(shard))
