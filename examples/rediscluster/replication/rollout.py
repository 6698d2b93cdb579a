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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from examples.rediscluster.api import RedisCluster, RedisClusterStatus
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.status import _condition as condition
from examples.rediscluster.replication.topology import (
    ClusterState,
    NodeObservation,
    Plan,
    Policy,
    Role,
    choose_failover_candidate,
    switchover,
)
from pyctrl.client import Client, Pod, StatefulSet
from pyctrl.client.errors import Conflict, NotFound
from pyctrl.client.objects import Condition
from pyctrl.client.options import Preconditions
from pyctrl.log import get_logger
from pyctrl.recorder import EventRecorder

__all__ = [
    "MAX_LAG_BYTES",
    "REVISION_LABEL",
    "Restart",
    "Rollout",
    "RolloutDecision",
    "ShardFailover",
    "decide",
    "progressing_condition",
    "unsettled",
]

log = get_logger("rediscluster")

#: the label the StatefulSet controller puts on each pod: the revision of the template it came from
REVISION_LABEL = "controller-revision-hash"
#: how far (replication offset bytes) a replica may trail the master and still count as caught up
MAX_LAG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Restart:
    """Delete ``pod`` so the StatefulSet recreates it from the update revision."""

    pod: str


@dataclass(frozen=True, slots=True)
class ShardFailover:
    """Cluster mode: a planned ``CLUSTER FAILOVER`` on ``pod``, an updated in-sync replica of shard
    ``shard`` whose master ``master`` is the shard's last outdated pod (``cluster.rollout``)."""

    pod: str
    shard: int
    master: str


@dataclass(frozen=True, slots=True)
class RolloutDecision:
    """Where the rollout stands and its next step (``Restart``, a switchover ``Plan`` or, in cluster
    mode, a ``ShardFailover``; None: nothing to do now)."""

    current_revision: str | None
    update_revision: str | None
    outdated: tuple[str, ...] = ()
    step: Restart | Plan | ShardFailover | None = None
    paused: str | None = None  # why no step is taken although pods are outdated
    waiting: str | None = None  # an updated pod is still catching up (the rollout is progressing)

    @property
    def in_progress(self) -> bool:
        return bool(self.outdated)


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


def _current(revisions: Mapping[str, str | None], update: str, previous: str | None) -> str:
    old = [rev for rev in revisions.values() if rev != update and rev is not None]
    if not old:
        return update
    if previous in old:
        return previous
    return Counter(old).most_common(1)[0][0]


def started(
    revisions: Mapping[str, str | None], update_revision: str, previous_current: str | None
) -> RolloutDecision:
    """The revisions and the outdated pods (highest ordinal first) of a rollout to ``update_revision``,
    no step chosen yet."""
    current = _current(revisions, update_revision, previous_current)
    outdated = tuple(sorted((p for p, rev in revisions.items() if rev != update_revision), key=_ordinal_key))
    return RolloutDecision(current, update_revision, outdated)


def held(
    decision: RolloutDecision, why: Mapping[str, str], catching_up: Callable[[str], bool]
) -> RolloutDecision:
    """``decision`` held back by ``why`` (who -> why not in sync): ``waiting`` when every entry is the
    rollout's own doing (``catching_up``), else ``paused``."""
    text = "; ".join(f"{pod}: {reason}" for pod, reason in sorted(why.items()))
    if all(catching_up(key) for key in why):
        return replace(decision, waiting=f"waiting for updated pods to catch up ({text})")
    return replace(decision, paused=f"paused until every pod is back in sync ({text})")


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
    if update_revision is None:
        return RolloutDecision(previous_current, None)
    decision = started(revisions, update_revision, previous_current)
    if not decision.outdated:
        return decision
    why = unsettled(nodes, recorded.current_master, replicas)
    if why:
        return held(decision, why, lambda pod: revisions.get(pod) == update_revision)
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


def _ordinal_key(pod: str) -> tuple[int, str]:
    tail = pod.rsplit("-", 1)[-1]
    return (-int(tail) if tail.isdigit() else 0, pod)


