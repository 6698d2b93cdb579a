"""``spec.mode: replication``: one master and its replicas (failover, switchover, rollouts).

Modules: ``topology_types`` and ``topology`` (the pure decisions: who is master, whom to promote),
``observe`` (Kubernetes and Redis facts of every pod), ``execute`` (a plan carried out, the master
recorded in status first), ``prober`` (the background health checks), ``rollout`` (the operator's
rollout order), ``live_config`` (``CONFIG SET`` of run-time settings), ``nodeloss`` (pods on lost
nodes), ``volumes`` (PVC expansion) and ``status``.
"""
