"""One reconcile's replication-mode decisions, from the RedisCluster and what was observed (pure):
the plan (:func:`decide`), when to look again (:func:`requeue_after`) and at which queue priority
(:func:`requeue_priority`), both in the reconcile's result (:func:`look_again`).

:func:`decide` is ``topology.plan`` — or, first, a planned switchover when the master's pod is
terminating while it still serves (a drain: ``topology.evacuate``) or when a scale-in would remove
the master (``topology.scale_down_victims``) — plus the StatefulSet replicas to ask for: no pod is
removed during a handover, and a scale-in waits for the switchover off the master and for the
topology work to finish. No I/O: the same :class:`Look` gives the same :class:`Decision`.
"""

from __future__ import annotations

from dataclasses import dataclass

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.api.intents import (
    FENCED_LABEL,
    InvalidIntent,
    fenced_pods,
    hibernation,
    switchover_to,
)
from examples.rediscluster.backup.archiving import ArchiveObservation
from examples.rediscluster.replication.execute import PhaseTimer
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.topology import (
    evacuate,
    fence,
    fenced_master_handover,
    plan,
    scale_down_victims,
    switchover,
)
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Demote,
    Plan,
    Policy,
    Promote,
    RecordMaster,
    ReplicaOf,
    Switchover,
    Wait,
)
from examples.rediscluster.shared.pods import not_ready_for
from examples.rediscluster.shared.redis_admin import RedisConnection
from examples.rediscluster.shared.rollout import RolloutDecision
from pyctrl import Result
from pyctrl.client import Pod
from pyctrl.client.objects import Condition
from pyctrl.workqueue import LOW_PRIORITY

__all__ = [
    "ACTING_REQUEUE",
    "FAILOVER_PRIORITY",
    "HANDOVER_REQUEUE",
    "STEADY_REQUEUE",
    "Decision",
    "Done",
    "Look",
    "decide",
    "hibernation_asked",
    "look_again",
    "master_loaded",
    "policy",
    "recorded",
    "requeue_after",
    "requeue_priority",
    "switchover_refusal",
    "switchover_target",
    "unhealthy_for",
    "was_hibernated",
]

STEADY_REQUEUE = 30.0
ACTING_REQUEUE = 1.0
#: while a FAILOVER TO runs, look again this soon: the replicas still following the old master
#: are re-pointed (and writes acknowledged again) right after the handover, not a second later
HANDOVER_REQUEUE = 0.1
#: the workqueue priority of failover work: the prober's notifications (a master down, a pod that
#: stops or starts answering) and the requeues of a reconcile in the middle of a failover or a
#: handover. Routine requests run at 0 and the settled 30 s look-again at ``LOW_PRIORITY``, so with
#: hundreds of clusters on one operator a failover never waits behind routine reconciles.
FAILOVER_PRIORITY = 100


@dataclass
class Look:
    """What one reconcile observed: the pods and their Redis facts, the master recorded in status,
    and how long that master has been unhealthy (the prober's and the pod's view)."""

    observed: Observed
    recorded: ClusterState
    master_unhealthy_for: float
    #: a failover's phases, from the start of the reconcile's observation
    timer: PhaseTimer

    @property
    def pods(self) -> dict[str, Pod]:
        return self.observed.pods

    def answering(self) -> dict[str, RedisConnection]:
        return {n.pod: self.observed.connection(n.pod) for n in self.observed.nodes if n.redis and n.ip}

    def checker(self) -> RedisConnection | None:
        """The pod that checks ACL rules: the recorded master if it answers, else any that does."""
        answering = sorted(
            (n for n in self.observed.nodes if n.redis is not None and n.ip),
            key=lambda n: n.pod != self.recorded.current_master,
        )
        return self.observed.connection(answering[0].pod) if answering else None


@dataclass(frozen=True)
class Decision:
    """The plan, and the StatefulSet replicas to ask for while it runs."""

    replicas: int
    plan: Plan
    #: hibernation asked and possible: no Redis command, the StatefulSet at 0, volumes kept
    hibernate: bool = False


def policy(cluster: RedisCluster) -> Policy:
    """The spec fields and the fenced pods (none when the annotation is malformed: :func:`decide`
    then waits, and the children step reports it as ``InvalidSpec``)."""
    try:
        fenced = fenced_pods(cluster)
    except InvalidIntent:
        fenced = frozenset()
    return Policy(
        down_after=cluster.spec.down_after_milliseconds / 1000,
        enable_auto_failover=cluster.spec.enable_auto_failover,
        fenced=fenced,
    )


