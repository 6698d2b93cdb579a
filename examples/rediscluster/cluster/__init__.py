"""``spec.mode: cluster``: a sharded Redis Cluster (slots, per-shard failover, online resharding).

Modules: ``slots`` (hash-slot arithmetic), ``nodes`` (CLUSTER NODES parsed), ``plan`` (the pure
topology decisions), ``admin`` (cluster commands over redis.asyncio), ``mover`` (background slot
migration), ``resources`` (the cluster-mode children), ``status`` and ``metrics``, and
``reconciler`` (the cluster-mode reconcile, called by ``controller.RedisClusterReconciler``).
"""
