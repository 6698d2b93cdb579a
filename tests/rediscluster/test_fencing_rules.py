"""Fencing (annotation ``redis.pyctrl.dev/fenced-pods``) in the pure topology rules: a fenced pod
is never master nor promoted, wears the ``fenced`` label (out of the Services), and a fenced
master is handed over first."""

from __future__ import annotations

import dataclasses

from examples.rediscluster.replication.topology import (
    choose_failover_candidate,
    fence,
    fenced_master_handover,
    plan,
)
from examples.rediscluster.replication.topology_types import (
    ClusterState,
    Plan,
    Policy,
    RecordMaster,
    ReplicaOf,
    Role,
    SetLabel,
    Switchover,
    Wait,
)
from tests.rediscluster._builders import gone, healthy, master, replica

FENCED = "fenced"


def fenced(*pods: str) -> Policy:
    return Policy(down_after=5.0, fenced=frozenset(pods))


def test_a_fenced_replica_is_never_the_failover_candidate() -> None:
    observed = [gone(0), replica(1, 0, offset=99), replica(2, 0, offset=5)]
    assert choose_failover_candidate(observed, "rc-0", Policy(down_after=5.0)) is not None
    chosen = choose_failover_candidate(observed, "rc-0", fenced("rc-1"))
    assert chosen is not None
    assert chosen.pod == "rc-2"
    assert choose_failover_candidate(observed, "rc-0", fenced("rc-1", "rc-2")) is None


def test_a_failover_with_only_fenced_replicas_waits() -> None:
    p = plan([gone(0), replica(1, 0)], ClusterState("rc-0", 1), fenced("rc-1"), master_unhealthy_for=60)
    assert len(p.actions) == 1
    assert isinstance(p.actions[0], Wait)
    assert "no eligible replica" in p.actions[0].reason


def test_a_fenced_pod_is_never_the_first_master_nor_wiped() -> None:
    holder = [replica(0, 9, link_up=False), replica(1, 9, keys=0, link_up=False)]  # rc-0 holds the data
    p = plan(holder, ClusterState(), fenced("rc-0"))
    assert p.actions == (Wait("bootstrap: rc-0 holds the data but it is fenced"),)
    empty = [replica(0, 9, keys=0, link_up=False), replica(1, 9, keys=0, link_up=False)]
    assert plan(empty, ClusterState(), fenced("rc-0")).actions[0] == RecordMaster("rc-1", 1)
    assert plan(empty, ClusterState(), fenced("rc-0", "rc-1")).actions == (
        Wait("bootstrap: every pod that answers is fenced"),
    )


def test_a_fenced_replica_is_labelled_first_and_keeps_replicating() -> None:
    observed, state = healthy(3), ClusterState("rc-0", 1)
    p = fence(plan(observed, state, fenced("rc-2")), observed, "rc-0", FENCED, frozenset({"rc-2"}))
    assert p.actions == (SetLabel("rc-2", FENCED),)  # no REPLICAOF: it still follows the master
    done = [dataclasses.replace(n, label=FENCED) if n.pod == "rc-2" else n for n in observed]
    assert fence(plan(done, state, fenced("rc-2")), done, "rc-0", FENCED, frozenset({"rc-2"})) == Plan()


def test_an_unfenced_pod_gets_the_replica_label_back() -> None:
    observed = [dataclasses.replace(n, label=FENCED) if n.pod == "rc-1" else n for n in healthy(3)]
    assert plan(observed, ClusterState("rc-0", 1), fenced()).actions == (SetLabel("rc-1", Role.REPLICA),)


def test_a_fenced_master_is_handed_over_to_the_best_unfenced_in_sync_replica() -> None:
    observed = [master(0, online=(1, 2)), replica(1, 0, offset=99), replica(2, 0, offset=5)]
    state, rules = ClusterState("rc-0", 3), fenced("rc-0", "rc-1")
    handover = fenced_master_handover(observed, state, rules)
    assert handover is not None
    p = fence(handover, observed, "rc-0", FENCED, rules.fenced)
    assert p.actions == (
        SetLabel("rc-1", FENCED),  # fenced too: out of the Services before any Redis command
        RecordMaster("rc-2", 4),
        SetLabel("rc-0", FENCED),  # leaves the master Service before the handover
        ReplicaOf("rc-1", "rc-2"),
        Switchover("rc-0", "rc-2"),
        SetLabel("rc-2", Role.MASTER),
    )


def test_a_fenced_master_without_an_unfenced_in_sync_replica_keeps_serving_and_waits() -> None:
    observed = [master(0, online=(1,)), replica(1, 0)]
    handover = fenced_master_handover(observed, ClusterState("rc-0", 1), fenced("rc-0", "rc-1"))
    assert handover is not None
    assert isinstance(handover.actions[0], Wait)
    p = fence(handover, observed, "rc-0", FENCED, frozenset({"rc-0", "rc-1"}))
    assert SetLabel("rc-0", FENCED) not in p.actions  # the master keeps its label meanwhile


def test_an_unfenced_or_down_master_needs_no_fenced_handover() -> None:
    state = ClusterState("rc-0", 1)
    assert fenced_master_handover(healthy(3), state, fenced("rc-1")) is None
    assert fenced_master_handover([gone(0), replica(1, 0)], state, fenced("rc-0")) is None


def test_fencing_keeps_the_reason_of_a_failover_plan() -> None:
    observed = [gone(0), replica(1, 0, offset=99), replica(2, 0, offset=5)]
    p = plan(observed, ClusterState("rc-0", 1), fenced("rc-2"), master_unhealthy_for=60)
    assert p.reason == "master rc-0 is down"
    labelled = fence(p, observed, "rc-0", FENCED, frozenset({"rc-2"}))
    assert labelled.actions[0] == SetLabel("rc-2", FENCED)  # the plan did change
    assert labelled.reason == p.reason  # what the FailoverCompleted Event says
