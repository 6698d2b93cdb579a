"""The status of a ``mode: cluster`` RedisCluster: a pure function of what the operator observed.

- ``shards[]``: per shard index, the pod serving its slots (``master``), the pods replicating it,
  its slot ranges and ``ready`` (master pod Ready, ``replicasPerShard`` Ready replicas following it);
- ``clusterState`` is ``cluster_state`` of CLUSTER INFO on the lowest-ordinal answering pod;
  ``slotsAssigned`` the slots that node's view gives to a master, ``slotsOk`` those whose master
  it does not see failing;
- ``slotsToMove``/``resharding`` follow the background mover (0 / unset when none runs); the
  Resharding condition says which change waits for the running one, and how many migration steps
  failed (retried with backoff) with the last error;
- ``readyReplicas``: pods Ready in the role their shard needs;
- ``phase``: Running when the plan is converged, ``cluster_state:ok``, every slot ok and every
  shard ready; Initializing until the cluster first reached ``ok``; Degraded otherwise;
- conditions Ready, Degraded and Resharding; unchanged conditions keep their lastTransitionTime,
  so a converged cluster's status is byte-for-byte stable (no write);
- :func:`reconcile_status` is what one reconcile reports (:class:`Done`): :func:`cluster_status`
  with the restore's, the rollout's (``Progressing``, the revisions) and the ``Intents`` condition
  (False, ``UnsupportedInClusterMode``, while a replication-mode intent annotation is set).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from examples.rediscluster.api import RedisCluster, RedisClusterPhase, RedisClusterStatus, ShardStatus
from examples.rediscluster.api.intents import unsupported_in_cluster_mode
from examples.rediscluster.backup.archiving import archive_condition
from examples.rediscluster.cluster.plan_types import Member
from examples.rediscluster.cluster.slots import SLOTS, format_ranges, shard_of
from examples.rediscluster.shared.rollout import RolloutDecision, progressing_condition, with_revisions
from examples.rediscluster.shared.status import condition, reported
from pyctrl.client.objects import Condition

__all__ = ["Done", "Resharding", "cluster_status", "reconcile_status", "shard_statuses"]


@dataclass(frozen=True, slots=True)
class Resharding:
    """What the background mover reports, plus whether the spec asks for something else meanwhile."""

    label: str
    slots_remaining: int
    waiting_change: str | None = None  # a newer shards change that waits for this one
    errors: int = 0  # failed (and retried) migration steps so far
    last_error: str | None = None

    @property
    def trouble(self) -> str:
        """``"; N failed steps retried, last: ..."`` while migration steps fail, else ``""``."""
        if not self.errors:
            return ""
        return f"; {self.errors} failed steps retried with backoff, last: {self.last_error}"


@dataclass
class Done:
    """What ``ClusterModeReconciler.execute`` did."""

    cluster: RedisCluster
    acted: bool
    converged: bool
    resharding: Resharding | None
    rollout: RolloutDecision
    #: why the spec cannot be run (nothing was applied), if it cannot
    invalid: str | None
    #: the restore's condition (``Restored``), if there is one
    restored: Condition | None
    #: certificates or the ACL file still being reloaded (set by the reconciler after execute)
    reloading: bool = False


def _seed(members: Sequence[Member]) -> Member | None:
    return min((m for m in members if m.reachable), key=lambda m: m.ordinal, default=None)


def _owner(members: Sequence[Member], pods: Sequence[Member]) -> tuple[Member, AbstractSet[int]] | None:
    """The shard pod serving slots: itself answering, else as the seed node sees it (by address)."""
    serving = [m for m in pods if m.reachable and m.is_master and m.slots]
    if serving:
        best = max(serving, key=lambda m: (len(m.slots), -m.ordinal))
        return best, best.slots
    seed = _seed(members)
    if seed is None or seed.facts is None:
        return None
    for peer in seed.facts.peers.values():
        pod = next((m for m in pods if m.ip and (m.ip, m.port) == (peer.ip, peer.port)), None)
        if pod is not None and peer.is_master and peer.slots:
            return pod, peer.slots
    return None


def shard_statuses(members: Sequence[Member], shards: int, replicas_per_shard: int) -> list[ShardStatus]:
    """One entry per shard index (departing shards included while their pods exist)."""
    count = max([shards, *(shard_of(m.ordinal, replicas_per_shard) + 1 for m in members)])
    out = []
    for index in range(count):
        pods = [m for m in members if shard_of(m.ordinal, replicas_per_shard) == index]
        owner = _owner(members, pods)
        if owner is None:  # a shard that never served: the slot-less master its pods follow
            ids = {m.facts.me.master_id for m in pods if m.facts is not None}
            fresh = [m for m in pods if m.reachable and m.is_master and (m.node_id in ids or len(pods) == 1)]
            owner = (fresh[0], frozenset()) if fresh else None
        master, slots = owner if owner is not None else (None, frozenset[int]())
        replicas = [
            m
            for m in pods
            if master is not None
            and m is not master
            and m.facts is not None
            and m.facts.me.master_id == master.node_id
        ]
        ready = (
            master is not None
            and master.reachable
            and master.pod_ready
            and len(replicas) == replicas_per_shard
            and all(r.pod_ready for r in replicas)
        )
        out.append(
            ShardStatus(
                index=index,
                master=master.pod if master else None,
                replicas=sorted(r.pod for r in replicas),
                slots=format_ranges(slots),
                slot_count=len(slots),
                ready=ready,
            )
        )
    return out


def _slots(members: Sequence[Member]) -> tuple[str | None, int, int]:
    """(cluster_state, slots assigned, slots ok) as the lowest-ordinal answering node sees them."""
    seed = _seed(members)
    if seed is None or seed.facts is None:
        return None, 0, 0
    assigned: set[int] = set()
    ok: set[int] = set()
    for peer in seed.facts.peers.values():
        if peer.is_master:
            assigned.update(peer.slots)
            if not peer.failing:
                ok.update(peer.slots)
    return seed.facts.cluster_state, len(assigned), len(ok)


def cluster_status(
    cluster: RedisCluster,
    members: Sequence[Member],
    converged: bool,
    now: str,
    *,
    resharding: Resharding | None = None,
    invalid_spec: str | None = None,
    extra_conditions: Sequence[Condition] = (),
) -> RedisClusterStatus:
    """The status to report (``lastSyncTimestamp`` unchanged: the caller sets it on a write);
    ``extra_conditions`` (the restore's ``Restored``) are reported beside the others."""
    spec = cluster.spec
    old = cluster.status or RedisClusterStatus()
    shards = shard_statuses(members, spec.shards, spec.replicas_per_shard)
    state, assigned, ok = _slots(members)
    in_role = {s.master for s in shards if s.slot_count} | {r for s in shards for r in s.replicas}
    ready = sum(1 for m in members if m.pod_ready and m.reachable and m.pod in in_role)
    healthy = state == "ok" and ok == SLOTS and all(s.ready for s in shards[: spec.shards])
    if converged and healthy and resharding is None and invalid_spec is None:
        phase = RedisClusterPhase.RUNNING
    elif old.phase is RedisClusterPhase.INITIALIZING and state != "ok":
        phase = RedisClusterPhase.INITIALIZING
    else:
        phase = RedisClusterPhase.DEGRADED
    desired = spec.shards * (1 + spec.replicas_per_shard)
    message = f"{ready}/{desired} pods ready; {ok}/{SLOTS} slots ok; cluster_state {state or 'unknown'}"
    if resharding is None:
        reshard = (False, "Balanced", f"{spec.shards} shards of {SLOTS // spec.shards}±1 slots")
    elif resharding.waiting_change:
        reshard = (
            True,
            "WaitingForRunningResharding",
            f"{resharding.waiting_change} waits for {resharding.label}{resharding.trouble}",
        )
    else:
        moving = f"{resharding.label}: {resharding.slots_remaining} slots to move{resharding.trouble}"
        reshard = (True, "MovingSlots", moving)
    return reported(
        cluster,
        phase,
        ready=ready,
        message=message,
        reasons=("ClusterReady", "ShardsNotReady"),
        invalid_spec=invalid_spec,
        invalid_detail=message,
        conditions=[condition(old, "Resharding", *reshard, now=now), *extra_conditions],
        now=now,
        shards=shards,
        cluster_state=state,
        slots_assigned=assigned,
        slots_ok=ok,
        slots_to_move=resharding.slots_remaining if resharding else 0,
        resharding=resharding.label if resharding else None,
    )


def reconcile_status(members: Sequence[Member], done: Done, now: str) -> RedisClusterStatus:
    """The status one reconcile reports for ``done.cluster`` (module docstring)."""
    cluster, rollout = done.cluster, done.rollout
    progressing, intents = progressing_condition(cluster, rollout, now), None
    old = cluster.status or RedisClusterStatus()
    if (unsupported := unsupported_in_cluster_mode(cluster)) is not None:
        intents = condition(old, "Intents", False, "UnsupportedInClusterMode", unsupported, now=now)
    archive = archive_condition(cluster, old, now)  # refused in cluster mode, when asked for
    return with_revisions(
        cluster_status(
            cluster,
            members,
            done.converged,
            now,
            resharding=done.resharding,
            invalid_spec=done.invalid,
            extra_conditions=[c for c in (done.restored, progressing, intents, archive) if c is not None],
        ),
        rollout,
    )
