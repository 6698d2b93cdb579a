"""execute.stages: which actions of a plan run together, and in which order."""

from __future__ import annotations

from examples.rediscluster.replication.execute import stages
from examples.rediscluster.replication.topology_types import (
    Demote,
    Promote,
    RecordMaster,
    ReplicaOf,
    Role,
    SetLabel,
    Switchover,
    Wait,
)

FAILOVER = (
    RecordMaster("r-1", 2),
    SetLabel("r-0", Role.REPLICA),
    Promote("r-1"),
    ReplicaOf("r-2", "r-1"),
    Demote("r-3", "r-1"),
    SetLabel("r-1", Role.MASTER),
)


def test_a_failover_is_epoch_then_labels_then_promotion_then_every_replica_and_the_label_at_once() -> None:
    assert stages(FAILOVER) == [
        (RecordMaster("r-1", 2),),
        (SetLabel("r-0", Role.REPLICA),),
        (Promote("r-1"),),
        (ReplicaOf("r-2", "r-1"), Demote("r-3", "r-1"), SetLabel("r-1", Role.MASTER)),
    ]


def test_the_label_of_a_pod_that_does_not_answer_leaves_beside_the_promotion() -> None:
    assert stages(FAILOVER, unreachable=frozenset({"r-0"})) == [
        (RecordMaster("r-1", 2),),
        (SetLabel("r-0", Role.REPLICA), Promote("r-1")),
        (ReplicaOf("r-2", "r-1"), Demote("r-3", "r-1"), SetLabel("r-1", Role.MASTER)),
    ]


def test_barriers_keep_their_place_and_nothing_crosses_them() -> None:
    plan = (
        SetLabel("r-0", Role.REPLICA),
        Switchover("r-0", "r-1"),
        ReplicaOf("r-2", "r-1"),
        Wait("next plan"),
        SetLabel("r-1", Role.MASTER),
    )
    assert stages(plan) == [
        (SetLabel("r-0", Role.REPLICA),),
        (Switchover("r-0", "r-1"),),
        (ReplicaOf("r-2", "r-1"),),
        (Wait("next plan"),),
        (SetLabel("r-1", Role.MASTER),),
    ]


def test_every_action_is_in_exactly_one_stage_in_plan_order_within_its_class() -> None:
    flat = [a for stage in stages(FAILOVER, unreachable=frozenset({"r-0"})) for a in stage]
    assert sorted(map(repr, flat)) == sorted(map(repr, FAILOVER))
    assert stages(()) == []
