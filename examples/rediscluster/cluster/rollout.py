"""Operator-ordered rollouts of a ``mode: cluster`` RedisCluster, one shard at a time.

The cluster-mode counterpart of ``replication.rollout`` (which mirrors the StatefulSet
controller's ``RollingUpdate`` in the operator's order; the StatefulSet is ``OnDelete``): the same
order applied to each shard, a group of pods with one master, taking the shards one after the
other (lowest index first):

1. the shard's outdated replicas, one at a time (highest ordinal first), each deleted only once
   every pod of the cluster is back in sync (:func:`unsettled`);
2. then, when only the shard's master is outdated, a planned ``CLUSTER FAILOVER`` (never FORCE or
   TAKEOVER: the master hands its whole offset over before the replica is elected) on the
   updated in-sync replica with the highest replication offset (lowest ordinal on a tie): a
   :class:`ShardFailover`, carried out by
   ``cluster.admin.failover``,
   which returns once the replica reports itself master of slots;
3. then the old master, now a replica, like any replica; then the next shard.

A shard without replicas (``replicasPerShard: 0``) has nobody to hand its slots to: its master is
restarted only when its data persists (it reloads its AOF), else the rollout waits for someone to
delete the pod (a restart would empty the shard).

Guarantees:

- :func:`decide` is pure (no I/O): the same members, revisions and spec give the same step;
- nothing is done while the cluster plan has work to do or slots move (the reconciler calls the
  rollout only on a converged plan with no resharding), nor while any pod is not back in sync —
  every pod Ready and answering with ``cluster_state:ok``, no slot open, no node seen failing,
  each shard served by one master whose other pods replicate it with ``master_link_status:up``,
  a connected cluster link from the master and no more than ``MAX_LAG_BYTES`` behind: the
  rollout is paused (``RolloutPaused``, naming the pod) and resumes by itself afterwards;
- at most one pod is restarting at any time, so never two shards at once; a deletion carries the
  pod's uid as precondition and no further step is taken before the cache shows the pod replaced;
- status and Events as in replication mode: ``currentRevision``, ``updateRevision``, condition
  ``Progressing``, Events ``RolloutRestartingPod``, ``RolloutSwitchover``, ``RolloutPaused``,
  ``RolloutComplete``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.cluster import admin
from examples.rediscluster.cluster.plan_types import Member
from examples.rediscluster.cluster.slots import pods_for, shard_of
from examples.rediscluster.shared import rollout as common
from examples.rediscluster.shared.redis_admin import RedisAccess, RedisAdminError
from pyctrl.client import Pod
from pyctrl.log import get_logger

__all__ = ["FAILOVER_TIMEOUT", "ClusterRollout", "ShardFailover", "decide", "unsettled"]

log = get_logger("rediscluster.cluster")


@dataclass(frozen=True, slots=True)
class ShardFailover:
    """Cluster mode: a planned ``CLUSTER FAILOVER`` on ``pod``, an updated in-sync replica of shard
    ``shard`` whose master ``master`` is the shard's last outdated pod (``cluster.rollout``)."""

    pod: str
    shard: int
    master: str


#: how long a planned CLUSTER FAILOVER may take before the reconcile reports it failed and retries
FAILOVER_TIMEOUT = 15.0


def _shards(members: Sequence[Member], replicas_per_shard: int) -> dict[int, list[Member]]:
    out: dict[int, list[Member]] = {}
    for m in sorted(members, key=lambda m: m.ordinal):
        out.setdefault(shard_of(m.ordinal, replicas_per_shard), []).append(m)
    return out


def _master(pods: Sequence[Member]) -> Member | None:
    """The one pod of the shard serving slots (None: none, or two claim to)."""
    serving = [m for m in pods if m.reachable and m.is_master and m.slots]
    return serving[0] if len(serving) == 1 else None


def unsettled(members: Sequence[Member], shards: int, replicas_per_shard: int) -> dict[str, str]:
    """Who is not back in sync, and why; empty: the cluster is whole (module docstring).

    Keys are pod names (missing pods included), ``node <id>`` for a failing node no pod is any more
    (a restarted pod's old identity, until the plan forgets it) and ``shard <i>``."""
    why: dict[str, str] = {}
    ids = {m.node_id for m in members}
    prefix = members[0].pod.rsplit("-", 1)[0] if members else "-"
    for o in sorted(set(range(pods_for(shards, replicas_per_shard))) - {m.ordinal for m in members}):
        why[f"{prefix}-{o}"] = "missing"
    for m in members:
        f = m.facts
        if f is None or not m.reachable:
            why[m.pod] = "not answering"
        elif not m.pod_ready:
            why[m.pod] = "not ready"
        elif f.cluster_state != "ok":
            why[m.pod] = f"cluster_state {f.cluster_state}"
        elif f.migrating or f.importing:
            why[m.pod] = "slots are moving"
        for p in f.peers.values() if f is not None else ():
            if p.failing and p.node_id not in ids:
                why[f"node {p.node_id[:8]}"] = f"failing, not forgotten yet (seen by {m.pod})"
            elif p.failing:
                pod = next(n.pod for n in members if n.node_id == p.node_id)
                why.setdefault(pod, f"seen failing by {m.pod}")
    for index, pods in _shards(members, replicas_per_shard).items():
        master = _master(pods)
        if master is None:
            why[f"shard {index}"] = "not served by exactly one master"
            continue
        assert master.facts is not None
        for n in pods:
            if n is master or n.pod in why or n.facts is None:
                continue
            view = master.facts.peers.get(n.facts.node_id)
            if not n.facts.me.is_replica or n.facts.me.master_id != master.node_id:
                why[n.pod] = f"not replicating {master.pod}"
            elif not n.facts.master_link_up:
                why[n.pod] = f"replication link to {master.pod} down"
            elif view is None or not view.connected or view.failing:
                why[n.pod] = f"cluster link from {master.pod} not connected"
            elif master.facts.repl_offset - n.facts.repl_offset > common.MAX_LAG_BYTES:
                why[n.pod] = f"more than {common.MAX_LAG_BYTES} bytes behind {master.pod}"
    return why


