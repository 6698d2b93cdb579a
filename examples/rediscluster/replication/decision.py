"""One reconcile's replication-mode plan, from the RedisCluster and what was observed (pure).

:func:`decide` is ``topology.plan`` — or, first, a planned switchover when the master's pod is
terminating while it still serves (a drain: ``topology.evacuate``) or when a scale-in would remove
the master (``topology.scale_down_victims``) — plus the StatefulSet replicas to ask for: no pod is
removed during a handover, and a scale-in waits for the switchover off the master and for the
topology work to finish. No I/O: the same :class:`Look` gives the same :class:`Decision`.
"""

from __future__ import annotations

from dataclasses import dataclass

from examples.rediscluster.api import RedisCluster
from examples.rediscluster.replication.execute import PhaseTimer
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.topology import evacuate, plan, scale_down_victims, switchover
from examples.rediscluster.replication.topology_types import ClusterState, Plan, Policy, Wait
from examples.rediscluster.shared.pods import not_ready_for
from examples.rediscluster.shared.redis_admin import RedisConnection
from pyctrl.client import Pod

__all__ = ["Decision", "Look", "decide", "policy", "recorded", "unhealthy_for"]


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


def policy(cluster: RedisCluster) -> Policy:
    return Policy(
        down_after=cluster.spec.down_after_milliseconds / 1000,
        enable_auto_failover=cluster.spec.enable_auto_failover,
    )


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
    """The plan of this reconcile (module docstring)."""
    nodes, state, rules = look.observed.nodes, look.recorded, policy(cluster)
    want = cluster.spec.replicas
    current = max([n.ordinal + 1 for n in nodes], default=want)
    the_plan = plan(nodes, state, rules, master_unhealthy_for=look.master_unhealthy_for)
    if (handover := evacuate(nodes, state, rules)) is not None:
        return Decision(max(want, current), handover)  # no pod is removed during a handover
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
