"""Operator-ordered rollouts of a replication-mode RedisCluster (StatefulSet ``updateStrategy: OnDelete``).

Mirrors the StatefulSet controller's ``RollingUpdate`` (``pkg/controller/statefulset``: a pod whose
``controller-revision-hash`` label differs from ``status.updateRevision`` is deleted, the controller
recreates it from the new template, the next one waits until it is Running and Ready), but in the
operator's order instead of highest ordinal first, so the master is never restarted as a master:

1. the outdated replicas, one at a time (highest ordinal first among them): the next one is
   deleted only once every pod is back in sync — Ready, answering, a replica of the recorded
   master with its link up, listed ``online`` by the master and no more than
   :data:`MAX_LAG_BYTES` behind it;
2. then, when only the master is outdated, one planned switchover (``topology.switchover``: the
   ``FAILOVER TO`` machinery of drains and scale-ins, recorded as ``masterEpoch + 1`` before any
   Redis command) to the best updated in-sync replica;
3. then the old master, now a replica, like any replica.

Guarantees:

- :func:`decide` is pure (no I/O): the same pods, revisions and recorded master give the same step;
- the rollout never acts while the topology plan has work to do (the reconciler calls it only on a
  converged plan), while a ``FAILOVER`` runs, or while any pod is not back in sync: a crash, a hung
  replica or a failover mid-rollout pauses it (``Progressing`` reason ``RolloutPaused``, the
  message naming the pod), and it resumes by itself once the cluster is whole again. Failover keeps
  protecting the cluster meanwhile, so a crash mid-rollout loses no write acknowledged by ``WAIT``;
- :class:`Rollout` deletes at most one pod per step, with the pod's uid as precondition, and takes
  no further step until the observed pod of that name has another uid (the cache has seen the
  deletion), so a stale cache never restarts two pods;
- status: ``currentRevision`` (the revision the outdated pods run, the update revision once none
  is outdated), ``updateRevision`` (the StatefulSet's), the ``Progressing`` condition
  (``RollingUpdate``, ``RolloutPaused``, or False ``RolloutComplete``) and Events
  ``RolloutRestartingPod``, ``RolloutSwitchover``, ``RolloutPaused``, ``RolloutComplete``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.topology import choose_failover_candidate, switchover
from examples.rediscluster.replication.topology_types import ClusterState, NodeObservation, Policy, Role
from examples.rediscluster.shared.rollout import (
    MAX_LAG_BYTES,
    PodRollout,
    Restart,
    RolloutDecision,
    known_revisions,
    opening,
    revisions_of,
)

__all__ = ["Rollout", "decide", "unsettled"]


def unsettled(nodes: Sequence[NodeObservation], master: str | None, replicas: int) -> dict[str, str]:
    """pod -> why it is not back in sync (empty: every pod serves and replicates; module docstring)."""
    by_pod = {n.pod: n for n in nodes}
    m = by_pod.get(master or "")
    why: dict[str, str] = {}
    if len(nodes) < replicas:
        why["-"] = f"{len(nodes)}/{replicas} pods exist"
    if m is None or m.redis is None or m.role is not Role.MASTER or m.terminating or not m.pod_ready:
        why[master or "-"] = "the recorded master does not serve"
        return why
    if m.redis.failover_state != "no-failover":
        why[m.pod] = f"a switchover runs ({m.redis.failover_state})"
    for n in nodes:
        if n.pod == m.pod:
            continue
        r = n.redis
        if n.terminating:
            why[n.pod] = "terminating"
        elif not n.pod_ready or r is None:
            why[n.pod] = "not ready" if r is not None else "not answering"
        elif not n.follows(m) or not r.master_link_up:
            why[n.pod] = f"not replicating {m.pod}"
        elif (n.ip, n.port) not in m.redis.online_replicas:
            why[n.pod] = f"not listed online by {m.pod}"
        elif m.redis.master_repl_offset - r.offset > MAX_LAG_BYTES:
            why[n.pod] = f"more than {MAX_LAG_BYTES} bytes behind"
    return why


def decide(
    nodes: Sequence[NodeObservation],
    revisions: Mapping[str, str | None],
    update_revision: str | None,
    recorded: ClusterState,
    policy: Policy,
    *,
    replicas: int,
    persistent: bool = False,
    previous_current: str | None = None,
) -> RolloutDecision:
    """The next rollout step (module docstring); ``revisions``: pod -> its revision label.

    A one-pod cluster has no replica to hand over to: with ``persistent`` data its master is
    restarted (it reloads its AOF); without, the rollout waits for someone to delete the pod, since
    a restart would empty it."""
    current = {pod for pod, revision in revisions.items() if revision == update_revision}
    why = unsettled(nodes, recorded.current_master, replicas)
    decision = opening(revisions, update_revision, previous_current, why, current.__contains__)
    if not decision.outdated or decision.paused or decision.waiting:
        return decision
    master = next(n for n in nodes if n.pod == recorded.current_master)
    replicas_outdated = [p for p in decision.outdated if p != master.pod]
    if replicas_outdated:
        return replace(decision, step=Restart(replicas_outdated[0]))
    updated = [n for n in nodes if n.pod != master.pod and revisions.get(n.pod) == update_revision]
    target = choose_failover_candidate([*updated, master], master.pod, policy)
    if replicas == 1 and persistent:
        return replace(decision, step=Restart(master.pod))
    if replicas == 1:
        alone = f"one pod without persistence: delete {master.pod} to restart it (its data would be lost)"
        return replace(decision, paused=alone)
    if target is None:
        return replace(decision, paused=f"no updated in-sync replica to hand the master {master.pod} over to")
    return replace(decision, step=switchover(nodes, recorded, target.pod))


class Rollout(PodRollout):
    """Carries out :func:`decide` for the reconciler: pod deletions and Events (module docstring)."""

    async def step(
        self, cluster: RedisCluster, observed: Observed, recorded: ClusterState, policy: Policy, *, idle: bool
    ) -> RolloutDecision:
        """Decide and act; ``idle``: the topology plan is converged and nothing else was done.

        A restart is carried out here; a switchover is returned (``step``, a ``Plan``) for the
        reconciler's plan executor; ``step`` is None in the result otherwise."""
        status = cluster.status
        update_revision = await self.update_revision(cluster)
        if update_revision is False:
            return known_revisions(cluster)
        revisions = revisions_of(observed.pods)
        decision = decide(
            observed.nodes,
            revisions,
            update_revision,
            recorded,
            policy,
            replicas=cluster.spec.replicas,
            persistent=cluster.spec.enable_persistence,
            previous_current=status.current_revision if status else None,
        )
        acting = self._settle(cluster, decision, observed.pods, idle=idle)
        if acting is not decision:
            return acting
        if isinstance(decision.step, Restart):
            await self._restart(cluster, observed.pods, decision, decision.step.pod)
            return replace(decision, step=None)
        self.recorder.event(
            cluster,
            "Normal",
            "RolloutSwitchover",
            f"every replica runs revision {decision.update_revision}: handing the master "
            f"{recorded.current_master} over before restarting it",
        )
        return decision