def _catching_up(revisions: Mapping[str, str | None], update_revision: str | None, key: str) -> bool:
    """True when ``key`` (of :func:`unsettled`) is the rollout's own doing: an updated pod, a
    missing pod (the StatefulSet recreates it from the update revision), a restarted pod's old
    identity not forgotten yet. Anything else pauses the rollout."""
    if key.startswith("node "):
        return True
    if key.startswith("shard ") or key == "-":
        return False
    return revisions.get(key, update_revision) == update_revision


def decide(
    members: Sequence[Member],
    revisions: Mapping[str, str | None],
    update_revision: str | None,
    *,
    shards: int,
    replicas_per_shard: int,
    persistent: bool = False,
    previous_current: str | None = None,
) -> common.RolloutDecision:
    """The next rollout step (module docstring); ``revisions``: pod -> its revision label."""
    why = unsettled(members, shards, replicas_per_shard)
    decision = common.opening(
        revisions, update_revision, previous_current, why, partial(_catching_up, revisions, update_revision)
    )
    outdated = decision.outdated
    if not outdated or decision.paused or decision.waiting:
        return decision
    groups = _shards(members, replicas_per_shard)
    index = min(i for i, pods in groups.items() if any(m.pod in outdated for m in pods))
    pods = groups[index]
    master = _master(pods)
    assert master is not None  # unsettled() names a shard without one
    stale = [p for p in outdated if p != master.pod and any(m.pod == p for m in pods)]
    if stale:
        return replace(decision, step=common.Restart(stale[0]))
    if replicas_per_shard == 0 and persistent:
        return replace(decision, step=common.Restart(master.pod))
    if replicas_per_shard == 0:
        alone = f"shard {index} has no replica and no persistence: delete {master.pod} to restart it"
        return replace(decision, paused=f"{alone} (its data would be lost)")
    target = max(
        (m for m in pods if m is not master and m.facts is not None),
        key=lambda m: (m.facts.repl_offset if m.facts else 0, -m.ordinal),
    )
    return replace(decision, step=ShardFailover(target.pod, index, master.pod))


class ClusterRollout(common.PodRollout):
    """Carries out :func:`decide` for ``cluster.reconciler``: deletions, failovers, Events."""

    async def step_cluster(
        self,
        cluster: RedisCluster,
        pods: Mapping[str, Pod],
        members: Sequence[Member],
        access: RedisAccess,
        *,
        idle: bool,
        io_timeout: float,
    ) -> common.RolloutDecision:
        """Decide and, when ``idle`` (a converged plan, no resharding, nothing else done), act;
        the result's ``step`` is what was done (None: nothing; a failover that failed is logged
        and named in ``waiting``, and retried by a later reconcile)."""
        update_revision = await self.update_revision(cluster)
        if update_revision is False:
            return common.known_revisions(cluster)
        status = cluster.status
        decision = decide(
            members,
            common.revisions_of(pods),
            update_revision,
            shards=cluster.spec.shards,
            replicas_per_shard=cluster.spec.replicas_per_shard,
            persistent=cluster.spec.enable_persistence,
            previous_current=status.current_revision if status else None,
        )
        acting = self._settle(cluster, decision, pods, idle=idle)
        if acting is not decision:
            return acting
        if isinstance(decision.step, common.Restart):
            await self._restart(cluster, pods, decision, decision.step.pod)
        elif isinstance(decision.step, ShardFailover):
            s = decision.step
            self.recorder.event(
                cluster,
                "Normal",
                "RolloutSwitchover",
                f"shard {s.shard}: every replica runs revision {decision.update_revision}: "
                f"CLUSTER FAILOVER on {s.pod} before restarting the master {s.master}",
            )
            target = next(m for m in members if m.pod == s.pod)
            assert target.ip is not None  # an in-sync member answers at its IP
            try:
                await admin.failover(access.at(target.ip, target.port, io_timeout), FAILOVER_TIMEOUT)
            except RedisAdminError as exc:
                log.info(
                    "Rollout failover failed; will retry", cluster=cluster.name, pod=s.pod, error=str(exc)
                )
                return replace(
                    decision, step=None, waiting=f"CLUSTER FAILOVER on {s.pod} failed ({exc}); retrying"
                )
        return decision