def hibernation_asked(cluster: RedisCluster) -> bool:
    """``hibernation: on`` (a malformed value: not asked; the children step reports it)."""
    try:
        return hibernation(cluster)
    except InvalidIntent:
        return False


def was_hibernated(cluster: RedisCluster) -> bool:
    """The status says the cluster hibernates or is waking (condition ``Hibernated`` True)."""
    conditions = cluster.status.conditions if cluster.status is not None else []
    return any(c.type == "Hibernated" and c.status == "True" for c in conditions)


def master_loaded(look: Look) -> bool:
    """The recorded master answers and has loaded its dataset (or none is recorded)."""
    master = look.recorded.current_master
    if master is None:
        return True
    node = next((n for n in look.observed.nodes if n.pod == master), None)
    return node is not None and node.reachable and node.redis is not None and not node.redis.loading


def switchover_target(cluster: RedisCluster, look: Look) -> str | None:
    """The pod a ``switchover-to`` annotation asks for, when it can be acted on: a pod of the
    cluster, not fenced, not the master already (else None: see :func:`switchover_refusal`)."""
    target = switchover_to(cluster)
    if target is None or switchover_refusal(cluster, look, target) is not None:
        return None
    return target if target != look.recorded.current_master else None


def switchover_refusal(cluster: RedisCluster, look: Look, target: str) -> str | None:
    """Why a switchover to ``target`` cannot be done at all (None: it can, maybe later)."""
    if target not in {n.pod for n in look.observed.nodes}:
        return f"{target} is not a pod of RedisCluster {cluster.name}"
    if target in policy(cluster).fenced:
        return f"{target} is fenced: a fenced pod is never promoted"
    return None


def recorded(cluster: RedisCluster) -> ClusterState:
    """The master and epoch the status recorded."""
    status = cluster.status
    return ClusterState(status.current_master, status.master_epoch) if status else ClusterState()


def unhealthy_for(cluster: RedisCluster, observed: Observed, master: str | None, probe: float) -> float:
    """How long the recorded ``master`` has been unhealthy: the prober's figure (``probe``) or the
    time its pod has been NotReady, whichever is longer; a master whose pod is gone counts as down."""
    if master is None:
        return 0.0
    pod = observed.pods.get(master)
    if pod is None:
        return max(probe, cluster.spec.down_after_milliseconds / 1000)  # gone: count it as down
    return max(probe, not_ready_for(pod))


def decide(cluster: RedisCluster, look: Look) -> Decision:
    """The plan of this reconcile (module docstring), with the fenced pods' labels (``fence``)."""
    nodes, state, rules = look.observed.nodes, look.recorded, policy(cluster)
    want = cluster.spec.replicas
    current = max([n.ordinal + 1 for n in nodes], default=want)
    try:
        fenced_pods(cluster)
    except InvalidIntent as exc:  # do nothing to the topology until the annotation is fixed
        return Decision(max(want, current), Plan((Wait(str(exc)),)))
    if hibernation_asked(cluster) and cluster.spec.enable_persistence:
        return Decision(0, Plan(), hibernate=True)  # no evacuation, no failover: every pod stops
    if was_hibernated(cluster) and not master_loaded(look):
        why = f"waking from hibernation: waiting for the master {state.current_master} to load its data"
        return Decision(want, Plan((Wait(why),)))  # never a failover while the pods come back
    decision = _decide(cluster, look, rules, want, current)
    labelled = fence(decision.plan, nodes, state.current_master, FENCED_LABEL, rules.fenced)
    return Decision(decision.replicas, labelled)


