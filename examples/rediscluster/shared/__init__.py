"""What both modes use: the layer under ``replication/`` and ``cluster/``.

- ``resources``: the Kubernetes children common to both modes and the ``redis.conf`` rendering
  (pure functions of the spec); ``children``: writing a child only when it differs;
- ``redis_admin``: the operator's Redis connection (``RedisAccess``/``RedisConnection``, errors
  translated at the boundary, the password scrubbed);
- ``finalizer``: the last snapshot before a RedisCluster is deleted;
- ``metrics``: the operator's Prometheus metrics;
- ``security``: the password Secret, TLS material and ACL users;
- ``tasks``: how the background tasks (prober, slot mover) stop.

This package's ``__init__`` imports nothing, so a backup Job's worker loads only the modules it
uses (``shared.security.tls``).
"""
