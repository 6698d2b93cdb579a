"""The RedisCluster status the operator reports: a pure function of what it observed.

- ``readyReplicas``: pods that are Ready and are the recorded master (answering as master) or a
  replica of it with its link up;
- ``phase``: Initializing until the first master serves; Failover while the recorded master does
  not serve (after it once did); Running when every pod is ready and the plan is converged;
  Degraded otherwise;
- an invalid spec (one the operator cannot apply) makes Ready False with reason ``InvalidSpec``
  and the error as message, and the phase Degraded at best;
- ``PodsScheduled``: False with reason ``Unschedulable`` while the scheduler cannot place some
  pod, its message naming each such pod with the scheduler's own reason (``PodScheduled=False``:
  e.g. ``0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules``);
- conditions Ready, Degraded and PodsScheduled (metav1.Condition); a condition keeps its lastTransitionTime
  while its status does not change, so a converged cluster's status stays byte-for-byte the same
  and costs no write;
- :func:`reconcile_status` is what one reconcile reports: :func:`observed_status` with the
  restore's, the rollout's (``Progressing``, the revisions), the volumes' and hibernation's
  conditions, or while hibernating :func:`hibernation_status`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus
from examples.rediscluster.replication.decision import (
    Decision,
    Done,
    Look,
    hibernation_asked,
    master_loaded,
    was_hibernated,
)
from examples.rediscluster.replication.topology_types import NodeObservation, Role
from examples.rediscluster.shared.rollout import progressing_condition, with_revisions
from examples.rediscluster.shared.status import condition, reported
from pyctrl.client.objects import Condition

__all__ = ["hibernation_status", "observed_status", "reconcile_status"]

_NO_PERSISTENCE = (
    "hibernation refused: spec.enablePersistence is false, so stopping the pods would lose the data; "
    "enable persistence first or remove the annotation redis.pyctrl.dev/hibernation"
)


def _ready_count(nodes: Sequence[NodeObservation], master: str | None) -> int:
    m = next((n for n in nodes if n.pod == master), None)
    if m is None:
        return 0
    ready = 0
    for n in nodes:
        if not n.pod_ready or n.redis is None:
            continue
        if (n.pod == master and n.redis.role is Role.MASTER) or (n.follows(m) and n.redis.master_link_up):
            ready += 1
    return ready


def _scheduled_condition(old: RedisClusterStatus, unschedulable: Mapping[str, str], *, now: str) -> Condition:
    if not unschedulable:
        return condition(old, "PodsScheduled", True, "AllPodsScheduled", "every pod is on a node", now=now)
    pending = "; ".join(f"{pod}: {why}" for pod, why in sorted(unschedulable.items()))
    message = f"{len(unschedulable)} pod(s) Pending, not schedulable: {pending}"
    return condition(old, "PodsScheduled", False, "Unschedulable", message, now=now)


def observed_status(
    cluster: RedisCluster,
    nodes: Sequence[NodeObservation],
    converged: bool,
    now: str,
    *,
    invalid_spec: str | None = None,
    unschedulable: Mapping[str, str] | None = None,
    extra_conditions: Sequence[Condition] = (),
) -> RedisClusterStatus:
    """The status to report (``lastSyncTimestamp`` unchanged: the caller sets it on a write).

    ``invalid_spec`` (why the spec cannot be applied) keeps the cluster from counting as converged
    and becomes the reason and message of both conditions; ``unschedulable`` (pod -> the
    scheduler's message) makes PodsScheduled False; ``extra_conditions`` (e.g. the restore's
    ``Restored``) are reported beside them."""
    converged = converged and invalid_spec is None
    old = cluster.status or RedisClusterStatus()
    master = old.current_master
    m = next((n for n in nodes if n.pod == master), None)
    ready, desired = _ready_count(nodes, master), cluster.spec.replicas
    if m is None or m.redis is None or m.redis.role is not Role.MASTER:
        never_ran = old.phase is RedisClusterPhase.INITIALIZING
        phase = RedisClusterPhase.INITIALIZING if never_ran else RedisClusterPhase.FAILOVER
    elif ready >= desired and converged:
        phase = RedisClusterPhase.RUNNING
    else:
        phase = RedisClusterPhase.DEGRADED
    return reported(
        cluster,
        phase,
        ready=ready,
        message=f"{ready}/{desired} pods ready and replicating",
        reasons=("AllReplicasReady", "ReplicasNotReady"),
        invalid_spec=invalid_spec,
        invalid_detail=f"{ready}/{desired} pods ready",
        conditions=[_scheduled_condition(old, unschedulable or {}, now=now), *extra_conditions],
        now=now,
    )


def _hibernated_condition(cluster: RedisCluster, look: Look, converged: bool, now: str) -> Condition | None:
    """``Hibernated`` while not hibernating: True (Waking) until the master serves again after a
    hibernation, then False (Awake); False (HibernationRefused) when asked without persistence;
    none for a cluster that never hibernated."""
    old = cluster.status or RedisClusterStatus()
    if hibernation_asked(cluster):  # without persistence: decide() did not hibernate
        return condition(old, "Hibernated", False, "HibernationRefused", _NO_PERSISTENCE, now=now)
    if was_hibernated(cluster):
        if not converged or not master_loaded(look):
            message = f"waking: every pod back, {look.recorded.current_master} the master again"
            return condition(old, "Hibernated", True, "Waking", message, now=now)
        return condition(old, "Hibernated", False, "Awake", "woken from hibernation", now=now)
    return next((c for c in old.conditions if c.type == "Hibernated"), None)


def hibernation_status(cluster: RedisCluster, pods: Collection[str], now: str) -> RedisClusterStatus:
    """Phase ``Hibernated`` once no pod is left (the recorded master kept for the wake-up); Ready
    False meanwhile, with the pods still stopping (``pods``) named."""
    old = cluster.status or RedisClusterStatus()
    left = sorted(pods)
    stopping = f"hibernating: {len(left)} pod(s) still stopping ({', '.join(left)})"
    message = stopping if left else "hibernated: every pod stopped, the volumes kept"
    reason = "Hibernating" if left else "Hibernated"
    kept = [c for c in old.conditions if c.type not in ("Ready", "Hibernated", "Degraded")]
    return old.model_copy(
        update={
            "phase": RedisClusterPhase.HIBERNATED if not left else old.phase,
            "ready_replicas": 0,
            "observed_generation": cluster.metadata.generation,
            "conditions": [
                condition(old, "Ready", False, reason, message, now=now),
                condition(old, "Degraded", False, reason, message, now=now),
                condition(old, "Hibernated", True, reason, message, now=now),
                *kept,
            ],
        }
    )


def reconcile_status(look: Look, plan: Decision, done: Done, now: str) -> RedisClusterStatus:
    """The status one reconcile reports for ``done.cluster`` (module docstring)."""
    cluster, rollout, converged = done.cluster, done.rollout, plan.plan.converged
    if plan.hibernate:
        return hibernation_status(cluster, look.pods, now)
    extra = [done.restored, progressing_condition(cluster, rollout, now), done.volumes]
    extra += [_hibernated_condition(cluster, look, converged, now), done.archive[1]]
    status = with_revisions(
        observed_status(
            cluster,
            look.observed.nodes,
            converged,
            now,
            invalid_spec=done.invalid,
            unschedulable=look.observed.unschedulable,
            extra_conditions=[c for c in extra if c is not None],
        ),
        rollout,
    )
    status.archive = done.archive[0]
    return status