class Rollout:
    """Carries out :func:`decide` for the reconciler: pod deletions and Events (module docstring)."""

    def __init__(self, client: Client, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder
        #: cluster -> (pod, uid) of the last pod deleted, until the cache shows it replaced
        self._deleted: dict[tuple[str, str], tuple[str, str | None]] = {}
        #: clusters whose rollout is paused (one Event when a pause begins, not one per reconcile)
        self._paused: set[tuple[str, str]] = set()

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

    def _settle(
        self, cluster: RedisCluster, decision: RolloutDecision, pods: Mapping[str, Pod], *, idle: bool
    ) -> RolloutDecision:
        """Events of a pause beginning or a rollout completing; ``decision`` itself when its step is
        to be taken now, else a copy without a step (not idle, a restart still pending, no step)."""
        key = (cluster.namespace, cluster.name)
        if not decision.outdated:
            self._paused.discard(key)
            if _was_progressing(cluster):
                message = f"every pod runs revision {decision.update_revision}"
                self.recorder.event(cluster, "Normal", "RolloutComplete", message)
            return replace(decision, step=None)
        if self._pending_deletion(key, pods):  # our own restart, not a pause
            restarting = self._deleted[key][0]
            return replace(decision, step=None, paused=None, waiting=f"waiting for {restarting} to restart")
        if decision.paused is None:
            self._paused.discard(key)
        elif key not in self._paused:
            self._paused.add(key)
            self.recorder.event(cluster, "Warning", "RolloutPaused", decision.paused)
            log.info(
                "Rollout paused", cluster=cluster.name, namespace=cluster.namespace, reason=decision.paused
            )
        if not idle or decision.step is None:
            return replace(decision, step=None)
        return decision

    def forget(self, namespace: str, name: str) -> None:
        self._deleted.pop((namespace, name), None)
        self._paused.discard((namespace, name))

    def _pending_deletion(self, key: tuple[str, str], pods: Mapping[str, Pod]) -> bool:
        """True while the cache still shows the last deleted pod with its old uid."""
        pending = self._deleted.get(key)
        if pending is None:
            return False
        pod, uid = pending
        live = pods.get(pod)
        if live is not None and live.metadata.uid == uid:
            return True
        del self._deleted[key]
        return False

    async def _restart(
        self, cluster: RedisCluster, pods: Mapping[str, Pod], decision: RolloutDecision, name: str
    ) -> None:
        pod = pods[name]
        done = len(pods) - len(decision.outdated) + 1
        try:
            await self.client.delete(pod, preconditions=Preconditions(uid=pod.metadata.uid))
        except (NotFound, Conflict):
            return  # already gone or replaced: the next reconcile sees it
        self._deleted[(cluster.namespace, cluster.name)] = (name, pod.metadata.uid)
        message = f"restarting {name} for revision {decision.update_revision} ({done} of {len(pods)})"
        self.recorder.event(cluster, "Normal", "RolloutRestartingPod", message)
        log.info("Rollout restarting a pod", cluster=cluster.name, namespace=cluster.namespace, pod=name)

    async def update_revision(self, cluster: RedisCluster) -> str | Literal[False] | None:
        """The StatefulSet's ``status.updateRevision``; False while the StatefulSet controller has
        not seen its latest template yet (or there is no StatefulSet)."""
        try:
            sts = await self.client.get(StatefulSet, cluster.name, namespace=cluster.namespace)
        except NotFound:
            return False
        if sts.status is None or sts.status.observed_generation != sts.metadata.generation:
            return False
        return sts.status.update_revision


def revisions_of(pods: Mapping[str, Pod]) -> dict[str, str | None]:
    """pod -> the revision of the template it was created from."""
    return {name: (pod.metadata.labels or {}).get(REVISION_LABEL) for name, pod in pods.items()}


def known_revisions(cluster: RedisCluster) -> RolloutDecision:
    """What the status knew, while the StatefulSet controller catches up with the template."""
    status = cluster.status
    return (
        RolloutDecision(status.current_revision, status.update_revision)
        if status
        else RolloutDecision(None, None)
    )


def _was_progressing(cluster: RedisCluster) -> bool:
    old = cluster.status.conditions if cluster.status else []
    return any(c.type == "Progressing" and c.status == "True" for c in old)


def progressing_condition(cluster: RedisCluster, decision: RolloutDecision, now: str) -> Condition | None:
    """The ``Progressing`` condition for ``decision`` (None before the first revision is known)."""
    old = cluster.status or RedisClusterStatus()
    if decision.update_revision is None:
        return next((c for c in old.conditions if c.type == "Progressing"), None)
    if not decision.outdated:
        message = f"every pod runs revision {decision.update_revision}"
        return condition(old, "Progressing", False, "RolloutComplete", message, now=now)
    todo = f"{len(decision.outdated)} pod(s) to restart for revision {decision.update_revision}: "
    todo += ", ".join(decision.outdated)
    if decision.paused is not None:
        return condition(old, "Progressing", True, "RolloutPaused", f"{todo}; {decision.paused}", now=now)
    return condition(
        old, "Progressing", True, "RollingUpdate", f"{todo}; {decision.waiting or 'in progress'}", now=now
    )
