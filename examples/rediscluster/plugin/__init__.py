"""``kubectl rediscluster``: the SRE's plugin for RedisClusters (installed as the console script
``kubectl-rediscluster``, which kubectl finds on ``PATH``), after CloudNativePG's ``kubectl cnpg``.

Read-only commands (they need only ``get``/``list`` on redisclusters, redisbackups, pods and
events):

- ``status NAME`` — one screen: phase, master and epoch, each pod's role, readiness, node and IP,
  the shards and slots (cluster mode), the newest backups, the conditions and recent Events;
- ``explain NAME`` — why the cluster is not Ready, in plain words: the failing conditions, what
  the operator could not do (its Warning Events), pods that do not start, a spec the operator
  has not seen; exit status 1 while not Ready.

Write commands go through the API only, never to Redis behind the operator's back:

- ``backup NAME [--name BACKUP]`` — creates a RedisBackup (``create`` on redisbackups);
- ``hibernate on|off NAME``, ``fence``/``unfence NAME POD``, ``promote NAME POD`` — set the
  annotations ``redis.pyctrl.dev/hibernation``, ``redis.pyctrl.dev/fenced-pods`` (a JSON list) and
  ``redis.pyctrl.dev/switchover-to`` (``patch`` on redisclusters), which the operator carries out
  in replication mode; on a ``mode: cluster`` RedisCluster, ``hibernate on``, ``fence`` and
  ``promote`` are refused (exit status 2, nothing written), as the operator would not act on them
  (it reports such annotations in the condition ``Intents``).

``view`` renders (pure functions of what was read), ``cli`` reads, writes and parses arguments.
"""
