"""The queue priority of a replication-mode reconcile's look-again (``decision.requeue_priority``):
failover work high, the settled periodic look-again low, everything else normal; the result that
carries them (``decision.look_again``), hibernation's included (pure, no I/O)."""

from __future__ import annotations

from typing import Any, cast

from examples.rediscluster.replication.decision import (
    ACTING_REQUEUE,
    FAILOVER_PRIORITY,
    STEADY_REQUEUE,
    Decision,
    Done,
    Look,
    look_again,
    requeue_after,
    requeue_priority,
)
from examples.rediscluster.replication.execute import PhaseTimer
from examples.rediscluster.replication.observe import Observed
from examples.rediscluster.replication.topology import plan
from examples.rediscluster.replication.topology_types import ClusterState, NodeObservation, Plan, Policy
from examples.rediscluster.shared.redis_admin import RedisAccess
from examples.rediscluster.shared.rollout import RolloutDecision
from pyctrl import Result
from pyctrl.client import ObjectMeta, Pod
from pyctrl.workqueue import LOW_PRIORITY
from tests.rediscluster._builders import gone, healthy, replica

POLICY = Policy(down_after=5.0)
AT_0 = ClusterState("rc-0", 1)


def priority_of(nodes: list[NodeObservation], unhealthy_for: float, *, running: bool) -> tuple[float, int]:
    observed = Observed({}, nodes, RedisAccess(), 1.0)
    look = Look(observed, AT_0, unhealthy_for, PhaseTimer())
    decision = Decision(len(nodes), plan(nodes, AT_0, POLICY, master_unhealthy_for=unhealthy_for))
    done = Done(cast(Any, None), False, RolloutDecision("r1", "r1"), None, None, None)
    return (
        requeue_after(look, decision, done, running=running),
        requeue_priority(look, decision, done, running=running),
    )


def test_a_settled_cluster_looks_again_in_30_s_at_low_priority() -> None:
    assert priority_of(healthy(3), 0.0, running=True) == (STEADY_REQUEUE, LOW_PRIORITY)


def test_a_master_down_past_its_window_is_failed_over_and_looked_at_again_at_failover_priority() -> None:
    down = [gone(0, label="master"), replica(1, 0), replica(2, 0)]
    assert priority_of(down, 6.0, running=True)[1] == FAILOVER_PRIORITY


def test_a_master_failing_inside_its_window_is_watched_at_failover_priority() -> None:
    down = [gone(0, label="master"), replica(1, 0), replica(2, 0)]
    assert priority_of(down, 2.0, running=True)[1] == FAILOVER_PRIORITY


def test_a_cluster_not_yet_running_looks_again_at_normal_priority() -> None:
    assert priority_of(healthy(3), 0.0, running=False)[1] == 0


def test_the_result_carries_the_look_again_and_its_priority() -> None:
    nodes = healthy(3)
    observed = Observed({}, nodes, RedisAccess(), 1.0)
    look = Look(observed, AT_0, 0.0, PhaseTimer())
    decision = Decision(3, plan(nodes, AT_0, POLICY, master_unhealthy_for=0.0))
    done = Done(cast(Any, None), False, RolloutDecision("r1", "r1"), None, None, None)
    assert look_again(look, decision, done, running=True) == Result(
        requeue_after=STEADY_REQUEUE, priority=LOW_PRIORITY
    )


def test_a_hibernating_cluster_looks_again_each_second_until_no_pod_is_left() -> None:
    hibernating = Decision(0, Plan(), hibernate=True)
    done = Done(cast(Any, None), False, RolloutDecision("r1", None), None, None, None)
    stopping = Observed({"rc-0": Pod(metadata=ObjectMeta(name="rc-0"))}, [], RedisAccess(), 1.0)
    stopped = Observed({}, [], RedisAccess(), 1.0)
    at = [
        look_again(Look(observed, AT_0, 0.0, PhaseTimer()), hibernating, done, running=False)
        for observed in (stopping, stopped)
    ]
    assert at == [Result(requeue_after=ACTING_REQUEUE), Result(requeue_after=STEADY_REQUEUE)]