def _decide(cluster: RedisCluster, look: Look, rules: Policy, want: int, current: int) -> Decision:
    nodes, state = look.observed.nodes, look.recorded
    the_plan = plan(nodes, state, rules, master_unhealthy_for=look.master_unhealthy_for)
    if (handover := evacuate(nodes, state, rules)) is not None:
        return Decision(max(want, current), handover)  # no pod is removed during a handover
    if the_plan.converged and (handover := fenced_master_handover(nodes, state, rules)) is not None:
        return Decision(max(want, current), handover)
    if the_plan.converged and (target := switchover_target(cluster, look)) is not None:
        return Decision(max(want, current), switchover(nodes, state, target))
    if want < current and state.current_master is not None and the_plan.converged:
        scale = scale_down_victims(nodes, state, want, rules)
        if scale.fail_over_first:
            if scale.failover_to is None:
                waiting = Wait("scale-in: no in-sync replica to hand the master to yet")
                return Decision(current, Plan((waiting,)))
            return Decision(current, switchover(nodes, state, scale.failover_to))
    if want < current and state.current_master is not None and not the_plan.converged:
        return Decision(current, the_plan)  # finish the topology work before removing pods
    return Decision(want, the_plan)


@dataclass
class Done:
    """What :meth:`ReplicationModeReconciler.execute` did."""

    cluster: RedisCluster
    acted: bool
    rollout: RolloutDecision
    volumes: Condition | None
    #: why the spec cannot be run (nothing was applied), if it cannot
    invalid: str | None
    #: the restore's condition (``Restored``), if there is one
    restored: Condition | None
    #: certificates or the ACL file still being reloaded (set by the reconciler after execute)
    reloading: bool = False
    #: ``status.archive`` and ``ContinuousArchiving`` (set by the status step; None, None: off)
    archive: ArchiveObservation = (None, None)

    @classmethod
    def hibernating(cls, cluster: RedisCluster, invalid: str | None, restored: Condition | None) -> Done:
        """A hibernation's execute: nothing done (the StatefulSet at 0 stops the pods, each Redis
        saving its data), the rollout at rest at the revision the status knew."""
        resting = RolloutDecision(cluster.status.current_revision if cluster.status else None, None)
        return cls(cluster, False, resting, None, invalid, restored)


def look_again(look: Look, plan: Decision, done: Done, *, running: bool) -> Result:
    """The reconcile's result: while hibernating, after 1 s until no pod is left, then after 30 s;
    else after :func:`requeue_after` at :func:`requeue_priority`."""
    if plan.hibernate:
        return Result(requeue_after=ACTING_REQUEUE if look.pods else STEADY_REQUEUE)
    return Result(
        requeue_after=requeue_after(look, plan, done, running=running),
        priority=requeue_priority(look, plan, done, running=running),
    )


def requeue_after(look: Look, plan: Decision, done: Done, *, running: bool) -> float:
    """When to look again: at once (0.1 s) while a ``FAILOVER TO`` hands the master over; after 30 s
    when settled (nothing done or reloading, the plan converged, no rollout, ``running``) or when an
    invalid spec waits for its fix (a watch event brings that) and the topology needs no work; else
    after 1 s."""
    the_plan, observed, rollout = plan.plan, look.observed, done.rollout
    switching = [*the_plan.actions, *(rollout.step.actions if isinstance(rollout.step, Plan) else ())]
    if observed.handing_over() or any(isinstance(a, Switchover) for a in switching):
        return HANDOVER_REQUEUE
    settled = running and not done.acted and not done.reloading and the_plan.converged
    settled = settled and not rollout.in_progress
    stuck = done.invalid is not None and not done.acted and (the_plan.converged or not observed.nodes)
    return STEADY_REQUEUE if settled or stuck else ACTING_REQUEUE


_TOPOLOGY_REPAIR = (RecordMaster, Promote, ReplicaOf, Demote, Switchover)


def requeue_priority(look: Look, plan: Decision, done: Done, *, running: bool) -> int:
    """The queue priority of the look-again: ``FAILOVER_PRIORITY`` while the master is unhealthy,
    a handover runs or the topology is being repaired (promote, re-point, demote: the writes of the
    cluster wait on it); ``LOW_PRIORITY`` for the settled look-again (periodic, news to nobody, as
    controller-runtime enqueues resyncs); else 0."""
    after = requeue_after(look, plan, done, running=running)
    step = done.rollout.step
    actions = [*plan.plan.actions, *(step.actions if isinstance(step, Plan) else ())]
    if (
        look.master_unhealthy_for > 0
        or look.observed.handing_over()
        or any(isinstance(a, _TOPOLOGY_REPAIR) for a in actions)
    ):
        return FAILOVER_PRIORITY
    return LOW_PRIORITY if after == STEADY_REQUEUE else 0
