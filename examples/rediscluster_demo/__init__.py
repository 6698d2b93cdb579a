"""``make demo``: the RedisCluster operator on a local embedded cluster (``demo``), a sharded
cluster (``cluster``), a backup and restore (``backup``). Outside the operator package: nothing
under ``examples/rediscluster/`` imports it."""
