"""examples.rediscluster.replication.status: the reported status as a pure function of observations."""

from __future__ import annotations

from examples.rediscluster.api import RedisCluster, RedisClusterPhase
from examples.rediscluster.replication.status import observed_status
from tests.rediscluster._builders import gone, master, replica


def cluster(**status: object) -> RedisCluster:
    return RedisCluster.model_validate(
        {
            "metadata": {"name": "rc", "namespace": "ns", "generation": 4},
            "spec": {"replicas": 3},
            "status": {"currentMaster": "rc-0", "masterEpoch": 1, **status},
        }
    )


def test_a_converged_cluster_is_running_and_its_status_is_stable() -> None:
    nodes = [master(0), replica(1, 0), replica(2, 0)]
    first = observed_status(cluster(), nodes, True, now="2026-01-01T00:00:00Z")
    assert (first.phase, first.ready_replicas, first.observed_generation) == (RedisClusterPhase.RUNNING, 3, 4)
    assert first.selector == "app.kubernetes.io/instance=rc,app.kubernetes.io/name=redis"
    again = observed_status(
        cluster(**first.model_dump(by_alias=True, exclude_none=True)), nodes, True, now="2026-01-01T00:05:00Z"
    )
    assert again == first  # same observations, same status: nothing to write


def test_a_lagging_replica_makes_the_cluster_degraded() -> None:
    s = observed_status(
        cluster(phase="Running"), [master(0), replica(1, 0), replica(2, 0, link_up=False)], True, now="t"
    )
    assert (s.phase, s.ready_replicas) == (RedisClusterPhase.DEGRADED, 2)
    assert {c.type: c.status for c in s.conditions} == {
        "Ready": "False",
        "Degraded": "True",
        "PodsScheduled": "True",
    }


def test_a_master_that_stopped_serving_is_reported_as_failover_after_it_once_ran() -> None:
    nodes = [gone(0), replica(1, 0), replica(2, 0)]
    assert (
        observed_status(cluster(phase="Running"), nodes, False, now="t").phase is RedisClusterPhase.FAILOVER
    )
    assert (
        observed_status(cluster(phase="Initializing"), nodes, False, now="t").phase
        is RedisClusterPhase.INITIALIZING
    )


def test_an_invalid_spec_is_the_reason_of_both_conditions_and_keeps_the_cluster_from_running() -> None:
    nodes = [master(0), replica(1, 0), replica(2, 0)]
    why = "spec.redisConfig key 'port': port is managed by the operator"
    s = observed_status(cluster(phase="Running"), nodes, True, now="t", invalid_spec=why)
    assert (s.phase, s.ready_replicas) == (RedisClusterPhase.DEGRADED, 3)
    conditions = {c.type: (c.status, c.reason, c.message) for c in s.conditions}
    message = f"{why}; nothing of the spec was applied (3/3 pods ready)"
    assert conditions == {
        "Ready": ("False", "InvalidSpec", message),
        "Degraded": ("True", "InvalidSpec", message),
        "PodsScheduled": ("True", "AllPodsScheduled", "every pod is on a node"),
    }
    fixed = observed_status(cluster(**s.model_dump(by_alias=True, exclude_none=True)), nodes, True, now="t2")
    assert fixed.phase is RedisClusterPhase.RUNNING
    assert {c.type: c.reason for c in fixed.conditions} == {
        "Ready": "AllReplicasReady",
        "Degraded": "AsExpected",
        "PodsScheduled": "AllPodsScheduled",
    }


def test_pods_the_scheduler_cannot_place_are_reported_with_its_reason() -> None:
    nodes = [master(0), replica(1, 0), replica(2, 0)]
    why = "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    s = observed_status(cluster(phase="Running"), nodes, True, now="t", unschedulable={"rc-3": why})
    scheduled = next(c for c in s.conditions if c.type == "PodsScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    assert scheduled.message == f"1 pod(s) Pending, not schedulable: rc-3: {why}"
    placed = observed_status(cluster(**s.model_dump(by_alias=True, exclude_none=True)), nodes, True, now="t2")
    assert next(c for c in placed.conditions if c.type == "PodsScheduled").status == "True"
